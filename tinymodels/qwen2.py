"""Tiny Qwen2 / Qwen2.5 dense model (``Qwen2ForCausalLM``, ``model_type`` ``qwen2``, GGUF arch ``qwen2``).

Checked against the sources (via the search tool):

- transformers ``models/qwen2``: plain RMSNorm ``w·x̂`` (weights around 1), no q/k norms, ``q_proj`` /
  ``k_proj`` / ``v_proj`` with a bias (``o_proj`` without), GQA, SwiGLU MLP, head size
  ``hidden_size // num_attention_heads`` (``Qwen2Config`` has no ``head_dim``), ``tie_word_embeddings``
  (tied checkpoints carry no ``lm_head.weight``).
- llama.cpp ``convert_hf_to_gguf.py`` ``Qwen2Model`` (→ ``TextModel``): no value transform and no Q/K
  permutation (NEOX rope); names from gguf-py ``TensorNameMap`` for ``MODEL_ARCH.QWEN2`` (``attn_q/k/v``
  with ``.weight`` and ``.bias``, ``attn_output``, ``attn_norm``, ``ffn_norm``, ``ffn_gate/up/down``,
  ``token_embd``, ``output_norm``, ``output``); metadata from ``TextModel.set_gguf_parameters``
  (block_count, context_length, embedding_length, feed_forward_length, attention.head_count(_kv),
  rope.freq_base, attention.layer_norm_rms_epsilon, file_type; no key_length: the config has no
  head_dim); tokenizer pre ``qwen2``.

Two configs: :func:`config` is Qwen2-like (transformers 5 ``rope_parameters``, tied head, theta 1e6);
:func:`config_qwen25` is Qwen2.5-like as its published ``config.json`` files are written (transformers 4:
top-level ``rope_theta``, here 1e4, and an untied head). Default dims: 3 layers, hidden 128,
intermediate 256, 4 query heads / 2 KV heads of 32, vocab 512.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, qwen3, tokenizer
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import TensorSpec

MODEL_NAME = "qwen2"  # the name `python -m tinymodels` and regression cases use

ARCH = gguf.MODEL_ARCH.QWEN2
TOKENIZER_PRE = "qwen2"


def config(**overrides) -> dict:
    """A Qwen2-like ``config.json`` (transformers 5 ``Qwen2Config.to_dict`` fields), with overrides."""
    base = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "attention_dropout": 0.0,
        "bos_token_id": qwen3._special("<|endoftext|>"),
        "eos_token_id": qwen3._special("<|im_end|>"),
        "dtype": "bfloat16",
        "hidden_act": "silu",
        "hidden_size": 128,
        "initializer_range": 0.02,
        "intermediate_size": 256,
        "layer_types": [],
        "max_position_embeddings": 4096,
        "max_window_layers": 3,
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
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
    return qwen3.apply_overrides(base, overrides, lambda c: ["full_attention"] * c["num_hidden_layers"])


def config_qwen25(**overrides) -> dict:
    """A Qwen2.5-like ``config.json`` (transformers 4 layout: top-level ``rope_theta``, no ``rope_parameters``
    or ``layer_types``), untied, theta 1e4; ``overrides`` as for :func:`config`."""
    cfg = config(**{"tie_word_embeddings": False, "rope_theta": 10000.0, **overrides})
    rope = cfg.pop("rope_parameters")
    cfg.pop("layer_types")
    return {**cfg, "rope_theta": rope["rope_theta"], "transformers_version": "4.43.1"}


def head_dim(cfg: Mapping) -> int:
    return cfg["hidden_size"] // cfg["num_attention_heads"]


def attention_specs(prefix: str, cfg: Mapping) -> list[TensorSpec]:
    h, hd = cfg["hidden_size"], head_dim(cfg)
    nq, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    a = f"{prefix}.self_attn"
    return [
        TensorSpec(f"{a}.q_proj.weight", (nq * hd, h), "linear"),
        TensorSpec(f"{a}.q_proj.bias", (nq * hd,), "bias"),
        TensorSpec(f"{a}.k_proj.weight", (nkv * hd, h), "linear"),
        TensorSpec(f"{a}.k_proj.bias", (nkv * hd,), "bias"),
        TensorSpec(f"{a}.v_proj.weight", (nkv * hd, h), "linear"),
        TensorSpec(f"{a}.v_proj.bias", (nkv * hd,), "bias"),
        TensorSpec(f"{a}.o_proj.weight", (h, nq * hd), "residual"),
    ]


def tensor_specs(cfg: Mapping) -> list[TensorSpec]:
    """Every HF tensor of the checkpoint, in a stable order."""
    return qwen3.decoder_specs(cfg, ["full_attention"] * cfg["num_hidden_layers"],
                               lambda p, kind: attention_specs(p, cfg), lambda p, layer: qwen3.mlp_specs(p, cfg),
                               "norm_one")


def hf_tensors(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact)."""
    return {s.name: s.values(seed) for s in tensor_specs(cfg)}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """The same values under the contract's logical names (``text/...``), HF order, no transform."""
    hf = hf_tensors(cfg, seed)
    out = qwen3.common_logical(hf, cfg)
    for layer in range(cfg["num_hidden_layers"]):
        a, q = f"model.layers.{layer}.self_attn", f"text/layers/{layer}/attention"
        for hf_part, part in (("q", "query"), ("k", "key"), ("v", "value")):
            out[f"{q}/{part}"] = hf[f"{a}.{hf_part}_proj.weight"]
            out[f"{q}/{part}_bias"] = hf[f"{a}.{hf_part}_proj.bias"]
        out[f"{q}/output"] = hf[f"{a}.o_proj.weight"]
    return out


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, **overrides) -> Path:
    """The HF checkpoint directory (config, sharded safetensors, index, tokenizer files)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg), tokenizer.resources(), seed=seed, dtype=dtype,
                                  shards=shards)


def gguf_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32") -> list[PlannedTensor]:
    return qwen3.gguf_plan(cfg, tensor_specs(cfg), ARCH, matrix_type, seed, lambda spec: None)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               **overrides) -> Path:
    """The GGUF llama.cpp's converter would write from :func:`write_hf_dir`'s directory."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    rope = cfg.get("rope_parameters") or {}

    def metadata(w: gguf.GGUFWriter) -> None:
        w.add_type(gguf.GGUFType.MODEL)
        w.add_name("Tiny Qwen2")
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(cfg["hidden_size"])
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(cfg["num_attention_heads"])
        w.add_head_count_kv(cfg["num_key_value_heads"])
        w.add_rope_freq_base(float(rope.get("rope_theta", cfg.get("rope_theta"))))
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_file_type(gguf_writer.matrix_type(matrix_type)[1])
        gguf_writer.add_tokenizer(w, tokenizer.resources(), cfg, TOKENIZER_PRE)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[ARCH], metadata,
                                       gguf_tensors(cfg, seed, matrix_type))
