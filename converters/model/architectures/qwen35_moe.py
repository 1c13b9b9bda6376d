"""Qwen3.5-MoE text (``Qwen3_5MoeForCausalLM``, text of ``Qwen3_5MoeForConditionalGeneration``, GGUF
``qwen35moe``): the Qwen3.5 hybrid schedule (:mod:`.qwen35`) with a sparse MoE block — router, experts,
a shared expert and its sigmoid gate — in every layer (``Qwen3_5MoeTextConfig`` has no
``intermediate_size`` and no dense layers). Mapping: ``mappings/qwen35_moe.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from converters.model.architectures import _heads, qwen35
from converters.model.architectures._args import args_from_config, fail
from converters.model.architectures._family import MoeKind
from converters.model.architectures._moe import HYBRID_KINDS, check_hybrid, check_moe

NAME = "qwen35_moe"
HF_ARCHITECTURES = ("Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration")
GGUF_ARCHITECTURES = ("qwen35moe",)
MAPPINGS = {"text": "qwen35_moe.yaml"}
LAYER_KINDS = HYBRID_KINDS
MODEL_TYPES = ("qwen3_5_moe", "qwen3_5_moe_text")
COMPONENTS = ("mtp", "vision", "dflash", "dflash2")
MTP = "qwen35_moe_mtp"
#: shared expert; always renormalised (the config has no norm_topk_prob); every layer sparse
GOLDEN = replace(qwen35.GOLDEN, moe=MoeKind(shared_expert=True, norm_topk_default=None, dense_layers=False))
HF_STORAGE, GGUF_STORAGE = qwen35.HF_STORAGE, qwen35.GGUF_STORAGE  # Qwen3.5's conventions
heads = _heads.hybrid


@dataclass(frozen=True)
class Args:
    """The Qwen3_5MoeTextConfig fields the mapping reads (transformers names)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    tie_word_embeddings: bool
    layer_types: tuple[str, ...]
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    attn_output_gate: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        check_hybrid(a, file)
        if not a.attn_output_gate:
            fail("attn_output_gate is false: the qwen35_moe mapping only knows the gated query",
                 field="attn_output_gate", file=file)
        check_moe(a, (), file)
        return a

    def layer_kinds(self) -> list[str]:
        return list(self.layer_types)
