"""Tiny Qwen3.5 hybrid text model (``Qwen3_5ForCausalLM``, ``model_type`` ``qwen3_5_text``, GGUF ``qwen35``).

Checked against the sources (via the search tool):

- transformers ``models/qwen3_5`` (``configuration_qwen3_5.py`` @008e5743, ``modeling_qwen3_5.py`` @009e78d6):
  ``Qwen3_5TextConfig.model_type == "qwen3_5_text"``; ``layer_types[i]`` is ``full_attention`` iff
  ``(i + 1) % full_attention_interval == 0``; ``partial_rotary_factor`` defaults to 0.25 and lives in
  ``rope_parameters`` (with ``mrope_section``, default ``[11, 11, 10]``, interleaved — identical to
  plain RoPE for text-only positions); ``Qwen3_5RMSNorm`` is zero-centred ``x̂·(1+w)`` (init 0) for
  the layer norms, the final norm and ``q_norm``/``k_norm``; ``linear_attn.norm`` is
  ``Qwen3_5RMSNormGated`` ``w·x̂·silu(z)`` (init 1); ``q_proj`` has ``2·heads·head_dim`` rows laid out
  per head as ``[query | gate]``; the gated delta net owns ``in_proj_qkv`` (q|k|v), ``in_proj_z``,
  ``in_proj_b``, ``in_proj_a``, ``conv1d [C,1,k]``, ``dt_bias``, ``A_log``, ``norm [dv]``, ``out_proj``,
  value heads grouped per key head (``repeat_interleave``: value head ``j`` reads key head ``j // r``).
- llama.cpp ``conversion/qwen.py`` @03173d5e (``Qwen3_5TextModel`` → ``_LinearAttentionVReorderBase`` →
  ``Qwen3NextModel``), ``conversion/base.py`` @00bd27a6, and gguf-py 0.19 ``constants.py`` (``MODEL_ARCH.QWEN35`` → ``"qwen35"``, its tensor
  list: ``post_attention_norm`` not ``ffn_norm``, ``attn_qkv``, ``attn_gate``, ``ssm_beta``,
  ``ssm_alpha``, ``ssm_a``, ``ssm_dt``, ``ssm_conv1d``, ``ssm_norm``, ``ssm_out``). Value transforms, in
  llama.cpp's order: (1) when key heads ≠ value heads, value heads go from grouped ``(k, r)`` to
  tiled ``(r, k)`` order in the V rows of ``in_proj_qkv``, the rows of ``in_proj_z``/``in_proj_b``/
  ``in_proj_a``, ``A_log``, ``dt_bias``, the V channels of ``conv1d`` and the input columns of
  ``out_proj``; (2) ``A_log → -exp(A_log)`` (``ssm_a``), ``dt_bias → dt_proj.bias`` (``ssm_dt.bias``),
  ``conv1d`` squeezed to ``[C, k]``, ``+1`` on every ``*norm.weight`` except ``linear_attn.norm``;
  ``q_proj`` is written whole as ``attn_q``. Metadata adds ``ssm.conv_kernel``, ``ssm.state_size``
  (= key head dim), ``ssm.group_count`` (= key heads), ``ssm.time_step_rank`` (= value heads),
  ``ssm.inner_size`` (= value head dim × value heads), ``full_attention_interval``,
  ``rope.dimension_count`` (= ``int(head_dim × partial_rotary_factor)``) and
  ``rope.dimension_sections`` (``mrope_section`` padded to 4); tokenizer pre ``qwen35``.
  The bf16 source path is reproduced: llama.cpp upcasts bf16 to float32 before ``+1`` and ``-exp``.

Default dims: 8 layers (full attention at 3 and 7), hidden 128, intermediate 256, vocab 512;
attention 4 query heads / 2 KV heads of 32 (rotary dim 8); gated delta net 2 key heads / 4 value heads
of 32, conv kernel 4; untied head. No MTP layers unless ``mtp_num_hidden_layers`` is set (then the
``mtp.*`` head of :mod:`tinymodels.mtp`: HF tensors, ``mtp/...`` logical parameters, GGUF blocks
``blk.{L}``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, mtp, qwen3, tokenizer
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import TensorSpec

MODEL_NAME = "qwen35"  # the name `python -m tinymodels` and regression cases use

ARCH = gguf.MODEL_ARCH.QWEN35
TOKENIZER_PRE = "qwen35"


def _layer_types(cfg: Mapping) -> list[str]:
    every = cfg["full_attention_interval"]
    return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(cfg["num_hidden_layers"])]


def config(**overrides) -> dict:
    """The ``config.json`` content of a ``Qwen3_5ForCausalLM`` (transformers 5 fields), with overrides."""
    base = {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "bos_token_id": qwen3._special("<|endoftext|>"),
        "eos_token_id": qwen3._special("<|im_end|>"),
        "dtype": "bfloat16",
        "full_attention_interval": 4,
        "head_dim": 32,
        "hidden_act": "silu",
        "hidden_size": 128,
        "initializer_range": 0.02,
        "intermediate_size": 256,
        "layer_types": [],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 32,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_value_head_dim": 32,
        "max_position_embeddings": 4096,
        "num_attention_heads": 4,
        "num_hidden_layers": 8,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [2, 1, 1],
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000000.0,
            "rope_type": "default",
        },
        "tie_word_embeddings": False,
        "transformers_version": "5.0.0",
        "use_cache": True,
        "vocab_size": 512,
    }
    cfg = qwen3.apply_overrides(base, overrides, _layer_types)
    if cfg["linear_num_value_heads"] % cfg["linear_num_key_heads"]:
        raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
    return cfg


def _gdn_specs(prefix: str, cfg: Mapping) -> list[TensorSpec]:
    h = cfg["hidden_size"]
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    key_dim, value_dim = hk * cfg["linear_key_head_dim"], hv * cfg["linear_value_head_dim"]
    a = f"{prefix}.linear_attn"
    return [
        TensorSpec(f"{a}.in_proj_qkv.weight", (2 * key_dim + value_dim, h), "linear"),
        TensorSpec(f"{a}.in_proj_z.weight", (value_dim, h), "linear"),
        TensorSpec(f"{a}.in_proj_b.weight", (hv, h), "linear"),
        TensorSpec(f"{a}.in_proj_a.weight", (hv, h), "linear"),
        TensorSpec(f"{a}.conv1d.weight", (2 * key_dim + value_dim, 1, cfg["linear_conv_kernel_dim"]), "conv"),
        TensorSpec(f"{a}.dt_bias", (hv,), "dt_bias"),
        TensorSpec(f"{a}.A_log", (hv,), "a_log"),
        TensorSpec(f"{a}.norm.weight", (cfg["linear_value_head_dim"],), "norm_one"),
        TensorSpec(f"{a}.out_proj.weight", (h, value_dim), "residual"),
    ]


def tensor_specs(cfg: Mapping) -> list[TensorSpec]:
    """Every HF tensor of the checkpoint (``model.*``, ``lm_head``, ``mtp.*``), in a stable order."""
    return text_specs(cfg) + mtp.mtp_specs(cfg, qwen3.mlp_specs)


def text_specs(cfg: Mapping) -> list[TensorSpec]:
    """The text model's HF tensors (``model.*`` and ``lm_head``)."""
    return hybrid_specs(cfg, _gdn_specs, lambda p, layer: qwen3.mlp_specs(p, cfg))


