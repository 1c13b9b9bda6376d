"""Tiny Qwen3 dense model (``Qwen3ForCausalLM``, ``model_type`` ``qwen3``, GGUF arch ``qwen3``).

Checked against the sources (via the search tool):

- transformers ``models/qwen3``: plain RMSNorm ``w·x̂`` (weights around 1), per-head ``q_norm`` /
  ``k_norm`` on ``head_dim`` before RoPE, GQA, SwiGLU MLP, ``tie_word_embeddings`` (tied checkpoints
  carry no ``lm_head.weight``). transformers 5 configs keep ``rope_theta`` inside ``rope_parameters``.
- llama.cpp ``conversion/qwen.py`` @03173d5e ``Qwen3Model`` (→ ``Qwen2Model`` → ``TextModel``): no value
  transform; names from gguf-py ``TensorNameMap`` for ``MODEL_ARCH.QWEN3`` (``attn_norm``,
  ``attn_q/k/v``, ``attn_output``, ``attn_q_norm``, ``attn_k_norm``, ``ffn_norm``, ``ffn_gate/up/down``,
  ``token_embd``, ``output_norm``, ``output``); metadata from ``TextModel.set_gguf_parameters``
  (block_count, context_length, embedding_length, feed_forward_length, attention.head_count(_kv),
  rope.freq_base, attention.layer_norm_rms_epsilon, attention.key_length/value_length, file_type; no
  rope.dimension_count: llama.cpp then rotates the whole head); tokenizer pre ``qwen2``.

Default dims: 4 layers, hidden 128, intermediate 256, 4 query heads / 2 KV heads of 32, vocab 512
(355 tokenizer ids, the rest padding), tied head. The helpers below are reused by :mod:`qwen35`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, tokenizer
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import TensorSpec

MODEL_NAME = "qwen3"  # the name `python -m tinymodels` and regression cases use

ARCH = gguf.MODEL_ARCH.QWEN3
TOKENIZER_PRE = "qwen2"

ALIASES = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "intermediate": "intermediate_size",
    "vocab": "vocab_size",
    "heads": "num_attention_heads",
    "kv_heads": "num_key_value_heads",
}

# Transform of one HF tensor into its GGUF value: (function on the whole HF array, GGUF numpy shape).
Transform = tuple[Callable[[np.ndarray], np.ndarray], tuple[int, ...]]


def _special(name: str) -> int:
    return dict(tokenizer.default_special_ids())[name]


def rope_settings(cfg: Mapping, default_partial: float) -> tuple[float, float]:
    """``(rope_theta, partial_rotary_factor)`` from ``rope_parameters`` (transformers 5) or top level."""
    rope = cfg.get("rope_parameters") or {}
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    if theta is None:
        raise KeyError("rope_theta missing from config (rope_parameters.rope_theta or rope_theta)")
    return float(theta), float(rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", default_partial)))


def apply_overrides(cfg: dict, overrides: Mapping, layer_types: Callable[[dict], list[str]]) -> dict:
    """Apply HF-field (or alias) overrides; ``rope_theta``/``partial_rotary_factor`` go to ``rope_parameters``."""
    cfg = {**cfg, "rope_parameters": dict(cfg["rope_parameters"])}
    explicit_layer_types = "layer_types" in overrides
    for key, value in overrides.items():
        key = ALIASES.get(key, key)
        if key in ("rope_theta", "partial_rotary_factor", "mrope_section"):
            cfg["rope_parameters"][key] = value
        else:
            cfg[key] = value
    if not explicit_layer_types:
        cfg["layer_types"] = layer_types(cfg)
    if cfg["vocab_size"] < tokenizer.default_size():
        raise ValueError(f"vocab_size {cfg['vocab_size']} is smaller than the tokenizer ({tokenizer.default_size()})")
    if len(cfg["layer_types"]) != cfg["num_hidden_layers"]:
        raise ValueError("layer_types must have num_hidden_layers entries")
    if cfg["num_attention_heads"] % cfg["num_key_value_heads"]:
        raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
    return cfg


def config(**overrides) -> dict:
    """The ``config.json`` content (transformers 5 ``Qwen3Config.to_dict`` fields), with overrides."""
    base = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": _special("<|endoftext|>"),
        "eos_token_id": _special("<|im_end|>"),
        "dtype": "bfloat16",
        "head_dim": 32,
        "hidden_act": "silu",
        "hidden_size": 128,
        "initializer_range": 0.02,
        "intermediate_size": 256,
        "layer_types": [],
        "max_position_embeddings": 4096,
        "max_window_layers": 4,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "sliding_window": None,
        "tie_word_embeddings": True,
        "transformers_version": "5.0.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 512,
    }
    return apply_overrides(base, overrides, lambda c: ["full_attention"] * c["num_hidden_layers"])


def global_specs(cfg: Mapping) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """(embedding first, final norm + head last) — the final norm's initialiser is set by the caller."""
    v, h = cfg["vocab_size"], cfg["hidden_size"]
    tail = [] if cfg["tie_word_embeddings"] else [TensorSpec("lm_head.weight", (v, h), "linear")]
    return [TensorSpec("model.embed_tokens.weight", (v, h), "embedding")], tail


