"""Qwen3.5 hybrid text (``Qwen3_5ForCausalLM``, text of ``Qwen3_5ForConditionalGeneration``, GGUF
``qwen35``): gated delta net layers and gated full attention, zero-centred RMSNorms.

The layer kinds come from ``layer_types`` of the normalised config (HF derives it from
``full_attention_interval`` when a checkpoint omits it; the normaliser does the same for a GGUF), and
the binder cross-checks them against the tensors present. Mapping: ``mappings/qwen35.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import _heads
from converters.model.architectures._args import AttentionArgs, args_from_config, fail
from converters.model.architectures._family import Family, Storage
from converters.model.architectures._moe import HYBRID_KINDS, check_hybrid

NAME = "qwen35"
HF_ARCHITECTURES = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration")
GGUF_ARCHITECTURES = ("qwen35",)
MAPPINGS = {"text": "qwen35.yaml"}
LAYER_KINDS = HYBRID_KINDS
MODEL_TYPES = ("qwen3_5", "qwen3_5_text")
COMPONENTS = ("mtp", "vision", "dflash", "dflash2")
MTP = "qwen35_mtp"
GOLDEN = Family("qwen3_5", zero_centred_norms=True, attn_output_gate=True, hybrid=True, partial_rotary_factor=0.25)
#: ``q_proj`` holds per head ``[query | gate]`` (transformers ``Qwen3_5Attention``), ``in_proj_qkv`` is
#: ``[q | k | v]`` (``Qwen3_5GatedDeltaNet``)
HF_STORAGE = Storage(gated_query_fused=True, gdn_qkv_fused=True)
#: llama.cpp's ``Qwen3_5TextModel.modify_tensors``: ``attn_q`` as ``q_proj``, ``attn_qkv`` as ``in_proj_qkv``, norms +1, value heads tiled (rows and
#: ``ssm_out`` columns), ``ssm_a = -exp(A_log)`` (docs/gguf-conventions.md)
GGUF_STORAGE = Storage(shifted_norms=True, tiled_value_heads=True, tiled_output_columns=True, decay_as_ssm_a=True,
                       gated_query_fused=True, gdn_qkv_fused=True)
heads = _heads.hybrid


@dataclass(frozen=True)
class Args(AttentionArgs):
    """The Qwen3_5TextConfig fields the mapping reads (transformers names)."""

    tie_word_embeddings: bool
    layer_types: tuple[str, ...]
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    attn_output_gate: bool

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        check_hybrid(a, file)
        a.check_heads(file)
        if not a.attn_output_gate:
            fail("attn_output_gate is false: the qwen35 mapping only knows the gated query",
                 field="attn_output_gate", file=file)
        return a

    def layer_kinds(self) -> list[str]:
        return list(self.layer_types)
