"""One exactness label per object, decided by the plan, and one count of them (docs/recipes.md §Exactness).

Every produced tensor object is ``bit-exact`` (its bytes are the source's, or a literal the plan
computes), ``value-exact`` (re-expressed, the same values) or ``requantized``. The plan decides it
before anything is written, and the dry run, the conversion summary, the provenance, ``convert inspect``
and the report all show that one label and count it with :func:`counts` — so the five agree:

- a transcode carries its table's label (``format/transcoding.md``);
- an object re-encoded into a float format (``bf16``, ``fp16``, ``fp32``) from float source values
  (:data:`FLOAT_SOURCES`) — a norm shifted by −1, ``A_log`` computed in float32, F32 narrowed to BF16 —
  is exact exactly when every value is representable: the plan **probes** it (encodes it once, measuring
  as the conversion does; :func:`predict`) and labels it ``value-exact`` or ``requantized``. That reads
  those tensors once more (for most models, norms and small vectors; a float32 checkpoint narrowed to
  bf16 is read twice);
- any other re-encoded object is ``requantized``, also if its measured error happens to be 0 (its
  ``measured_error`` says so).

The conversion still measures every requantized object while writing; the measurement is the recorded
error, never a new label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from converters.pipeline.planned import EXACTNESS, PlannedTensor, needs_measure
from converters.pipeline.produce import ErrorStats

#: source value types whose re-encoding into a float format is exact when the values fit
FLOAT_SOURCES = frozenset({"F64", "F32", "F16", "BF16"})
#: target formats that store values as floats of one width (encoding is rounding to that width)
FLOAT_FORMATS = frozenset({"fp32", "fp16", "bf16"})


def probed(o) -> bool:
    """Whether the plan probes object ``o`` (see the module docstring)."""
    return (needs_measure(o) and o.format in FLOAT_FORMATS
            and all(p.source_type in FLOAT_SOURCES for p in o.pieces if p.method == "encode"))


def predict(objects: Iterable, producer) -> None:
    """Probe every :func:`probed` object with ``producer`` and set its label (``PlannedTensor.probed``)."""
    for o in objects:
        if isinstance(o, PlannedTensor) and probed(o):
            stats = ErrorStats()
            for _ in producer.stream(o, stats):
                pass
            o.probed = "value-exact" if stats.exact else "requantized"


def counts(labels: Iterable[str]) -> dict[str, int]:
    """The count of each label, in :data:`EXACTNESS` order, labels that occur only."""
    c = Counter(labels)
    return {k: c[k] for k in EXACTNESS if c[k]} | {k: v for k, v in c.items() if k not in EXACTNESS}


def provenance_counts(objects: Mapping) -> dict[str, int]:
    """:func:`counts` of an artifact's ``provenance.objects``: the produced tensors (borrowed objects and
    resources are not counted), as the conversion summary counts them."""
    return counts(e["exactness"] for e in objects.values()
                  if isinstance(e, dict) and e.get("exactness") and "borrowed_from" not in e and "resource" not in e)
