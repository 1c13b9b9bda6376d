"""The Qwen3.5 multi-token-prediction head (component ``mtp``, config ``{"architectures": ["Qwen3_5MTP"]}``,
``target: "text"``, container §4.2): ``mtp_num_hidden_layers`` gated full-attention decoder layers behind
``fc`` over ``cat[pre_fc_norm_embedding(emb), pre_fc_norm_hidden(h)]``, reading the text model's
embedding and head (bound to the text objects, container §5.3).

Its geometry comes from the target's config (§4.2 "几何通过 target 取得"): ``Args`` is built from the
normalised *text* config. ``num_hidden_layers`` is the trunk depth, the first GGUF block of the head
(llama.cpp ``_Qwen35MtpMixin`` appends the MTP blocks as ``blk.{L+i}``). Mapping: ``mappings/qwen35_mtp.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures._args import AttentionArgs, args_from_config, fail

NAME = "qwen35_mtp"
COMPONENT = "mtp"
HF_ARCHITECTURES: tuple[str, ...] = ()  # never a checkpoint's own architecture: a part of a Qwen3.5 one
GGUF_ARCHITECTURES: tuple[str, ...] = ()
CONFIG_ARCHITECTURE = "Qwen3_5MTP"
MAPPINGS = {"mtp": "qwen35_mtp.yaml"}
LAYER_KINDS = ("full_attention",)
#: ``Args`` from the text config: the component record names only the architecture
TEXT_GEOMETRY = True


@dataclass(frozen=True)
class Args(AttentionArgs):
    """The target (Qwen3_5TextConfig) fields the MTP mapping reads."""

    mtp_num_hidden_layers: int
    attn_output_gate: bool

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        a.check_heads(file)
        if not a.attn_output_gate:
            fail("attn_output_gate is false: the MTP layers of the mapping use the gated query",
                 field="attn_output_gate", file=file)
        return a

    def layer_kinds(self) -> list[str]:
        return ["full_attention"] * self.mtp_num_hidden_layers
