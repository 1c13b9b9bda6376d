"""Tiny Qwen3-Next (``Qwen3NextForCausalLM``, ``model_type`` ``qwen3_next``, GGUF arch ``qwen3next``): the
hybrid gated-delta-net / gated-attention schedule of Qwen3.5 with the older fused GDN input projections
and a sparse MoE block with a gated shared expert (:mod:`tinymodels.qwen3_moe`).

Checked against the sources (via the search tool):

- transformers ``models/qwen3_next`` (and the vLLM / SGLang ports of ``fix_query_key_value_ordering``):
  ``linear_attn.in_proj_qkvz [2·key_dim + 2·value_dim, H]`` is grouped per key head: viewed as
  ``(Hk, 2·dk + 2·r·dv)`` (``r = Hv / Hk``) each group is ``[q (dk) | k (dk) | v (r·dv) | z (r·dv)]``;
  ``in_proj_ba [2·Hv, H]`` viewed as ``(Hk, 2·r)`` is ``[b (r) | a (r)]`` per group. Value, z, b and a
  come out in grouped order (value head ``j`` belongs to key head ``j // r``), q/k/v are then
  concatenated for ``conv1d [2·key_dim + value_dim, 1, k]``. Attention is gated (``q_proj`` rows per
  head ``[query | gate]``), norms are zero-centred except the gated ``linear_attn.norm``;
  ``partial_rotary_factor`` 0.25, plain (not multimodal) RoPE.
- llama.cpp ``conversion/qwen.py`` @03173d5e ``Qwen3NextModel`` (not the V-reordering base): ``in_proj_qkvz``
  is regrouped into ``attn_qkv`` = ``[q of all heads | k of all heads | v of all heads]`` (grouped V
  order) and ``attn_gate`` = z (grouped); ``in_proj_ba`` goes unchanged to ``blk.N.ssm_ba``
  (``SSM_BETA_ALPHA``, the per-group interleaved ``[b | a]`` rows); ``A_log → -exp`` (``ssm_a``),
  ``dt_bias → ssm_dt.bias``, conv squeezed, ``+1`` on norms except ``linear_attn.norm``; no V-head
  tiling. MTP tensors are skipped (``filter_tensors``). Metadata: the text keys (``feed_forward_length``
  = ``intermediate_size``), the MoE keys, ``ssm.*``, ``full_attention_interval`` and
  ``rope.dimension_count`` = ``int(head_dim · partial_rotary_factor)`` (no dimension sections).

Logical parameters are the contract's ``gdn/*`` (query, key, value, z, b, a split out of the fused
tensors, grouped V order), attention with query/gate split, ``moe/*`` as :mod:`tinymodels.qwen3_moe`.

Default dims: 4 layers (full attention at 3), hidden 128, 8 experts (top-2) of 64, shared expert of 128,
dense ``intermediate_size`` 256 (for ``mlp_only_layers``), attention 4/2 heads of 32, gated delta net 2 key
/ 4 value heads of 32, conv kernel 4, vocab 512.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, qwen3, qwen3_moe, qwen35, tokenizer
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import TensorSpec

MODEL_NAME = "qwen3next"  # the name `python -m tinymodels` and regression cases use
MOE = True  # takes expert_layout (HF) and fused_gate_up (GGUF)

ARCH = gguf.MODEL_ARCH.QWEN3NEXT
TOKENIZER_PRE = "qwen2"


def config(**overrides) -> dict:
    """The ``config.json`` of a ``Qwen3NextForCausalLM`` (transformers 5 fields), with overrides."""
    base = {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": qwen3._special("<|endoftext|>"),
        "eos_token_id": qwen3._special("<|im_end|>"),
        "decoder_sparse_step": 1,
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
        "mlp_only_layers": [],
        "moe_intermediate_size": 64,
        "norm_topk_prob": True,
        "num_attention_heads": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 4,
        "num_key_value_heads": 2,
        "output_router_logits": False,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"partial_rotary_factor": 0.25, "rope_theta": 10000000.0, "rope_type": "default"},
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": 128,
        "tie_word_embeddings": False,
        "transformers_version": "5.0.0",
        "use_cache": True,
        "vocab_size": 512,
    }
    cfg = qwen3.apply_overrides(base, overrides, qwen35._layer_types)
    qwen3_moe.check_moe(cfg)
    if cfg["linear_num_value_heads"] % cfg["linear_num_key_heads"]:
        raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
    return cfg


def _dims(cfg: Mapping) -> tuple[int, int, int, int, int]:
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    return hk, hv, cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], hv // hk


def _gdn_specs(prefix: str, cfg: Mapping) -> list[TensorSpec]:
    h = cfg["hidden_size"]
    hk, hv, dk, dv, _ = _dims(cfg)
    a = f"{prefix}.linear_attn"
    return [
        TensorSpec(f"{a}.in_proj_qkvz.weight", (2 * hk * dk + 2 * hv * dv, h), "linear"),
        TensorSpec(f"{a}.in_proj_ba.weight", (2 * hv, h), "linear"),
        TensorSpec(f"{a}.conv1d.weight", (2 * hk * dk + hv * dv, 1, cfg["linear_conv_kernel_dim"]), "conv"),
        TensorSpec(f"{a}.dt_bias", (hv,), "dt_bias"),
        TensorSpec(f"{a}.A_log", (hv,), "a_log"),
        TensorSpec(f"{a}.norm.weight", (dv,), "norm_one"),
        TensorSpec(f"{a}.out_proj.weight", (h, hv * dv), "residual"),
    ]


def _mlp(prefix: str, cfg: Mapping, layer: int, layout: str | None, fused_gate_up: bool) -> list:
    if layer not in qwen3_moe.sparse_layers(cfg):
        return qwen3.mlp_specs(prefix, cfg)
    if layout is None:
        return qwen3_moe.moe_gguf_specs(prefix, cfg, fused_gate_up, shared=True)
    return qwen3_moe.moe_hf_specs(prefix, cfg, layout, shared=True)


def tensor_specs(cfg: Mapping, expert_layout: str | None = "per_expert", fused_gate_up: bool = False) -> list:
    """HF tensors (``expert_layout`` given) or the GGUF-side specs (``None``), in a stable order."""
    return qwen35.hybrid_specs(cfg, _gdn_specs, lambda p, layer: _mlp(p, cfg, layer, expert_layout, fused_gate_up))


def hf_tensors(cfg: Mapping, seed: int = 0, expert_layout: str = "per_expert") -> dict[str, np.ndarray]:
    return {s.name: s.values(seed) for s in tensor_specs(cfg, expert_layout)}


def split_qkvz(qkvz: np.ndarray, cfg: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``in_proj_qkvz`` → (query ``[Hk·dk, H]``, key, value ``[Hv·dv, H]`` grouped, z grouped)."""
    hk, _, dk, dv, r = _dims(cfg)
    groups = qkvz.reshape(hk, 2 * dk + 2 * r * dv, -1)
    q, k = groups[:, :dk], groups[:, dk : 2 * dk]
    v, z = groups[:, 2 * dk : 2 * dk + r * dv], groups[:, 2 * dk + r * dv :]
    width = qkvz.shape[-1]
    return q.reshape(-1, width), k.reshape(-1, width), v.reshape(-1, width), z.reshape(-1, width)


