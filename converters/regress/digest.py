"""Per-object digests of an artifact, and what changed between an expected digest and a new one.

The digest (``ninfer-regression/v1``) is what a recipe regression pins down, and only that: for every
object its kind, format, layout, shape, divisors, byte count and the SHA-256 of its encoded bytes; a
short hash of every binding, of the uses, of each component record and of the metadata. Provenance is
left out on purpose — it holds absolute paths and modification times of the generated fixtures, which
change from run to run without the output changing.

The old bytes are not kept, so to say *how* an object changed the digest also records, per tensor
object, statistics of its decoded values (``sum``, ``absmax``, ``rms``) and ``vs_source``: the largest
absolute difference between the logical parameters bound to it (decoded, use auxiliaries undone) and the
source's own values after the mapped transforms (:func:`converters.model.engine.expected_parameters`). These
are reported side by side, old → new, for each changed object: a format change that doubled the error
against the source, or a reordering that left the sum and absmax equal but moved ``vs_source``, is told
apart at a glance. They are explanations, never the pass/fail criterion (floats are rounded to 6
significant digits; the SHA-256 decides).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ninfer_core import open_artifact
from ninfer_core.container.contentid import object_digest
from ninfer_core.errors import NinferError

SCHEMA = "ninfer-regression/v1"
EXACT_FIELDS = ("kind", "format", "layout", "shape", "divisors", "bytes", "sha256")


def _g(x: float) -> float:
    return float(f"{x:.6g}")


def _short(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _stats(values: np.ndarray) -> dict:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if not v.size:
        return {"sum": 0.0, "absmax": 0.0, "rms": 0.0}
    return {"sum": _g(float(v.sum())), "absmax": _g(float(np.abs(v).max())), "rms": _g(float(np.sqrt(np.mean(v * v))))}


def _vs_source(art, source, components) -> dict[str, float]:
    """Object ID → max |decoded logical value − source value| over the parameters bound to it."""
    from converters.model.engine import expected_parameters, logical_array

    out: dict[str, float] = {}
    for name, ref in expected_parameters(source, components=components):
        b = art.bindings.get(name)
        if b is None:
            continue
        try:
            got = logical_array(art, name, ref.shape)
        except (NinferError, ValueError):
            continue
        err = _g(float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))) if ref.size else 0.0
        for oid in b.object_ids:
            out[oid] = max(out.get(oid, 0.0), err)
    return out


def artifact_digest(path: str | Path, source: str | Path | None = None, *,
                    components: tuple[str, ...] = ("text",)) -> dict:
    """The digest of the artifact at ``path`` (see the module docstring); ``source`` adds ``vs_source``."""
    with open_artifact(path) as art:
        vs = _vs_source(art, source, components) if source is not None else {}
        objects = {}
        for o in art.objects:
            rec = {"kind": o.kind}
            if o.kind == "tensor":
                rec.update(format=o.format, layout=o.layout, shape=list(o.shape), divisors=o.divisors)
            rec.update(bytes=o.bytes, sha256=object_digest(art, o).hex())
            if o.kind == "tensor":
                try:
                    rec["decoded"] = _stats(art.object_array(o.id))
                except NinferError:
                    rec["decoded"] = None
                if o.id in vs:
                    rec["vs_source"] = vs[o.id]
            objects[o.id] = rec
        return {"objects": objects,
                "bindings": {k: _short(b.to_json()) for k, b in sorted(art.bindings.items())},
                "uses": _short([u.to_json() for u in art.uses]),
                "components": {k: _short(c.to_json()) for k, c in sorted(art.components.items())},
                "metadata": _short(dict(art.metadata))}


@dataclass
class Change:
    """One difference: ``what`` is an object ID or ``bindings/<name>``, ``uses``, ``components/<id>``,
    ``metadata``; ``fields`` the digest fields that differ; ``old``/``new`` the records (None: absent)."""

    what: str
    fields: list[str]
    old: dict | str | None = None
    new: dict | str | None = None
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        if not isinstance(self.old, dict):
            return "changed"
        parts = []
        for f in self.fields:
            a, b = self.old.get(f), self.new.get(f)
            if f == "sha256":
                parts.append("content")
            elif f == "shape":
                parts.append(f"shape {'×'.join(map(str, a or []))}→{'×'.join(map(str, b or []))}")
            else:
                parts.append(f"{f} {a}→{b}")
        return "; ".join(parts)

    def value_columns(self) -> tuple[str, str, str]:
        """``decoded absmax``, ``decoded sum``, ``vs source`` as ``old → new`` texts."""
        def pair(get):
            a = get(self.old) if isinstance(self.old, dict) else None
            b = get(self.new) if isinstance(self.new, dict) else None
            return "" if a is None and b is None else f"{_fmt(a)} → {_fmt(b)}"

        dec = lambda key: lambda r: (r.get("decoded") or {}).get(key)  # noqa: E731
        return pair(dec("absmax")), pair(dec("sum")), pair(lambda r: r.get("vs_source"))

    def to_json(self) -> dict:
        return {"what": self.what, "change": self.describe(), "fields": self.fields, "old": self.old, "new": self.new}


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.6g}"


def compare(expected: dict, actual: dict) -> list[Change]:
    """The differences between two digests, objects in the new directory order, then removed ones."""
    changes: list[Change] = []
    old_objects, new_objects = expected.get("objects", {}), actual["objects"]
    for oid, new in new_objects.items():
        old = old_objects.get(oid)
        if old is None:
            changes.append(Change(oid, list(EXACT_FIELDS), None, new))
            continue
        fields = [f for f in EXACT_FIELDS if old.get(f) != new.get(f)]
        if fields:
            changes.append(Change(oid, fields, old, new))
    changes += [Change(oid, list(EXACT_FIELDS), old, None) for oid, old in old_objects.items() if oid not in new_objects]
    if list(old_objects) != list(new_objects) and not changes:
        changes.append(Change("objects", ["order"], ",".join(old_objects), ",".join(new_objects)))
    for group in ("bindings", "components"):
        old_g, new_g = expected.get(group, {}), actual[group]
        for name in sorted(set(old_g) | set(new_g)):
            if old_g.get(name) != new_g.get(name):
                changes.append(Change(f"{group}/{name}", ["sha256"], old_g.get(name), new_g.get(name)))
    for key in ("uses", "metadata"):
        if expected.get(key) != actual[key]:
            changes.append(Change(key, ["sha256"], expected.get(key), actual[key]))
    return changes
