"""The Qwen3.5-MoE multi-token-prediction head (component ``mtp``, config
``{"architectures": ["Qwen3_5MoeMTP"]}``, ``target: "text"``, container §4.2): the Qwen3.5 MTP head
(:mod:`.qwen35_mtp`) whose decoder layers carry the model's sparse MoE block — router, experts stacked in
one bank per projection, shared expert and its gate — instead of a dense MLP. Embedding and head are the
text model's objects (container §5.3).

Geometry from the target's normalised text config (``Qwen3_5MoeTextConfig``, which has no
``intermediate_size``, so ``Args`` does not extend ``AttentionArgs``); ``num_hidden_layers`` is the
trunk depth, the first GGUF block of the head (llama.cpp ``_Qwen35MtpMixin``, mixed into
``Qwen3_5MoeTextModel``). ``Qwen3_5MoeMTP`` is vLLM's class for this head (``qwen3_5_mtp.py``).
Mapping: ``mappings/qwen35_moe_mtp.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures._args import args_from_config, fail
from converters.model.architectures._moe import check_moe

NAME = "qwen35_moe_mtp"
COMPONENT = "mtp"
HF_ARCHITECTURES: tuple[str, ...] = ()  # never a checkpoint's own architecture: a part of a Qwen3.5-MoE one
GGUF_ARCHITECTURES: tuple[str, ...] = ()
CONFIG_ARCHITECTURE = "Qwen3_5MoeMTP"
MAPPINGS = {"mtp": "qwen35_moe_mtp.yaml"}
LAYER_KINDS = ("full_attention",)
#: ``Args`` from the text config: the component record names only the architecture
TEXT_GEOMETRY = True


@dataclass(frozen=True)
class Args:
    """The target (Qwen3_5MoeTextConfig) fields the MoE MTP mapping reads (transformers names)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    mtp_num_hidden_layers: int
    attn_output_gate: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        if not a.attn_output_gate:
            fail("attn_output_gate is false: the MTP layers of the mapping use the gated query",
                 field="attn_output_gate", file=file)
        check_moe(a, (), file)
        return a

    def layer_kinds(self) -> list[str]:
        return ["full_attention"] * self.mtp_num_hidden_layers