def split_ba(ba: np.ndarray, cfg: Mapping) -> tuple[np.ndarray, np.ndarray]:
    """``in_proj_ba`` → (b ``[Hv, H]``, a ``[Hv, H]``), value heads in grouped order."""
    hk, _, _, _, r = _dims(cfg)
    groups = ba.reshape(hk, 2 * r, -1)
    return groups[:, :r].reshape(-1, ba.shape[-1]), groups[:, r:].reshape(-1, ba.shape[-1])


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """Contract names: ``gdn/*`` split out of the fused projections, gated attention, ``moe/*``."""
    hf = hf_tensors(cfg, seed)
    sparse = qwen3_moe.sparse_layers(cfg)
    out = qwen3.common_logical(hf, cfg, [n for n in range(cfg["num_hidden_layers"]) if n not in sparse])
    for layer, kind in enumerate(cfg["layer_types"]):
        if kind == "full_attention":
            out.update(qwen3.attention_logical(hf, cfg, layer, gated=True))
        else:
            a, q = f"model.layers.{layer}.linear_attn", f"text/layers/{layer}/gdn"
            parts = split_qkvz(hf[f"{a}.in_proj_qkvz.weight"], cfg)
            out.update(dict(zip((f"{q}/query", f"{q}/key", f"{q}/value", f"{q}/z"), parts, strict=True)))
            out[f"{q}/b"], out[f"{q}/a"] = split_ba(hf[f"{a}.in_proj_ba.weight"], cfg)
            out.update(qwen35.gdn_common_logical(hf, layer))
        if layer in sparse:
            out.update(qwen3_moe.moe_logical(f"model.layers.{layer}", cfg, layer, shared=True, seed=seed))
    return out


