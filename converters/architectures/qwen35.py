"""Qwen3.5 hybrid text (``Qwen3_5ForCausalLM``, text of ``Qwen3_5ForConditionalGeneration``, GGUF
``qwen35``): gated delta net layers and gated full attention, zero-centred RMSNorms.

The layer kinds come from ``layer_types`` of the normalised config (HF derives it from
``full_attention_interval`` when a checkpoint omits it; the normaliser does the same for a GGUF), and
the binder cross-checks them against the tensors present. Mapping: ``mappings/qwen35.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.architectures._args import args_from_config, fail

NAME = "qwen35"
HF_ARCHITECTURES = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration")
GGUF_ARCHITECTURES = ("qwen35",)
MAPPINGS = {"text": "qwen35.yaml"}
LAYER_KINDS = ("linear_attention", "full_attention")


@dataclass(frozen=True)
class Args:
    """The Qwen3_5TextConfig fields the mapping reads (transformers names)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
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

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        if len(a.layer_types) != a.num_hidden_layers:
            fail(f"layer_types has {len(a.layer_types)} entries for {a.num_hidden_layers} layers",
                 field="layer_types", file=file)
        for i, kind in enumerate(a.layer_types):
            if kind not in LAYER_KINDS:
                fail(f"layer_types[{i}] = {kind!r} is not one of {LAYER_KINDS}", field="layer_types", file=file)
        if a.linear_num_value_heads % a.linear_num_key_heads:
            fail(f"linear_num_value_heads {a.linear_num_value_heads} is not a multiple of "
                 f"linear_num_key_heads {a.linear_num_key_heads}", field="linear_num_value_heads", file=file)
        if a.num_attention_heads % a.num_key_value_heads:
            fail(f"num_attention_heads {a.num_attention_heads} is not a multiple of "
                 f"num_key_value_heads {a.num_key_value_heads}", field="num_key_value_heads", file=file)
        if not a.attn_output_gate:
            fail("attn_output_gate is false: the qwen35 mapping only knows the gated query",
                 field="attn_output_gate", file=file)
        return a

    def layer_kinds(self) -> list[str]:
        return list(self.layer_types)
