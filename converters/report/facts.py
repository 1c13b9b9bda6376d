"""The numbers of a conversion report, read from the artifact (docs/report.md §What the report shows).

Per tensor object: component, layer and parameter kind (from its id ``component/layers/L/kind``), format,
bytes, elements, exactness, and — for requantized objects — the measured cosine and RMS error recorded in
provenance. The relative RMS is that RMS over the RMS of the stored values, which the report decodes
(row blocks of :data:`DECODE_ROWS`, memory bounded), since provenance keeps the absolute RMS only.

The source's bits per weight come from the source type of every piece provenance records
(:func:`source_bits`): a GGUF type's block size (scales included), a safetensors float dtype's width; an
integer dtype (a packed prequantized tensor, whose element is not a weight) leaves it unknown.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from converters.pipeline.exactness import provenance_counts
from converters.sources.fileio import refuse_parts_leaving
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
    source_bits: float | None = None  # bits the source stored per weight of this object (None: unknown)

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

    def source_bits_per_weight(self) -> dict[str, float | None]:
        """Per component, the source's bits per weight over the same objects (``None``: some source type
        has no known width, docs/report.md §What the report shows)."""
        by: dict[str, list] = defaultdict(lambda: [0.0, 0])
        for o in self.objects:
            acc = by[o.component]
            acc[0] = None if acc[0] is None or o.source_bits is None else acc[0] + o.source_bits * o.elements
            acc[1] += o.elements
        return {c: None if b is None else round(b / n, 4) for c, (b, n) in by.items() if n}

    def layered(self) -> list[ObjectFacts]:
        return [o for o in self.objects if o.layer is not None]

    def to_json(self) -> dict:
        return {"schema": "ninfer-report/v1", "artifact": self.artifact, "artifact_id": self.artifact_id,
                "name": self.name, "recipe": self.recipe.get("name"), "overrides": self.overrides,
                "importance": self.importance, "acceptance": self.acceptance,
                "bytes_by_component_format": self.bytes_by_component_format(),
                "bits_per_weight": self.bits_per_weight(), "source_bits_per_weight": self.source_bits_per_weight(),
                "exactness": self.exactness,
                "objects": [o.to_json() for o in self.objects]}


def _split(oid: str) -> tuple[str, int | None, str]:
    m = _LAYERED.match(oid)
    if m:
        return m["component"], int(m["layer"]), m["kind"]
    comp, _, rest = oid.partition("/")
    return comp, None, rest or oid


def type_bits(source_kind: str, source_type: str) -> float | None:
    """Bits per weight a source of ``source_kind`` (``gguf``, ``safetensors``, ``hf``) stores for
    ``source_type``: a GGUF type's block bytes over its elements, a safetensors float dtype's width."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    from converters.sources.safetensors import DTYPE_BITS

    if source_kind == "gguf":
        if source_type not in GGMLQuantizationType.__members__:
            return None
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType[source_type]]
        return 8 * size / block
    if source_type.startswith(("F", "BF")) and source_type in DTYPE_BITS:
        return float(DTYPE_BITS[source_type])
    return None


def source_bits(source_kind: str, pieces, shape) -> float | None:
    """The source's bits per weight of one object: its pieces' types weighted by their rows."""
    if not isinstance(pieces, list) or not pieces or not shape:
        return None
    total, rows = 0.0, 0
    for p in pieces:
        bits = type_bits(source_kind, str(p.get("source_type"))) if isinstance(p, dict) else None
        span = p.get("rows") if isinstance(p, dict) else None
        if bits is None or not (isinstance(span, list) and len(span) == 2):
            return None
        total += bits * (span[1] - span[0])
        rows += span[1] - span[0]
    return total / rows if rows else None


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
        refuse_parts_leaving(a, path, command="report")
        prov = a.provenance
        per = prov.get("objects", {}) if isinstance(prov.get("objects"), dict) else {}
        recipe = prov.get("recipe", {}) if isinstance(prov.get("recipe"), dict) else {}
        source_kind = str((prov.get("source") or {}).get("kind", "")) if isinstance(prov.get("source"), dict) else ""
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
            o.source_bits = source_bits(source_kind, entry.get("pieces"), rec.shape)
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
