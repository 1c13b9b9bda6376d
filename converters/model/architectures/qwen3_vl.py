"""Qwen3-VL dense text (the ``text_config`` of ``Qwen3VLForConditionalGeneration``, GGUF ``qwen3vl``): the
Qwen3 decoder (full attention with q/k norms, plain RMSNorm) under ``model.language_model.*``, with
interleaved mRoPE and deepstack inputs (docs/qwen3-vl.md).

``deepstack_layers`` (normalised config, ``mappings/config/qwen3vl.yaml``) is the deepstack contract: entry
``k`` is the text layer whose output adds the features of the vision tower's deepstack merger ``k``
(``vision/deepstack/{k}/*``). transformers adds merger ``k`` after layer ``k``; the list states it so a
consumer reads the wiring instead of assuming it. For text-only prompts the three mRoPE position streams
are equal and interleaved mRoPE is plain RoPE, so the golden family is Qwen3's. Mapping:
``mappings/qwen3_vl.yaml``; the vision tower is :mod:`.qwen3_5_vision` (``model_type`` ``qwen3_vl``).
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import _heads, qwen3
from converters.model.architectures._args import args_from_config, fail
from converters.model.architectures._family import Family

NAME = "qwen3_vl"
HF_ARCHITECTURES = ("Qwen3VLForConditionalGeneration",)
GGUF_ARCHITECTURES = ("qwen3vl",)
MAPPINGS = {"text": "qwen3_vl.yaml"}
LAYER_KINDS = ("full_attention",)
MODEL_TYPES = ("qwen3_vl_text", "qwen3_vl")
COMPONENTS = ("vision",)
#: Qwen3's conventions; interleaved mRoPE with equal position streams is plain RoPE (docs/qwen3-vl.md)
GOLDEN = Family("qwen3")
heads = _heads.attention


def check_deepstack(layers: tuple[int, ...], num_hidden_layers: int, file: str | None) -> None:
    """Deepstack layers distinct text layers (docs/qwen3-vl.md §Deepstack contract)."""
    if len(set(layers)) != len(layers) or any(not 0 <= n < num_hidden_layers for n in layers):
        fail(f"deepstack_layers {list(layers)} must be distinct layers in 0..{num_hidden_layers - 1}",
             field="deepstack_layers", file=file)


@dataclass(frozen=True)
class Args(qwen3.Args):
    """The Qwen3VLTextConfig fields the mapping reads (Qwen3's) plus the deepstack wiring."""

    deepstack_layers: tuple[int, ...]

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        args = args_from_config(cls, config, file=file)
        args.check_heads(file)
        check_deepstack(args.deepstack_layers, args.num_hidden_layers, file)
        return args
