"""Qwen3 dense text (``Qwen3ForCausalLM``, GGUF ``qwen3``): every layer full attention, plain RMSNorm.

Mapping: ``mappings/qwen3.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.architectures._args import args_from_config, fail

NAME = "qwen3"
HF_ARCHITECTURES = ("Qwen3ForCausalLM",)
GGUF_ARCHITECTURES = ("qwen3",)
MAPPINGS = {"text": "qwen3.yaml"}
LAYER_KINDS = ("full_attention",)


@dataclass(frozen=True)
class Args:
    """The Qwen3Config fields the mapping reads (transformers ``Qwen3Config`` names)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    tie_word_embeddings: bool

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        args = args_from_config(cls, config, file=file)
        if args.num_attention_heads % args.num_key_value_heads:
            fail(f"num_attention_heads {args.num_attention_heads} is not a multiple of "
                 f"num_key_value_heads {args.num_key_value_heads}", field="num_key_value_heads", file=file)
        return args

    def layer_kinds(self) -> list[str]:
        return ["full_attention"] * self.num_hidden_layers
