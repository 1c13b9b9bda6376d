"""``validate`` Gate E, supply chain (container §10; docs/calbin.md §9 Gate E, §10): can this artifact be reproduced?

Required, else ``BLOCKED_REPRODUCIBILITY`` (the artifact may run; it may not be called reproducible):
``provenance`` itself; the source's identity and hash (``provenance.source``: kind, size, and a
``header_sha256``/``sha256``); the converter (name, version); the recipe (name, sha256); and for every tensor
object its sources, transforms and exactness (``provenance.objects[id]``: ``pieces`` with ``source`` and
``transforms``, a ``generated`` literal, or ``borrowed_from`` a template). Resources must match the sha256
recorded for them (``ERROR`` otherwise: changed after conversion). Borrowed objects and requantized objects are
listed (``INFO``).
"""

from __future__ import annotations

from collections import Counter

from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.resources import check_recorded_hashes
from converters.acceptance.report import Finding
from ninfer_core import TensorObject

SHOWN = 5


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def check_supply_chain(art) -> tuple[dict, list[Finding], list[str]]:
    """(``supply_chain`` section, issues, checks run)."""
    prov = art.provenance
    checks = ["provenance", "source_identity", "converter", "recipe", "per_object", "resource_hashes"]
    if not prov:
        return {}, [finding("NINFER_SUPPLY_PROVENANCE_MISSING", "the directory has no provenance: source, converter, "
                          "recipe and per-object transforms are unknown", path="$.provenance")], checks
    issues = []
    source, converter, recipe = _dict(prov.get("source")), _dict(prov.get("converter")), _dict(prov.get("recipe"))
    has_hash = any(isinstance(source.get(k), str) and source.get(k) for k in ("header_sha256", "sha256"))
    missing = [k for k in ("kind", "size") if k not in source] + ([] if has_hash else ["header_sha256"])
    if missing:
        issues.append(finding("NINFER_SUPPLY_SOURCE_MISSING", f"provenance.source lacks {', '.join(missing)}",
                            path="$.provenance.source"))
    missing = [k for k in ("name", "version") if not converter.get(k)]
    if missing:
        issues.append(finding("NINFER_SUPPLY_CONVERTER_MISSING", f"provenance.converter lacks {', '.join(missing)}",
                            path="$.provenance.converter"))
    missing = [k for k in ("name", "sha256") if not recipe.get(k)]
    if missing:
        issues.append(finding("NINFER_SUPPLY_RECIPE_MISSING", f"provenance.recipe lacks {', '.join(missing)}",
                            path="$.provenance.recipe"))
    objects = _dict(prov.get("objects"))
    untraced, borrowed, requantized = [], Counter(), []
    exactness = Counter()
    for obj in art.objects:
        entry = _dict(objects.get(obj.id))
        if "borrowed_from" in entry:
            borrowed[obj.id.split("/", 1)[0]] += 1
        if isinstance(obj, TensorObject) and not _traced(entry):
            untraced.append(obj.id)
        if entry.get("exactness"):
            exactness[entry["exactness"]] += 1
        if entry.get("exactness") == "requantized":
            err = _dict(entry.get("measured_error"))
            requantized.append((err.get("cosine", float("nan")), obj.id))
    if untraced:
        shown = ", ".join(untraced[:SHOWN]) + (" …" if len(untraced) > SHOWN else "")
        issues.append(finding("NINFER_SUPPLY_OBJECT_UNTRACED", f"{len(untraced)} tensor object(s) have no per-object "
                            f"provenance (sources, transforms, exactness): {shown}", path="$.provenance.objects",
                            detail={"objects": untraced[:50], "count": len(untraced)}))
    if borrowed:
        issues.append(finding("NINFER_SUPPLY_BORROWED", f"{sum(borrowed.values())} object(s) borrowed from a template: "
                            + ", ".join(f"{p} {n}" for p, n in sorted(borrowed.items())), detail=dict(borrowed)))
    if requantized:
        worst = min(requantized, key=lambda t: t[0] if t[0] == t[0] else 2.0)
        issues.append(finding("NINFER_SUPPLY_REQUANTIZED", f"{len(requantized)} requantized object(s); worst measured "
                            f"cosine {worst[0]:.6f} ({worst[1]})", detail={"count": len(requantized)}))
    hash_issues, n_hashed = check_recorded_hashes(art)
    issues += hash_issues
    section = {
        "source": {k: source[k] for k in ("kind", "path", "size", "header_sha256", "sha256") if k in source},
        "converter": dict(converter),
        "recipe": {k: recipe[k] for k in ("name", "sha256", "file") if k in recipe},
        "mappings": prov.get("mappings", []),
        "objects_traced": len([o for o in art.objects if isinstance(o, TensorObject)]) - len(untraced),
        "objects_exactness": dict(exactness),
        "resource_hashes_checked": n_hashed,
        "only_layer": prov.get("only_layer"),
    }
    return section, issues, checks


def _traced(entry: dict) -> bool:
    if "borrowed_from" in entry or "generated" in entry:
        return True
    pieces = entry.get("pieces")
    if not isinstance(pieces, list) or not pieces or "exactness" not in entry:
        return False
    return all(isinstance(p, dict) and "source" in p and "transforms" in p for p in pieces)