def _llama_cpp_transform(spec: TensorSpec) -> qwen3.Transform | None:
    """``Qwen3NextModel.modify_tensors`` for every tensor but ``in_proj_qkvz`` (None: unchanged)."""
    name, shape = spec.name, spec.shape
    if name.endswith(".A_log"):
        return (lambda x: -np.exp(x, dtype=np.float32)), shape
    if name.endswith(".conv1d.weight"):
        return (lambda x: x[:, 0, :]), (shape[0], shape[2])
    if name.endswith("norm.weight") and not name.endswith("linear_attn.norm.weight"):
        return (lambda x: x + np.float32(1.0)), shape
    return None


def _qkvz_tensors(spec: TensorSpec, cfg: Mapping, layer: int, seed: int, matrix_type: str) -> list[PlannedTensor]:
    """``in_proj_qkvz`` regrouped into ``attn_qkv`` (q | k | v of all heads) and ``attn_gate`` (z)."""
    hk, hv, dk, dv, _ = _dims(cfg)
    h = cfg["hidden_size"]
    qkv_shape, gate_shape = (2 * hk * dk + hv * dv, h), (hv * dv, h)

    def qkv(a: int, b: int) -> np.ndarray:
        q, k, v, _ = split_qkvz(spec.values(seed), cfg)
        return np.concatenate([q, k, v])[a:b]

    def gate(a: int, b: int) -> np.ndarray:
        return split_qkvz(spec.values(seed), cfg)[3][a:b]

    out = []
    for kind, shape, rows in ((gguf.MODEL_TENSOR.ATTN_QKV, qkv_shape, qkv), (gguf.MODEL_TENSOR.ATTN_GATE, gate_shape, gate)):
        name = gguf.TENSOR_NAMES[kind].format(bid=layer) + ".weight"
        out.append(PlannedTensor(name, shape, gguf_writer.tensor_qtype(name, shape, matrix_type), rows, whole=True))
    return out


def gguf_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32", fused_gate_up: bool = False) -> list[PlannedTensor]:
    qwen3_moe.check_gguf_layers(cfg, ARCH)
    specs = tensor_specs(cfg, None, fused_gate_up)
    plan = qwen3.gguf_plan(cfg, [s for s in specs if ".in_proj_qkvz." not in s.name], ARCH, matrix_type, seed,
                           _llama_cpp_transform)
    for spec in specs:  # insert each layer's attn_qkv / attn_gate before its ssm_ba, as llama.cpp yields them
        if ".in_proj_qkvz." in spec.name:
            layer = int(spec.name.split(".")[2])
            at = next(i for i, t in enumerate(plan) if t.name == f"blk.{layer}.ssm_ba.weight")
            plan[at:at] = _qkvz_tensors(spec, cfg, layer, seed, matrix_type)
    return plan


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, expert_layout: str = "per_expert", **overrides) -> Path:
    """The HF checkpoint directory, experts per expert or fused."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg, expert_layout), tokenizer.resources(), seed=seed,
                                  dtype=dtype, shards=shards)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               fused_gate_up: bool = False, **overrides) -> Path:
    """The GGUF llama.cpp's converter writes (``fused_gate_up``: ``--fuse-gate-up-exps``)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)

    def metadata(w: gguf.GGUFWriter) -> None:
        qwen3.add_base_metadata(w, cfg, "Tiny Qwen3-Next", matrix_type)
        qwen3_moe.add_moe_metadata(w, cfg)
        _, partial = qwen3.rope_settings(cfg, 0.25)
        w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
        w.add_ssm_state_size(cfg["linear_key_head_dim"])
        w.add_ssm_group_count(cfg["linear_num_key_heads"])
        w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
        w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
        w.add_full_attention_interval(cfg.get("full_attention_interval", 4))
        w.add_rope_dimension_count(int(cfg["head_dim"] * partial))
        gguf_writer.add_tokenizer(w, tokenizer.resources(), cfg, TOKENIZER_PRE)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[ARCH], metadata,
                                       gguf_tensors(cfg, seed, matrix_type, fused_gate_up))
