"""Qwen3 dense text (``Qwen3ForCausalLM``, GGUF ``qwen3``): every layer full attention, plain RMSNorm.

Mapping: ``mappings/qwen3.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import _heads
from converters.model.architectures._args import AttentionArgs, args_from_config
from converters.model.architectures._family import Family

NAME = "qwen3"
HF_ARCHITECTURES = ("Qwen3ForCausalLM",)
GGUF_ARCHITECTURES = ("qwen3",)
MAPPINGS = {"text": "qwen3.yaml"}
LAYER_KINDS = ("full_attention",)
MODEL_TYPES = ("qwen3",)
COMPONENTS = ("dflash", "dflash2")
GOLDEN = Family("qwen3")
heads = _heads.attention


@dataclass(frozen=True)
class Args(AttentionArgs):
    """The Qwen3Config fields the mapping reads (transformers ``Qwen3Config`` names)."""

    tie_word_embeddings: bool

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        args = args_from_config(cls, config, file=file)
        args.check_heads(file)
        return args

    def layer_kinds(self) -> list[str]:
        return ["full_attention"] * self.num_hidden_layers
