"""z-lab DFlash block-diffusion drafters (components ``dflash`` and ``dflash2``, ``target: "text"``,
container §4.2, §8, §12.5): Qwen3-style decoder layers over a noised block, attending to the target's
hidden states projected by ``fc`` (``len(target_layer_ids)·H → H``) and ``hidden_norm``; no embedding or
head of their own (the target's are used).

``DFlashDraftModel`` (v1) keeps ``block_size`` at the top level and ``dflash_config {mask_token_id,
target_layer_ids}``; ``DFlash2DraftModel`` keeps every knob inside ``dflash_config`` and adds per layer
``attention_conv`` / ``mlp_conv`` (grouped dynamic causal convolutions) and a ``candidate_selector``.
z-lab reads ``dflash_config`` first, then the top level; so does :func:`flat_config`.

Every layer has the same tensors (sliding-window layers differ only in the mask), so there is one layer
kind. Mappings: ``mappings/dflash.yaml``, ``mappings/dflash2.yaml`` (:mod:`.dflash2`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from converters.model.architectures import _heads
from converters.model.architectures._args import AttentionArgs, args_from_config

NAME = "dflash"
COMPONENT = "dflash"
HF_ARCHITECTURES: tuple[str, ...] = ()  # drafters are components of a target's artifact, never its text
GGUF_ARCHITECTURES: tuple[str, ...] = ()
CONFIG_ARCHITECTURE = "DFlashDraftModel"
MAPPINGS = {"dflash": "dflash.yaml"}
LAYER_KINDS = ("decoder",)


def heads(g) -> _heads.HeadTable:
    """Attention heads, the context key/value included."""
    return _heads.attention(g) | _heads.context_attention(g)


def flat_config(config: Mapping) -> dict:
    """The drafter config with ``dflash_config`` entries taking precedence over top-level ones, plus
    ``num_target_features = len(target_layer_ids)``."""
    inner = config.get("dflash_config")
    flat = {**config, **(inner if isinstance(inner, Mapping) else {})}
    ids = flat.get("target_layer_ids")
    if isinstance(ids, list):
        flat["num_target_features"] = len(ids)
    return flat


@dataclass(frozen=True)
class Args(AttentionArgs):
    """The drafter config fields the DFlash mapping reads (transformers ``Qwen3Config`` names plus
    ``num_target_features``)."""

    num_target_features: int

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, flat_config(config), file=file)
        a.check_heads(file)
        return a

    def layer_kinds(self) -> list[str]:
        return ["decoder"] * self.num_hidden_layers
