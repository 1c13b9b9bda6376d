"""Tiny z-lab DFlash / DFlash2 block-diffusion drafters (HF safetensors, names without a ``model.`` prefix).

Checked against the sources (via the search tool):

- z-lab/dflash ``dflash/model.py`` @10129599: ``DFlashDraftModel`` (a ``Qwen3PreTrainedModel``) owns
  ``layers.{i}`` (``Qwen3DFlashDecoderLayer``: ``input_layernorm``, ``self_attn.{q,k,v,o}_proj``,
  ``self_attn.{q,k}_norm``, ``post_attention_layernorm``, ``mlp.{gate,up,down}_proj``, plain
  ``Qwen3RMSNorm`` ``w·x̂``), ``norm``, ``fc = Linear(len(target_layer_ids)·H, H)`` and ``hidden_norm``;
  no embedding or head (the target's are used). Attention runs the context (``hidden_norm(fc(target
  hidden states))``) and the noised block through the **same** ``k_proj``/``v_proj``
  (``k_ctx = k_proj(target_hidden)``, ``k_noise = k_proj(hidden_states)``). ``block_size`` and
  ``mask_token_id``/``target_layer_ids`` are read from ``dflash_config`` first, then the top level.
  ``DFlash2DraftModel`` adds per layer ``attention_conv`` and ``mlp_conv`` (``GroupedDynamicCausalConv``:
  ``base_kernel [2, conv_kernel_size, H]``, ``kernel_projection = Linear(H, 2·kernel·H/conv_group_size)``)
  and ``candidate_selector`` (``hidden_projection [selector_rank, H]``, ``predecessor_codebook`` and
  ``successor_codebook`` ``[vocab, selector_rank]``, saved without ``.weight``).
- z-lab/dflash ``tests/fixtures/dflash2-config.json`` and ``dflash2-safetensors-header.json`` @0a7587c0 /
  @0698f537 (the tensor names and shapes above, ``architectures ["DFlash2DraftModel"]``, ``is_causal``
  false, sliding-window layers, every DFlash2 knob inside ``dflash_config``); DFlash (v1) configs
  (``architectures ["DFlashDraftModel"]``) carry ``block_size`` at the top level and ``dflash_config
  {mask_token_id, target_layer_ids}``; ``num_target_layers`` is the target's depth.
- ``build_target_layer_ids`` (z-lab ``dflash/model.py`` helper, its tests): one draft layer reads the
  target's middle layer, otherwise layers ``1 … L−3`` evenly, rounded.

Logical parameters (component prefix ``dflash`` or ``dflash2``; HF values):
``{c}/fc [H, n·H]``, ``{c}/hidden_norm [H]``, ``{c}/final_norm [H]`` (``norm``); per layer
``{c}/layers/{i}/input_norm``, ``post_attention_norm``, ``attention/{query, key, value, output,
query_norm, key_norm}``, ``attention/context_key`` and ``attention/context_value`` (container §12.5: the
same trained ``k_proj``/``v_proj`` values in their context role — equal arrays here), ``mlp/{gate, up,
down}``; DFlash2 adds ``{c}/layers/{i}/attention_conv/{base_kernel, kernel_projection}``,
``{c}/layers/{i}/mlp_conv/{base_kernel, kernel_projection}`` and
``{c}/candidate_selector/{hidden_projection, predecessor_codebook, successor_codebook}``.

Default dims match the tiny Qwen3.5 target (hidden 128, vocab 512, 8 layers): 3 draft layers reading
target layers ``[1, 3, 5]`` (``fc [128, 384]``), 4/2 heads of 32, intermediate 256.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tinymodels import hf_writer, qwen3, qwen35
from tinymodels.synth import TensorSpec

ARCHITECTURES = {1: "DFlashDraftModel", 2: "DFlash2DraftModel"}


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """z-lab's default feature layers of the target for ``num_draft_layers`` draft layers."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return [int(round(start + i * (end - start) / (num_draft_layers - 1))) for i in range(num_draft_layers)]