def hybrid_specs(cfg: Mapping, gdn_specs: Callable[[str, Mapping], list], ffn: Callable[[str, int], list]) -> list:
    """The text tensors of the hybrid schedule (Qwen3.5, Qwen3.5-MoE, Qwen3-Next): per ``layer_types``
    entry gated full attention or ``gdn_specs(prefix, cfg)``, then ``ffn(prefix, layer)``; zero-centred
    norms (:func:`tinymodels.qwen3.decoder_specs`)."""
    def mixer(p: str, kind: str) -> list:
        return qwen3.attention_specs(p, cfg, "norm_zero", gated=True) if kind == "full_attention" else gdn_specs(p, cfg)

    return qwen3.decoder_specs(cfg, cfg["layer_types"], mixer, ffn, "norm_zero")


def hf_tensors(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact)."""
    return {s.name: s.values(seed) for s in tensor_specs(cfg)}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """The same values under the contract's logical names: HF order (grouped V heads), query and gate
    split per head, ``a_log`` (not ``ssm_a``), norms un-shifted, ``conv1d`` squeezed to ``[C, k]``."""
    hf = hf_tensors(cfg, seed)
    out = qwen3.common_logical(hf, cfg)
    out.update(mtp.mtp_logical(cfg, seed, lambda prefix, i: _mtp_mlp_logical(hf, prefix, i)))
    for layer, kind in enumerate(cfg["layer_types"]):
        if kind == "full_attention":
            out.update(qwen3.attention_logical(hf, cfg, layer, gated=True))
        else:
            out.update(gdn_logical(hf, cfg, layer))
    return out


def gdn_logical(hf: Mapping[str, np.ndarray], cfg: Mapping, layer: int) -> dict[str, np.ndarray]:
    """One gated-delta-net layer's ``text/layers/{l}/gdn/*`` from its ``in_proj_qkv`` / ``in_proj_z`` / ...."""
    key_dim = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
    a, q = f"model.layers.{layer}.linear_attn", f"text/layers/{layer}/gdn"
    qkv = hf[f"{a}.in_proj_qkv.weight"]
    return {
        f"{q}/query": qkv[:key_dim],
        f"{q}/key": qkv[key_dim : 2 * key_dim],
        f"{q}/value": qkv[2 * key_dim :],
        f"{q}/z": hf[f"{a}.in_proj_z.weight"],
        f"{q}/b": hf[f"{a}.in_proj_b.weight"],
        f"{q}/a": hf[f"{a}.in_proj_a.weight"],
        **gdn_common_logical(hf, layer),
    }


