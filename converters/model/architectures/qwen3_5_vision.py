"""The Qwen3.5 vision tower (component ``vision``, config ``model_type`` ``qwen3_5_vision`` or
``qwen3_5_moe_vision``, ``target: "text"``, container §4.2), and the Qwen3-VL tower (``qwen3_vl``), which adds
one deepstack merger per block of ``deepstack_visual_indexes`` (the text side: docs/qwen3-vl.md).

``Args`` is built from the normalised vision config (:func:`converters.model.config_normalize.normalize_vision_config`,
from an mmproj GGUF's ``clip.vision.*`` or an HF ``vision_config``). Every block has the same tensors.
Deepstack merger ``k`` (HF ``deepstack_merger_list.{k}``) is written by llama.cpp as ``v.deepstack.{i}`` with
``i = deepstack_visual_indexes[k]``; mapping expressions cannot index a list, so ``from_config`` states the
list as ``deepstack_count`` mergers at blocks ``deepstack_first + k * deepstack_step`` and refuses a list that
is not such a progression (every released Qwen3-VL: ``[5, 11, 17]``, ``[8, 16, 24]``). No list: no merger.
Mapping: ``mappings/qwen3_5_vision.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures._args import args_from_config, fail, require_multiple

NAME = "qwen3_5_vision"
COMPONENT = "vision"
HF_ARCHITECTURES: tuple[str, ...] = ()  # a part of a Qwen3_5(Moe) / Qwen3VL(Moe) ForConditionalGeneration
GGUF_ARCHITECTURES: tuple[str, ...] = ()
MODEL_TYPES = ("qwen3_5_vision", "qwen3_5_moe_vision", "qwen3_vl")
MAPPINGS = {"vision": "qwen3_5_vision.yaml"}
LAYER_KINDS = ("vision_block",)


@dataclass(frozen=True)
class Geometry:
    """The Qwen3_5VisionConfig / Qwen3VLVisionConfig fields the mapping reads (transformers names)."""

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


@dataclass(frozen=True)
class Args(Geometry):
    """:class:`Geometry` plus the deepstack mergers as expression names (see the module docstring)."""

    deepstack_count: int = 0
    deepstack_first: int = 0
    deepstack_step: int = 1

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        g = args_from_config(Geometry, config, file=file)
        require_multiple(g, "hidden_size", "num_heads", field="num_heads", file=file)
        return cls(**vars(g), **_deepstack(config.get("deepstack_visual_indexes", []), g.depth, file))

    def layer_kinds(self) -> list[str]:
        return ["vision_block"] * self.depth


def _deepstack(indexes, depth: int, file: str | None) -> dict[str, int]:
    """``deepstack_count`` / ``deepstack_first`` / ``deepstack_step`` of ``deepstack_visual_indexes``."""
    field = "deepstack_visual_indexes"
    if not isinstance(indexes, list | tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
        fail(f"{field} = {indexes!r} is not a list of block indexes", field=field, file=file)
    if any(not 0 <= i < depth for i in indexes) or list(indexes) != sorted(set(indexes)):
        fail(f"{field} = {list(indexes)} must be increasing block indexes below depth {depth}", field=field, file=file)
    first = indexes[0] if indexes else 0
    step = indexes[1] - indexes[0] if len(indexes) > 1 else 1
    if any(i != first + k * step for k, i in enumerate(indexes)):
        fail(f"{field} = {list(indexes)} is not evenly spaced; the mapping names merger k's block "
             "deepstack_first + k * deepstack_step", field=field, file=file)
    return {"deepstack_count": len(indexes), "deepstack_first": first, "deepstack_step": step}
