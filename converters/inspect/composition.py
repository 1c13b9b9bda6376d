"""What a ``.ninfer`` artifact is made of, for ``convert inspect X.ninfer`` (docs/inspect.md): one row per
component × format (objects, bytes, elements, bits per weight), the recipe the provenance records, and
the exactness counts of its produced tensors (``bit-exact`` / ``value-exact`` / ``requantized``, provenance
``objects[].exactness``, counted as the conversion summary counts them: docs/recipes.md §Exactness). Read
from the directory only; no payload byte is read."""

from __future__ import annotations

import math
from pathlib import Path

from converters.pipeline.exactness import provenance_counts


def composition(path: str | Path) -> dict:
    """The composition of the artifact whose entry is ``path`` (see the module docstring)."""
    from ninfer_core import open_artifact

    with open_artifact(path) as art:
        rows: dict[tuple[str, str], dict] = {}
        for o in art.objects:
            component = o.id.split("/", 1)[0]
            fmt = o.format if o.kind == "tensor" else o.kind
            r = rows.setdefault((component, fmt), {"component": component, "format": fmt, "objects": 0, "bytes": 0,
                                                   "elements": 0})
            r["objects"] += 1
            r["bytes"] += o.bytes
            r["elements"] += math.prod(o.shape) if o.kind == "tensor" else 0
        for r in rows.values():
            r["bits_per_weight"] = round(8 * r["bytes"] / r["elements"], 3) if r["elements"] else None
        prov = art.provenance or {}
        objects = prov.get("objects") or {}
        exactness = provenance_counts(objects) if isinstance(objects, dict) else {}
        recipe = prov.get("recipe") or {}
        identity = art.metadata.get("identity") if isinstance(art.metadata.get("identity"), dict) else {}
        return {"recipe": recipe.get("name") or identity.get("weights_id"),
                "overrides": [dict(o) for o in recipe.get("overrides", [])],
                "exactness": exactness,
                "composition": sorted(rows.values(), key=lambda r: (r["component"], -r["bytes"]))}