def gdn_common_logical(hf: Mapping[str, np.ndarray], layer: int) -> dict[str, np.ndarray]:
    """The gated-delta-net parameters Qwen3.5 and Qwen3-Next share (conv squeezed to ``[C, k]``)."""
    a, q = f"model.layers.{layer}.linear_attn", f"text/layers/{layer}/gdn"
    return {
        f"{q}/conv1d": hf[f"{a}.conv1d.weight"][:, 0, :],
        f"{q}/dt_bias": hf[f"{a}.dt_bias"],
        f"{q}/a_log": hf[f"{a}.A_log"],
        f"{q}/norm": hf[f"{a}.norm.weight"],
        f"{q}/output": hf[f"{a}.out_proj.weight"],
    }


def _mtp_mlp_logical(hf: Mapping[str, np.ndarray], prefix: str, index: int) -> dict[str, np.ndarray]:
    return {f"mtp/layers/{index}/mlp/{part}": hf[f"{prefix}.mlp.{part}_proj.weight"] for part in ("gate", "up", "down")}


def grouped_to_tiled(x: np.ndarray, axis: int, num_k_heads: int, num_v_per_k: int, head_dim: int) -> np.ndarray:
    """llama.cpp ``_reorder_v_heads``: along ``axis``, ``(k, r, head_dim)`` → ``(r, k, head_dim)``."""
    axis %= x.ndim
    shape = x.shape
    split = x.reshape(*shape[:axis], num_k_heads, num_v_per_k, head_dim, *shape[axis + 1 :])
    return np.swapaxes(split, axis, axis + 1).reshape(shape)


def _llama_cpp_transform(cfg: Mapping, spec: TensorSpec) -> qwen3.Transform | None:
    """The value change ``Qwen3_5TextModel.modify_tensors`` applies to ``spec`` (None: unchanged)."""
    name, shape = spec.name, spec.shape
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, r = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], hv // hk
    qk = 2 * hk * dk
    reorder = hk != hv and "linear_attn." in name

    def v_rows(x: np.ndarray, start: int, head_dim: int) -> np.ndarray:
        if not reorder:
            return x
        return np.concatenate([x[:start], grouped_to_tiled(x[start:], 0, hk, r, head_dim)], axis=0)

    if name.endswith(".in_proj_qkv.weight"):
        return (lambda x: v_rows(x, qk, dv)), shape
    if name.endswith(".in_proj_z.weight"):
        return (lambda x: v_rows(x, 0, dv)), shape
    if name.endswith((".in_proj_b.weight", ".in_proj_a.weight", ".dt_bias")):
        return (lambda x: v_rows(x, 0, 1)), shape
    if name.endswith(".A_log"):
        return (lambda x: -np.exp(v_rows(x, 0, 1), dtype=np.float32)), shape
    if name.endswith(".conv1d.weight"):
        return (lambda x: v_rows(x[:, 0, :], qk, dv)), (shape[0], shape[2])
    if name.endswith(".out_proj.weight"):
        return (lambda x: grouped_to_tiled(x, 1, hk, r, dv) if reorder else x), shape
    if name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
        return (lambda x: x + np.float32(1.0)), shape
    return None


def gguf_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32") -> list[PlannedTensor]:
    transform = lambda s: _llama_cpp_transform(cfg, s)  # noqa: E731
    return (qwen3.gguf_plan(cfg, text_specs(cfg), ARCH, matrix_type, seed, transform)
            + mtp.gguf_tensors(cfg, mtp.mtp_specs(cfg, qwen3.mlp_specs), ARCH, matrix_type, seed, transform))


def add_metadata(w: gguf.GGUFWriter, cfg: Mapping, matrix_type: str | None, name: str = "Tiny Qwen3.5",
                 file_type: int | None = None) -> None:
    """The KV pairs ``Qwen3_5TextModel`` writes (also used for ``qwen35moe`` and the Bonsai files)."""
    qwen3.add_base_metadata(w, cfg, name, matrix_type, cfg["num_hidden_layers"] + mtp.layers(cfg), file_type)
    _, partial = qwen3.rope_settings(cfg, 0.25)
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    w.add_full_attention_interval(cfg.get("full_attention_interval", 4))
    w.add_rope_dimension_count(int(cfg["head_dim"] * partial))
    sections = list(cfg["rope_parameters"].get("mrope_section", [11, 11, 10]))
    w.add_rope_dimension_sections((sections + [0, 0, 0, 0])[:4])
    mtp.add_metadata(w, cfg)
    gguf_writer.add_tokenizer(w, tokenizer.resources(), cfg, TOKENIZER_PRE)


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, **overrides) -> Path:
    """The HF checkpoint directory (config, sharded safetensors, index, tokenizer files)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg), tokenizer.resources(), seed=seed, dtype=dtype,
                                  shards=shards)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               **overrides) -> Path:
    """The GGUF llama.cpp's converter would write from :func:`write_hf_dir`'s directory.

    ``overrides`` (HF field names or the aliases ``layers``, ``hidden``, ``intermediate``, ``vocab``,
    ``heads``, ``kv_heads``) size the model when no ``cfg`` is given; tensors are streamed, so
    multi-GB files are written with bounded memory.
    """
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[ARCH], lambda w: add_metadata(w, cfg, matrix_type),
                                       gguf_tensors(cfg, seed, matrix_type))
