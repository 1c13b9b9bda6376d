"""Pre-run checks that need no GPU (``validate`` Gate F; ``verify`` gate 3): the use auxiliaries of container §8.

- ``hadamard_signs`` (storage-layouts §7): the bound slice has the matrix's input width ``K``, a multiple of
  1024; every value is exactly +1 or -1; the slice is one width's whole segment of ``text/hadamard_signs``,
  whose segments ``text/hadamard_widths`` lists in order (each a multiple of 1024, summing to its length).
- ``input_columns``: a permutation of ``0..K-1``.
- ``activation_input_divisor``: positive and finite.

Codec validity of every object's bytes (codes, multipliers, padding) comes from ``ninfer_core.validate``
(:mod:`converters.acceptance.gates.structure`).
"""

from __future__ import annotations

import numpy as np

from converters.acceptance.gates.codes import finding
from converters.acceptance.report import Finding
from ninfer_core.errors import NinferError

HADAMARD_BLOCK = 1024
SIGNS, WIDTHS = "text/hadamard_signs", "text/hadamard_widths"
KNOWN = ("hadamard_signs", "input_columns", "activation_input_divisor")


def _width_of(art, name: str, shapes) -> int | None:
    shape = shapes.get(name) if shapes else None
    if shape is not None:
        return int(shape[-1]) if len(shape) >= 2 else None
    b = art.bindings.get(name)
    if b is not None and b.object is not None:
        try:
            obj = art.object(b.object)
        except NinferError:
            return None
        return int(obj.shape[-1]) if obj.shape and len(obj.shape) >= 2 else None
    return None


def check_auxiliaries(art, shapes=None) -> tuple[list[Finding], dict]:
    """Issues and counts of every use auxiliary; ``shapes``: logical shapes when known (contract or mapping)."""
    issues, counts = [], {"hadamard_signs": 0, "input_columns": 0, "activation_input_divisor": 0}
    issues += _widths_table(art)
    segments = _segments(art)
    for u in art.uses:
        for kind, binding in u.auxiliaries.items():
            where = f"$.uses[{u.parameter}].auxiliaries.{kind}"
            if kind not in KNOWN:
                issues.append(finding("NINFER_AUX_UNKNOWN", f"{u.parameter}: auxiliary {kind!r} is not checked",
                                    path=where))
                continue
            counts[kind] += 1
            try:
                values = art.binding_array(binding)
            except NinferError as exc:
                code = {"hadamard_signs": "NINFER_AUX_HADAMARD", "input_columns": "NINFER_AUX_INPUT_COLUMNS"}.get(
                    kind, "NINFER_AUX_DIVISOR")
                issues.append(finding(code, f"{u.parameter}: {kind} cannot be read: {exc.message}", path=where))
                continue
            k = _width_of(art, u.parameter, shapes)
            if kind == "hadamard_signs":
                issues += _signs(u.parameter, binding, values, k, segments, where)
            elif kind == "input_columns":
                issues += _columns(u.parameter, values, k, where)
            else:
                bad = ~np.isfinite(values) | (values <= 0)
                if bad.any():
                    issues.append(finding("NINFER_AUX_DIVISOR", f"{u.parameter}: activation divisor "
                                        f"{float(values[bad][0])!r} is not positive and finite", path=where))
    return issues, counts


def _widths_table(art) -> list[Finding]:
    names = {o.id for o in art.objects}
    if SIGNS not in names and WIDTHS not in names:
        return []
    if SIGNS not in names or WIDTHS not in names:
        return [finding("NINFER_AUX_HADAMARD", f"{SIGNS} and {WIDTHS} come together; only one is present",
                      path="$.objects")]
    widths = art.object_array(WIDTHS).astype(np.int64).reshape(-1)
    n = art.object(SIGNS).elements
    issues = []
    if np.any(widths <= 0) or np.any(widths % HADAMARD_BLOCK):
        issues.append(finding("NINFER_AUX_HADAMARD", f"{WIDTHS} {widths.tolist()} holds a width that is not a positive "
                            f"multiple of {HADAMARD_BLOCK}", path=WIDTHS))
    if int(widths.sum()) != n:
        issues.append(finding("NINFER_AUX_HADAMARD", f"{WIDTHS} sums to {int(widths.sum())}, but {SIGNS} holds {n} "
                            "values", path=WIDTHS))
    return issues


def _segments(art) -> dict[int, int] | None:
    """Segment start → width of ``text/hadamard_signs`` from the widths table (None when absent)."""
    try:
        widths = art.object_array(WIDTHS).astype(np.int64).reshape(-1)
    except NinferError:
        return None
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    return {int(s): int(w) for s, w in zip(starts, widths, strict=True)}


def _signs(name, binding, values, k, segments, where) -> list[Finding]:
    issues = []
    n = values.size
    if n % HADAMARD_BLOCK:
        issues.append(finding("NINFER_AUX_HADAMARD", f"{name}: {n} signs, not a multiple of {HADAMARD_BLOCK}", path=where))
    if k is not None and n != k:
        issues.append(finding("NINFER_AUX_HADAMARD", f"{name}: {n} signs for a matrix of input width {k}", path=where))
    bad = np.flatnonzero(np.abs(values) != 1)
    if bad.size:
        issues.append(finding("NINFER_AUX_HADAMARD", f"{name}: {bad.size} of {n} sign values are not +1/-1 (first "
                            f"{float(values[bad[0]])!r} at {int(bad[0])})", path=where))
    if segments is not None and binding.parts:
        for p in binding.parts:
            if p.object == SIGNS and segments.get(p.begin) != p.elements:
                issues.append(finding("NINFER_AUX_HADAMARD", f"{name}: signs range [{p.begin}, {p.end}) is not one "
                                    f"segment of {WIDTHS}", path=where))
    return issues


def _columns(name, values, k, where) -> list[Finding]:
    n = values.size
    ints = values.astype(np.int64)
    if not np.all(ints == values) or not np.array_equal(np.sort(ints), np.arange(n)):
        return [finding("NINFER_AUX_INPUT_COLUMNS", f"{name}: input_columns is not a permutation of 0..{n - 1}",
                      path=where)]
    if k is not None and n != k:
        return [finding("NINFER_AUX_INPUT_COLUMNS", f"{name}: {n} input columns for a matrix of input width {k}",
                      path=where)]
    return []


__all__ = ["check_auxiliaries"]
