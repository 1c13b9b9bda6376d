"""The Qwen3.5 vision tower (component ``vision``, config ``model_type`` ``qwen3_5_vision`` or
``qwen3_5_moe_vision``, ``target: "text"``, container §4.2): the Qwen3-VL tower without deepstack mergers.

``Args`` is built from the normalised vision config (:func:`converters.config_normalize.normalize_vision_config`,
from an mmproj GGUF's ``clip.vision.*`` or an HF ``vision_config``). Every block has the same tensors.
Mapping: ``mappings/qwen3_5_vision.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.architectures._args import args_from_config, require_multiple

NAME = "qwen3_5_vision"
COMPONENT = "vision"
HF_ARCHITECTURES: tuple[str, ...] = ()  # a part of a Qwen3_5(Moe)ForConditionalGeneration checkpoint
GGUF_ARCHITECTURES: tuple[str, ...] = ()
MODEL_TYPES = ("qwen3_5_vision", "qwen3_5_moe_vision")
MAPPINGS = {"vision": "qwen3_5_vision.yaml"}
LAYER_KINDS = ("vision_block",)


@dataclass(frozen=True)
class Args:
    """The Qwen3_5VisionConfig fields the mapping reads (transformers names)."""

    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    in_channels: int
    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    out_hidden_size: int
    num_position_embeddings: int

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        require_multiple(a, "hidden_size", "num_heads", field="num_heads", file=file)
        return a

    def layer_kinds(self) -> list[str]:
        return ["vision_block"] * self.depth