def config(version: int = 1, target_cfg: Mapping | None = None, **overrides) -> dict:
    """The drafter's ``config.json`` (DFlash ``version`` 1 or DFlash2 ``version`` 2) for ``target_cfg``."""
    if version not in ARCHITECTURES:
        raise ValueError(f"DFlash version {version!r} not supported; choose 1 or 2")
    target = qwen35.config() if target_cfg is None else target_cfg
    layers = int(overrides.pop("num_hidden_layers", 3))
    ids = build_target_layer_ids(target["num_hidden_layers"], layers)
    cfg = {
        "architectures": [ARCHITECTURES[version]],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": target.get("bos_token_id"),
        "dtype": "bfloat16",
        "eos_token_id": target.get("eos_token_id"),
        "head_dim": 32,
        "hidden_act": "silu",
        "hidden_size": target["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": 256,
        "max_position_embeddings": target["max_position_embeddings"],
        "max_window_layers": layers,
        "model_type": "qwen3",
        "num_attention_heads": 4,
        "num_hidden_layers": layers,
        "num_key_value_heads": 2,
        "num_target_layers": target["num_hidden_layers"],
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "tie_word_embeddings": False,
        "transformers_version": "5.0.0",
        "vocab_size": target["vocab_size"],
    }
    dflash = {"mask_token_id": target["vocab_size"] - 1, "target_layer_ids": ids}
    if version == 1:
        cfg.update({"block_size": 16, "dflash_config": dflash, "layer_types": ["full_attention"] * layers,
                    "sliding_window": None, "use_cache": True, "use_sliding_window": False})
    else:
        dflash.update({"block_size": 16, "conv_group_size": 16, "conv_kernel_size": 2, "final_logit_softcapping": 20.0,
                       "output_multiplier": 0.25, "selector_rank": 16, "selector_top_k": 4})
        cfg.update({"dflash_config": dict(sorted(dflash.items())), "is_causal": False,
                    "layer_types": ["sliding_attention"] * layers, "sliding_window": 64, "use_cache": False,
                    "use_sliding_window": True})
    for key, value in overrides.items():
        if key in cfg["dflash_config"]:
            cfg["dflash_config"][key] = value
        else:
            cfg[key] = value
    if len(cfg["dflash_config"]["target_layer_ids"]) < 1:
        raise ValueError("target_layer_ids must not be empty")
    if version == 2 and cfg["hidden_size"] % cfg["dflash_config"]["conv_group_size"]:
        raise ValueError("hidden_size must be a multiple of conv_group_size")
    return dict(sorted(cfg.items()))


def version_of(cfg: Mapping) -> int:
    return 2 if cfg["architectures"][0] == ARCHITECTURES[2] else 1


def component(cfg: Mapping) -> str:
    return "dflash2" if version_of(cfg) == 2 else "dflash"


def _conv(prefix: str, cfg: Mapping) -> list[TensorSpec]:
    h, d = cfg["hidden_size"], cfg["dflash_config"]
    kernel, groups = d["conv_kernel_size"], cfg["hidden_size"] // d["conv_group_size"]
    return [TensorSpec(f"{prefix}.base_kernel", (2, kernel, h), "conv"),
            TensorSpec(f"{prefix}.kernel_projection.weight", (2 * kernel * groups, h), "linear")]


def tensor_specs(cfg: Mapping) -> list[TensorSpec]:
    """Every tensor of the drafter's ``model.safetensors``, in a stable order."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    n = len(cfg["dflash_config"]["target_layer_ids"])
    specs = [TensorSpec("fc.weight", (h, n * h), "linear"), TensorSpec("hidden_norm.weight", (h,), "norm_one")]
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}"
        specs.append(TensorSpec(f"{p}.input_layernorm.weight", (h,), "norm_one"))
        specs += qwen3.attention_specs(p, cfg, "norm_one", gated=False)
        specs.append(TensorSpec(f"{p}.post_attention_layernorm.weight", (h,), "norm_one"))
        specs += qwen3.mlp_specs(p, cfg)
        if version_of(cfg) == 2:
            specs += _conv(f"{p}.attention_conv", cfg) + _conv(f"{p}.mlp_conv", cfg)
    specs.append(TensorSpec("norm.weight", (h,), "norm_one"))
    if version_of(cfg) == 2:
        rank = cfg["dflash_config"]["selector_rank"]
        specs += [TensorSpec("candidate_selector.hidden_projection.weight", (rank, h), "linear"),
                  TensorSpec("candidate_selector.predecessor_codebook", (v, rank), "embedding"),
                  TensorSpec("candidate_selector.successor_codebook", (v, rank), "embedding")]
    return specs


def hf_tensors(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    return {s.name: s.values(seed) for s in tensor_specs(cfg)}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """``dflash/...`` or ``dflash2/...`` logical parameters (context K/V = query K/V values)."""
    hf, c = hf_tensors(cfg, seed), component(cfg)
    out = {f"{c}/fc": hf["fc.weight"], f"{c}/hidden_norm": hf["hidden_norm.weight"], f"{c}/final_norm": hf["norm.weight"]}
    for i in range(cfg["num_hidden_layers"]):
        p, q = f"layers.{i}", f"{c}/layers/{i}"
        out[f"{q}/input_norm"] = hf[f"{p}.input_layernorm.weight"]
        out[f"{q}/post_attention_norm"] = hf[f"{p}.post_attention_layernorm.weight"]
        a = f"{p}.self_attn"
        for key, name in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj"), ("output", "o_proj"),
                          ("query_norm", "q_norm"), ("key_norm", "k_norm")):
            out[f"{q}/attention/{key}"] = hf[f"{a}.{name}.weight"]
        out[f"{q}/attention/context_key"] = hf[f"{a}.k_proj.weight"].copy()
        out[f"{q}/attention/context_value"] = hf[f"{a}.v_proj.weight"].copy()
        for part in ("gate", "up", "down"):
            out[f"{q}/mlp/{part}"] = hf[f"{p}.mlp.{part}_proj.weight"]
        if version_of(cfg) == 2:
            for conv in ("attention_conv", "mlp_conv"):
                out[f"{q}/{conv}/base_kernel"] = hf[f"{p}.{conv}.base_kernel"]
                out[f"{q}/{conv}/kernel_projection"] = hf[f"{p}.{conv}.kernel_projection.weight"]
    if version_of(cfg) == 2:
        s = "candidate_selector"
        out[f"{c}/{s}/hidden_projection"] = hf[f"{s}.hidden_projection.weight"]
        out[f"{c}/{s}/predecessor_codebook"] = hf[f"{s}.predecessor_codebook"]
        out[f"{c}/{s}/successor_codebook"] = hf[f"{s}.successor_codebook"]
    return out


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 1, version: int = 1) -> Path:
    """The drafter's directory as z-lab publishes it: ``config.json`` and ``model.safetensors`` (no
    tokenizer: the target's is used)."""
    cfg = config(version) if cfg is None else cfg
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg), {}, seed=seed, dtype=dtype, shards=shards)
