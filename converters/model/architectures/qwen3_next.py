"""Qwen3-Next (``Qwen3NextForCausalLM``, GGUF ``qwen3next``): the hybrid gated-delta-net / gated-attention
schedule of Qwen3.5 with the fused, per-key-head grouped ``in_proj_qkvz`` / ``in_proj_ba`` projections,
and sparse MoE blocks with a gated shared expert (dense MLP layers where ``mlp_only_layers`` says so).

A layer's kind combines its mixer with its feed-forward block (``linear_attention_moe``,
``full_attention_dense`` …); the binder cross-checks both against the tensors present. Mapping:
``mappings/qwen3_next.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from converters.model.architectures import _heads, qwen35
from converters.model.architectures._args import AttentionArgs, args_from_config
from converters.model.architectures._family import MoeKind
from converters.model.architectures._moe import HYBRID_KINDS, check_hybrid, check_moe

NAME = "qwen3_next"
HF_ARCHITECTURES = ("Qwen3NextForCausalLM",)
GGUF_ARCHITECTURES = ("qwen3next",)
MAPPINGS = {"text": "qwen3_next.yaml"}
LAYER_KINDS = tuple(f"{mixer}_{ffn}" for mixer in HYBRID_KINDS for ffn in ("moe", "dense"))
MODEL_TYPES = ("qwen3_next",)
COMPONENTS = ("dflash", "dflash2")
#: shared expert; norm_topk_prob defaults to True (Qwen3NextConfig); dense layers possible
GOLDEN = replace(qwen35.GOLDEN, moe=MoeKind(shared_expert=True, norm_topk_default=True, dense_layers=True))
#: llama.cpp's ``Qwen3NextModel.modify_tensors``: norms +1, ``ssm_a = -exp(A_log)``; value heads stay grouped
#: (docs/gguf-conventions.md)
GGUF_STORAGE = replace(qwen35.GGUF_STORAGE, tiled_value_heads=False, tiled_output_columns=False, gdn_qkv_fused=False)
#: q_proj per head [query | gate] (Qwen3NextAttention); its fused in_proj_qkvz is grouped per key head, not stated
HF_STORAGE = replace(qwen35.HF_STORAGE, gdn_qkv_fused=False)
heads = _heads.hybrid


@dataclass(frozen=True)
class Args(AttentionArgs):
    """The Qwen3NextConfig fields the mapping reads (transformers names)."""

    tie_word_embeddings: bool
    layer_types: tuple[str, ...]
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    mlp_only_layers: tuple[int, ...]

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        check_hybrid(a, file)
        check_moe(a, a.mlp_only_layers, file)
        return a

    def layer_kinds(self) -> list[str]:
        return [f"{kind}_{'dense' if n in self.mlp_only_layers else 'moe'}" for n, kind in enumerate(self.layer_types)]
