"""transformers' ``attribute_map`` aliases of HF config keys, read from ``mappings/transformers/attribute_maps.yaml``.

A transformers config class may declare ``attribute_map = {alias: stored}``: ``config.alias`` then reads and
writes ``config.stored``, and ``save_pretrained`` writes the stored name (transformers 5.x ``Qwen3MoeConfig``
saves ``num_local_experts`` where 4.x wrote ``num_experts``). The config normaliser asks for the names its
rules files use; :func:`aliased_key` finds the value under the other name of a declared pair, in either
direction (docs/architectures.md §Config aliases). The pairs are data recorded from transformers' sources,
since transformers is not a dependency.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import yaml

from converters import ROOT

ATTRIBUTE_MAPS = ROOT / "mappings" / "transformers" / "attribute_maps.yaml"
SCHEMA = "ninfer-hf-attribute-maps/1"


@functools.lru_cache(maxsize=4)
def attribute_maps(path: Path = ATTRIBUTE_MAPS) -> dict[str, dict[str, str]]:
    """``model_type`` → that config class's ``attribute_map`` (alias → stored name)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("classes"), dict):
        raise ValueError(f"{path}: not a {SCHEMA} document")
    out = {}
    for model_type, entry in doc["classes"].items():
        amap = entry.get("attribute_map") if isinstance(entry, dict) else None
        if not isinstance(amap, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in amap.items()):
            raise ValueError(f"{path}: classes.{model_type}.attribute_map is not a mapping of names")
        out[str(model_type)] = dict(amap)
    return out


def _model_types(holder: Mapping, root: Mapping) -> list[str]:
    """The config classes that may have written ``holder``: its own ``model_type``, else the root's and the
    root's ``<type>_text`` (a ``text_config`` saved without its ``model_type``)."""
    own = holder.get("model_type")
    if isinstance(own, str):
        return [own]
    top = root.get("model_type")
    return [top, f"{top}_text"] if isinstance(top, str) else []


def aliased_key(name: str, holder: Mapping, root: Mapping) -> str | None:
    """The key of ``holder`` that holds ``name`` under a declared alias pair (either direction), or None."""
    maps = attribute_maps()
    for model_type in _model_types(holder, root):
        for alias, stored in maps.get(model_type, {}).items():
            other = stored if name == alias else alias if name == stored else None
            if other is not None and holder.get(other) is not None:
                return other
    return None
