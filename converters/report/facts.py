"""The numbers of a conversion report, read from the artifact (docs/report.md §What the report shows).

Per tensor object: component, layer and parameter kind (from its id ``component/layers/L/kind``), format,
bytes, elements, exactness, and — for requantized objects — the measured cosine and RMS error recorded in
provenance. The relative RMS is that RMS over the RMS of the stored values, which the report decodes
(row blocks of :data:`DECODE_ROWS`, memory bounded), since provenance keeps the absolute RMS only.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from converters.pipeline.exactness import provenance_counts
from ninfer_core import codecs, open_artifact

DECODE_ROWS = 4096
_LAYERED = re.compile(r"^(?P<component>[^/]+)/layers/(?P<layer>\d+)/(?P<kind>.+)$")


@dataclass
class ObjectFacts:
    id: str
    component: str
    layer: int | None
    kind: str
    format: str
    bytes: int
    elements: int
    exactness: str
    cosine: float | None = None
    rms: float | None = None
    rel_rms: float | None = None
    importance_used: bool | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None or k == "layer"}


@dataclass
class ReportFacts:
    artifact: str
    artifact_id: str
    name: str
    recipe: dict
    overrides: list
    importance: dict | None
    acceptance: dict | None
    objects: list[ObjectFacts] = field(default_factory=list)
    exactness: dict[str, int] = field(default_factory=dict)  # the count of the summary and inspect (exactness.py)

    def bytes_by_component_format(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for o in self.objects:
            out[o.component][o.format] += o.bytes
        return {c: dict(f) for c, f in out.items()}

    def bits_per_weight(self) -> dict[str, float]:
        by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for o in self.objects:
            by[o.component][0] += o.bytes
            by[o.component][1] += o.elements
        return {c: round(8 * b / n, 4) for c, (b, n) in by.items() if n}

    def layered(self) -> list[ObjectFacts]:
        return [o for o in self.objects if o.layer is not None]

    def to_json(self) -> dict:
        return {"schema": "ninfer-report/v1", "artifact": self.artifact, "artifact_id": self.artifact_id,
                "name": self.name, "recipe": self.recipe.get("name"), "overrides": self.overrides,
                "importance": self.importance, "acceptance": self.acceptance,
                "bytes_by_component_format": self.bytes_by_component_format(),
                "bits_per_weight": self.bits_per_weight(), "exactness": self.exactness,
                "objects": [o.to_json() for o in self.objects]}


def _split(oid: str) -> tuple[str, int | None, str]:
    m = _LAYERED.match(oid)
    if m:
        return m["component"], int(m["layer"]), m["kind"]
    comp, _, rest = oid.partition("/")
    return comp, None, rest or oid


def _stored_rms(a, rec) -> float:
    """RMS of the object's decoded values, row block by row block."""
    total, n = 0.0, 0
    buf = a.object_bytes(rec.id)
    for r0 in range(0, rec.shape[0] if rec.shape else 1, DECODE_ROWS):
        r1 = min(rec.shape[0], r0 + DECODE_ROWS) if rec.shape else 1
        v = codecs.decode(rec.format, rec.layout, rec.shape, buf, divisors=rec.divisors,
                          rows=(r0, r1) if rec.shape else None)
        total += float(np.einsum("i,i->", v.reshape(-1).astype(np.float64), v.reshape(-1).astype(np.float64)))
        n += v.size
    return math.sqrt(total / n) if n else 0.0


def gather(path: Path, *, acceptance: dict | None = None) -> ReportFacts:
    """The facts of the artifact at ``path``."""
    with open_artifact(path) as a:
        prov = a.provenance
        per = prov.get("objects", {}) if isinstance(prov.get("objects"), dict) else {}
        recipe = prov.get("recipe", {}) if isinstance(prov.get("recipe"), dict) else {}
        facts = ReportFacts(str(path), a.artifact_id, str(a.metadata.get("name", path.name)), recipe,
                            list(recipe.get("overrides", [])), prov.get("importance"), acceptance,
                            exactness=provenance_counts(per))
        for rec in a.objects:
            if rec.kind != "tensor":
                continue
            entry = per.get(rec.id, {})
            comp, layer, kind = _split(rec.id)
            o = ObjectFacts(rec.id, comp, layer, kind, rec.format, rec.bytes, codecs.element_count(rec.shape),
                            str(entry.get("exactness", "unknown")))
            err = entry.get("measured_error")
            if isinstance(err, dict) and o.exactness == "requantized":
                o.cosine, o.rms = float(err.get("cosine", 1.0)), float(err.get("rms", 0.0))
                stored = _stored_rms(a, rec)
                o.rel_rms = o.rms / stored if stored > 0 else 0.0
            imp = entry.get("importance")
            if isinstance(imp, dict):
                o.importance_used = bool(imp.get("used"))
            facts.objects.append(o)
    return facts