def attention_specs(prefix: str, cfg: Mapping, norm_init: str, gated: bool) -> list[TensorSpec]:
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    nq, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    a = f"{prefix}.self_attn"
    return [
        TensorSpec(f"{a}.q_proj.weight", ((2 if gated else 1) * nq * hd, h), "linear"),
        TensorSpec(f"{a}.k_proj.weight", (nkv * hd, h), "linear"),
        TensorSpec(f"{a}.v_proj.weight", (nkv * hd, h), "linear"),
        TensorSpec(f"{a}.o_proj.weight", (h, nq * hd), "residual"),
        TensorSpec(f"{a}.q_norm.weight", (hd,), norm_init),
        TensorSpec(f"{a}.k_norm.weight", (hd,), norm_init),
    ]


def mlp_specs(prefix: str, cfg: Mapping) -> list[TensorSpec]:
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    return [
        TensorSpec(f"{prefix}.mlp.gate_proj.weight", (i, h), "linear"),
        TensorSpec(f"{prefix}.mlp.up_proj.weight", (i, h), "linear"),
        TensorSpec(f"{prefix}.mlp.down_proj.weight", (h, i), "residual"),
    ]


def tensor_specs(cfg: Mapping) -> list[TensorSpec]:
    """Every HF tensor of the checkpoint, in a stable order."""
    return decoder_specs(cfg, ["full_attention"] * cfg["num_hidden_layers"],
                         lambda p, kind: attention_specs(p, cfg, "norm_one", gated=False),
                         lambda p, layer: mlp_specs(p, cfg), "norm_one")


def decoder_specs(cfg: Mapping, layer_kinds: Iterable[str], mixer: Callable[[str, str], list],
                  ffn: Callable[[str, int], list], norm: str) -> list:
    """A decoder's text tensors in HF order: the ``global_specs`` head, then per layer (one per entry of
    ``layer_kinds``) ``input_layernorm``, ``mixer(prefix, kind)``, ``post_attention_layernorm`` and
    ``ffn(prefix, layer)``, then ``model.norm`` and the tail; every norm of TensorSpec kind ``norm``."""
    head, tail = global_specs(cfg)
    specs = list(head)
    h = cfg["hidden_size"]
    for layer, kind in enumerate(layer_kinds):
        p = f"model.layers.{layer}"
        specs.append(TensorSpec(f"{p}.input_layernorm.weight", (h,), norm))
        specs += mixer(p, kind)
        specs.append(TensorSpec(f"{p}.post_attention_layernorm.weight", (h,), norm))
        specs += ffn(p, layer)
    return specs + [TensorSpec("model.norm.weight", (h,), norm)] + tail


def hf_tensors(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact)."""
    return {s.name: s.values(seed) for s in tensor_specs(cfg)}


def common_logical(hf: Mapping[str, np.ndarray], cfg: Mapping,
                   mlp_layers: Iterable[int] | None = None) -> dict[str, np.ndarray]:
    """Globals and the per-layer norms and dense MLP (of ``mlp_layers``, default every layer)."""
    dense = set(range(cfg["num_hidden_layers"]) if mlp_layers is None else mlp_layers)
    out = {
        "text/token_embedding": hf["model.embed_tokens.weight"],
        "text/output_head": hf["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else hf["lm_head.weight"],
        "text/final_norm": hf["model.norm.weight"],
    }
    for layer in range(cfg["num_hidden_layers"]):
        p, q = f"model.layers.{layer}", f"text/layers/{layer}"
        out[f"{q}/input_norm"] = hf[f"{p}.input_layernorm.weight"]
        out[f"{q}/post_attention_norm"] = hf[f"{p}.post_attention_layernorm.weight"]
        if layer not in dense:
            continue
        for part in ("gate", "up", "down"):
            out[f"{q}/mlp/{part}"] = hf[f"{p}.mlp.{part}_proj.weight"]
    return out


def attention_logical(hf: Mapping[str, np.ndarray], cfg: Mapping, layer: int, gated: bool) -> dict[str, np.ndarray]:
    """Full-attention parameters; a gated ``q_proj`` is split per head into ``[query | gate]`` rows."""
    a, q = f"model.layers.{layer}.self_attn", f"text/layers/{layer}/attention"
    nq, hd = cfg["num_attention_heads"], cfg["head_dim"]
    out = {
        f"{q}/key": hf[f"{a}.k_proj.weight"],
        f"{q}/value": hf[f"{a}.v_proj.weight"],
        f"{q}/output": hf[f"{a}.o_proj.weight"],
        f"{q}/query_norm": hf[f"{a}.q_norm.weight"],
        f"{q}/key_norm": hf[f"{a}.k_norm.weight"],
    }
    q_proj = hf[f"{a}.q_proj.weight"]
    if gated:
        per_head = q_proj.reshape(nq, 2, hd, q_proj.shape[-1])
        out[f"{q}/query"] = per_head[:, 0].reshape(nq * hd, -1)
        out[f"{q}/gate"] = per_head[:, 1].reshape(nq * hd, -1)
    else:
        out[f"{q}/query"] = q_proj
    return out


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """The same values under the contract's logical names (``text/...``), HF order, no transform."""
    hf = hf_tensors(cfg, seed)
    out = common_logical(hf, cfg)
    for layer in range(cfg["num_hidden_layers"]):
        out.update(attention_logical(hf, cfg, layer, gated=False))
    return out


