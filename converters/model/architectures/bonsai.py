"""Ternary Bonsai 2 (PrismML): a ``qwen35`` GGUF whose matrices are ternary and Hadamard-rotated
(``prism.hadamard.*``), the gated delta net output projection's input columns kept in grouped order.

Same config and layer kinds as :mod:`converters.model.architectures.qwen35`; what differs is the tensor layout,
so the mapping is its own file, ``mappings/bonsai.yaml``. A GGUF is read
with it when :func:`detect` says so — it declares ``prism.hadamard.*``; a ternary GGUF without rotation
is llama.cpp's own layout and stays with ``qwen35.yaml`` (the recipe, not the mapping, chooses ``t2``).
"""

from __future__ import annotations

from dataclasses import replace

from converters.errors import ConversionError
from converters.model.architectures import qwen35
from converters.model.architectures.qwen35 import COMPONENTS, GOLDEN, LAYER_KINDS, MTP, Args, heads
from converters.sources.hadamard import PREFIX, has_rotation_metadata

NAME = "bonsai"
HF_ARCHITECTURES: tuple[str, ...] = ()  # a GGUF layout, never an HF checkpoint's own architecture
GGUF_ARCHITECTURES = ("qwen35",)
MAPPINGS = {"text": "bonsai.yaml"}
MODEL_TYPES: tuple[str, ...] = ()  # found by detect, never by a config's model_type
#: Qwen3.5's, but ``ssm_out`` keeps its input columns grouped (``prism.hadamard.gdn_v_grouped``)
GGUF_STORAGE = replace(qwen35.GGUF_STORAGE, tiled_output_columns=False)
#: With ``--template``, taken from the template even though the GGUF could rebuild them (the
#: tokenizer files of the official checkpoint the template was made from, not ones rebuilt from
#: ``tokenizer.ggml.*``; the same tokenizer either way).
TEMPLATE_BORROWS = ("frontend/",)
__all__ = ["COMPONENTS", "GGUF_ARCHITECTURES", "GGUF_STORAGE", "GOLDEN", "HF_ARCHITECTURES", "LAYER_KINDS", "MAPPINGS", "MODEL_TYPES",
           "MTP", "NAME", "TEMPLATE_BORROWS", "Args", "detect", "heads"]


def detect(source) -> bool:
    """Whether ``source`` is a Ternary Bonsai 2 GGUF: ``general.architecture`` ``qwen35`` with
    ``prism.hadamard.*`` metadata. Such a file must say ``gdn_v_grouped = true``: the mapping reads
    ``ssm_out`` with grouped input columns, and a rotated matrix's columns cannot be re-ordered."""
    if getattr(source, "kind", None) != "gguf" or not has_rotation_metadata(source):
        return False
    if source.metadata.get("general.architecture") not in GGUF_ARCHITECTURES:
        return False
    key = PREFIX + "gdn_v_grouped"
    if source.metadata.get(key) is not True:
        raise ConversionError(f"{key} is {source.metadata.get(key)!r}: the Bonsai mapping needs the gated delta net "
                              "output projection's input columns in grouped order (true); tiled columns of a "
                              "rotated matrix cannot be re-ordered, and no use contract composes input_columns "
                              "with hadamard_signs", file=str(source.path), json_path=f"metadata.{key}",
                              rule="bonsai_v_grouped")
    return True
