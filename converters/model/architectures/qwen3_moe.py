"""Qwen3-MoE text (``Qwen3MoeForCausalLM``, GGUF ``qwen3moe``): Qwen3 attention, sparse MoE feed-forward
blocks (router + experts, no shared expert), dense MLP layers where ``mlp_only_layers`` says so.

A layer's kind combines its mixer (always full attention) with its feed-forward block — ``_moe`` or
``_dense`` — because the two have different parameters; the normalised config folds
``decoder_sparse_step`` into ``mlp_only_layers`` (``mappings/config/qwen3moe.yaml``), and the binder
cross-checks the kinds against the router tensors present. Mapping: ``mappings/qwen3_moe.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import _heads
from converters.model.architectures._args import AttentionArgs, args_from_config
from converters.model.architectures._family import Family, MoeKind
from converters.model.architectures._moe import check_moe

NAME = "qwen3_moe"
HF_ARCHITECTURES = ("Qwen3MoeForCausalLM",)
GGUF_ARCHITECTURES = ("qwen3moe",)
MAPPINGS = {"text": "qwen3_moe.yaml"}
LAYER_KINDS = ("full_attention_moe", "full_attention_dense")
MODEL_TYPES = ("qwen3_moe",)
COMPONENTS = ("dflash", "dflash2")
#: no shared expert; transformers Qwen3MoeConfig.norm_topk_prob defaults to False; dense layers possible
GOLDEN = Family("qwen3", moe=MoeKind(shared_expert=False, norm_topk_default=False, dense_layers=True))
heads = _heads.attention


@dataclass(frozen=True)
class Args(AttentionArgs):
    """The Qwen3MoeConfig fields the mapping reads (transformers names)."""

    tie_word_embeddings: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    mlp_only_layers: tuple[int, ...]

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        check_moe(a, a.mlp_only_layers, file)
        return a

    def layer_kinds(self) -> list[str]:
        return ["full_attention_dense" if n in self.mlp_only_layers else "full_attention_moe"
                for n in range(self.num_hidden_layers)]
