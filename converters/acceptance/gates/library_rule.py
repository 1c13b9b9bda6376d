"""Gate 4 against a prequantized source's library rule (docs/acceptance.md §Prequantized sources).

The source side of a prequantized tensor is the source library's own dequantization, in the library's output
dtype (``bfloat16`` for compressed-tensors' NVFP4 decompressor …) widened to float32. A kept object
(``bit-exact`` / ``value-exact``) decodes in float32 by its format's rule (storage-layouts); provenance records,
per object, the library's dtype (``source_quantization.library_dtype``) and ``max_ulp``, the measured distance
between the two rules. Gate 4 therefore compares the artifact's values rounded once to the library's dtype with
the library's values, element by element, allowing at most ``max_ulp`` units in the last place of that dtype.
The distance is computed here from the bit patterns, independently of the source layer's own measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

DTYPES = {"float32": np.dtype("<f4"), "bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype("<f2")}
#: relative size of one unit in the last place, per dtype (2^-mantissa bits)
EPS = {"float32": 2.0 ** -23, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}


@dataclass(frozen=True)
class LibraryRule:
    """How a kept object's values compare with its library: rounded to ``dtype``, at most ``max_ulp`` apart."""

    dtype: str
    max_ulp: int

    def rounded(self, x: np.ndarray) -> np.ndarray:
        """``x`` rounded once to the library's dtype (nearest even), as float32."""
        return np.asarray(x, dtype=np.float32).astype(DTYPES[self.dtype]).astype(np.float32)

    def beyond(self, got: np.ndarray, want: np.ndarray) -> np.ndarray:
        """Mask of elements more than ``max_ulp`` apart in the library's dtype (NaN against a number counts)."""
        a, b = _ordinal(got, self.dtype), _ordinal(want, self.dtype)
        na, nb = np.isnan(got), np.isnan(want)
        return (np.abs(a - b) > self.max_ulp) & ~(na & nb) | (na != nb)

    @property
    def row_limit(self) -> float:
        """The per-row relative error that ``max_ulp`` allows (on top of float32 rounding)."""
        return 1e-7 + self.max_ulp * EPS[self.dtype]


def _ordinal(x: np.ndarray, dtype: str) -> np.ndarray:
    """A monotone integer of each value's bit pattern in ``dtype`` (±0 both 0)."""
    dt = DTYPES[dtype]
    bits = np.asarray(x, dtype=np.float32).astype(dt).view(f"<i{dt.itemsize}").astype(np.int64)
    mag = bits & ((1 << (8 * dt.itemsize - 1)) - 1)
    return np.where(bits < 0, -mag, mag)


def library_rule(art, object_ids) -> LibraryRule | None:
    """The rule of the objects behind a binding when every one records a library dtype (a prequantized
    source's kept objects), with the largest ``max_ulp`` among them; None otherwise."""
    prov = art.provenance.get("objects") or {}
    dtypes, ulps = set(), []
    for oid in object_ids:
        entry = prov.get(oid) if isinstance(prov, dict) else None
        scheme = entry.get("source_quantization") if isinstance(entry, dict) else None
        ulp = entry.get("max_ulp") if isinstance(entry, dict) else None
        schemes = scheme if isinstance(scheme, list) else [scheme]  # a bank: one per expert divisor
        if not schemes or not all(isinstance(s, dict) and s.get("library_dtype") in DTYPES for s in schemes):
            return None
        if isinstance(ulp, bool) or not isinstance(ulp, int) or ulp < 0:
            return None
        dtypes.update(s["library_dtype"] for s in schemes)
        ulps.append(ulp)
    if len(dtypes) != 1:
        return None
    return LibraryRule(dtypes.pop(), max(ulps))
