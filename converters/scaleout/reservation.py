"""The JSON space reserved for measured errors, so that measured values never move an offset.

A conversion writes, per requantized object, its measured error into the provenance (``exactness`` and
``measured_error``: :meth:`converters.pipeline.produce.ErrorStats.to_json`). The directory is planned before the
payload (container §11.4), so its size must not depend on values only known after encoding — otherwise
the in-process conversion (errors measured first) and a staged one (errors measured while writing, on
other machines) would place the payload differently. Both therefore plan with :func:`reserved`: every
measured object gets a :class:`ReservedStats` whose JSON is at least as long as any real one, and the
real provenance replaces it inside the same ``json_bytes`` (``ArtifactWriter.replace_provenance``).

Longest values: ``ErrorStats.to_json`` rounds floats (``round(c, 9)`` for the cosine, 6 significant
digits otherwise: at most 12 characters, e.g. ``-0.123456789``, ``1.23457e-100``) and counts elements
(at most a U64, 20 digits). :class:`ReservedStats` takes the JSON of an ``ErrorStats`` with every
optional nested record present (fields that default to ``None`` and hold an ``ErrorStats``) and widens
each number to 13 characters / 20 digits. ``exactness`` is ``value-exact`` or ``requantized``, both 11
characters. Should a future record outgrow this, ``replace_provenance`` refuses loudly (rule
``json_reservation``) rather than writing a different layout.
"""

from __future__ import annotations

import dataclasses

from converters.pipeline.planned import needs_measure
from converters.pipeline.produce import ErrorStats

U64_MAX = (1 << 64) - 1
WIDEST_FLOAT = -1.23457e-100  # 13 characters in JSON, more than any rounded error value


class ReservedStats(ErrorStats):
    """Stands in for an object's measured error while planning: its JSON is at least as long as any real one."""

    @property
    def exact(self) -> bool:
        return False

    def to_json(self) -> dict:
        return _widest(_full_stats().to_json())


def _full_stats(depth: int = 1) -> ErrorStats:
    """An ``ErrorStats`` with its optional nested records present (``depth`` levels; the producer nests one)."""
    full = ErrorStats()
    for f in dataclasses.fields(ErrorStats):
        if depth > 0 and getattr(full, f.name) is None and "ErrorStats" in str(f.type):
            setattr(full, f.name, _full_stats(depth - 1))
    return full


def _widest(value):
    if isinstance(value, dict):
        return {k: _widest(v) for k, v in value.items()}
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return U64_MAX
    if isinstance(value, float):
        return WIDEST_FLOAT
    return value


def measured(objects: list) -> list:
    """The objects whose error a conversion measures (the same predicate as the in-process write)."""
    return [o for o in objects if needs_measure(o)]


def reserved(result, objects: list):
    """``result`` with a :class:`ReservedStats` for every object whose error will be measured."""
    return dataclasses.replace(result, errors={o.id: ReservedStats() for o in measured(objects)})