def gguf_plan(
    cfg: Mapping,
    specs: list[TensorSpec],
    model_arch: gguf.MODEL_ARCH,
    matrix_type: str,
    seed: int,
    transform: Callable[[TensorSpec], Transform | None],
) -> list[PlannedTensor]:
    """GGUF tensors for ``specs``: names by gguf-py's ``TensorNameMap``, values via ``transform``."""
    names = gguf_writer.tensor_name_map(model_arch, cfg["num_hidden_layers"])
    plan = []
    for spec in specs:
        hf_name = spec.name.replace(".dt_bias", ".dt_proj.bias")  # as Qwen3NextModel.modify_tensors renames it
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise KeyError(f"{spec.name}: no GGUF name for {model_arch.name}")
        change = transform(spec)
        flat_rows = None
        if change is None:
            rows, shape, whole = (lambda a, b, s=spec: s.values(seed, a, b)), spec.shape, False
            if hasattr(spec, "flat_values"):  # an expert bank (synth.StackedSpec): stream below one expert
                flat_rows = lambda a, b, s=spec: s.flat_values(seed, a, b)  # noqa: E731
        else:
            fn, shape = change
            rows, whole = (lambda a, b, s=spec, f=fn: f(s.values(seed))[a:b]), True
        qtype = gguf_writer.tensor_qtype(gguf_name, shape, matrix_type)
        plan.append(PlannedTensor(gguf_name, tuple(shape), qtype, rows, whole, flat_rows))
    return plan


def add_base_metadata(w: gguf.GGUFWriter, cfg: Mapping, name: str, matrix_type: str | None,
                      block_count: int | None = None, file_type: int | None = None) -> None:
    """``general.*`` and the keys ``TextModel.set_gguf_parameters`` writes for these configs
    (``block_count`` defaults to ``num_hidden_layers``; MTP blocks add to it). ``general.file_type``
    follows ``matrix_type``, or is ``file_type`` when ``matrix_type`` is None (omitted if that is None)."""
    theta, _ = rope_settings(cfg, 1.0)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    w.add_block_count(cfg["num_hidden_layers"] if block_count is None else block_count)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    if "intermediate_size" in cfg:  # absent in Qwen3.5-MoE, whose every layer is sparse
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    if matrix_type is not None:
        file_type = gguf_writer.matrix_type(matrix_type)[1]
    if file_type is not None:
        w.add_file_type(file_type)


def resolve_config(cfg: Mapping | None, overrides: Mapping, make: Callable[..., dict]) -> dict:
    if cfg is None:
        return make(**overrides)
    if overrides:
        raise TypeError("pass either a config or overrides, not both")
    return dict(cfg)


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, **overrides) -> Path:
    """The HF checkpoint directory (config, sharded safetensors, index, tokenizer files)."""
    cfg = resolve_config(cfg, overrides, config)
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg), tokenizer.resources(), seed=seed, dtype=dtype,
                                  shards=shards)


def gguf_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32") -> list[PlannedTensor]:
    return gguf_plan(cfg, tensor_specs(cfg), ARCH, matrix_type, seed, lambda spec: None)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               **overrides) -> Path:
    """The GGUF llama.cpp's converter would write from :func:`write_hf_dir`'s directory."""
    cfg = resolve_config(cfg, overrides, config)

    def metadata(w: gguf.GGUFWriter) -> None:
        add_base_metadata(w, cfg, "Tiny Qwen3", matrix_type)
        gguf_writer.add_tokenizer(w, tokenizer.resources(), cfg, TOKENIZER_PRE)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[ARCH], metadata,
                                       gguf_tensors(cfg, seed, matrix_type))
