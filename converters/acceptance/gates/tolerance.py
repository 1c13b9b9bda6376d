"""How far a decoded parameter may be from its source values, per tolerance class (``verify`` gates 4–5).

Every codec declares its ``tolerance_class`` (docs/format/codec-traits.md); the bounds below are keyed by
it, so a new format with the same numeric grid shares its class. Reasons and measurements:
docs/thresholds.md §Tolerance.

Exact objects (provenance ``bit-exact`` / ``value-exact``) must decode to the source's values after the
mapped transforms, element for element. Requantized ones are judged against bounds that follow from the
formats (storage-layouts §1–§4) with the ``absmax`` encoder, measured on tinymodels' uniform random
weights (the worst case for absmax grids: no outliers to waste codes on) and given about 2× margin:

===========  ==========================  ===========  ========  ========  ===================================
class        formats (today)             min cosine   max_rel   row_rel   worst measured (cos / max_rel / row)
===========  ==========================  ===========  ========  ========  ===================================
int8         q8_g32_fp16 (qmax 127)      0.9995       0.0049    0.03      0.999986 / 0.0039 / 0.0070
int6         q6_g64_fp16 (qmax 31)       0.998        0.0171    0.06      (by the q5/q8 scaling)
int5         q5_g64_fp16 (qmax 15)       0.995        0.0343    0.15      0.99866 / 0.0333 / 0.075
int4         q4_g64_fp16 (qmax 7)        0.985        0.0724    0.30      0.99406 / 0.0714 / 0.157
int2         q2_g64_fp16 (codes -1..2)   0.85         0.26      0.80      (bound only)
ternary      t2_g128_fp16                0.70         0.51      0.90      (bound only; t2 is for exact sources)
fp4-e2m1     nvfp4 (fp8 block scales)    0.985        0.25      0.30      0.99529 / 0.168 / 0.120
fp8-e4m3     fp8_e4m3fn_row_bf16         0.998        0.0650    0.08      0.99962 / 0.0357 / 0.033
bf16         bf16                        0.99999      0.0040    0.006     0.9999987 / 0.0031 / 0.0021
fp32         fp32                        1 - 1e-9     1e-6      1e-6      exact up to float64 → float32 rounding
===========  ==========================  ===========  ========  ========  ===================================

- ``max_rel`` = max |decoded − source| / max |source| over the parameter. With ``absmax`` a group's error is at
  most half a step, ``amax_group / (2·qmax)`` plus the FP16 rounding of the multiplier (2^-10), and
  ``amax_group <= amax_parameter``: the q-format bounds are ``1/(2·qmax) + 2^-10``, tight (the measured
  worst reaches them). bf16 rounds to 8 significant bits (2^-8); fp8 e4m3 to 4 (2^-4); nvfp4's largest step
  is 2 between 4 and 6 (1/6 of the block's top) plus its fp8 block scale. Other encoders (``mse``) clip on
  purpose, so ``max_rel`` is reported but not judged for them.
- ``row_rel`` = per row ‖decoded − source‖ / ‖source‖: the order probe. A row that belongs elsewhere (a
  permuted row, head or interleave) has ``row_rel`` ≈ √2 for uncorrelated weights, far above every bound.
- The cosine of the whole parameter is the gate-4 figure (cosine ≈ 1 − row_rel²/2 for uniform rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from ninfer_core import codecs


@dataclass(frozen=True)
class Tolerance:
    cosine: float
    max_rel: float
    row_rel: float


EXACT = Tolerance(1.0, 0.0, 0.0)
_FP16_SCALE = 2.0 ** -10


def _q(qmax: int, cosine: float, row_rel: float) -> Tolerance:
    return Tolerance(cosine, round(1 / (2 * qmax) + _FP16_SCALE, 4), row_rel)


#: tolerance class (a codec trait) -> bounds
CLASSES: dict[str, Tolerance] = {
    "int8": _q(127, 0.9995, 0.03),
    "int6": _q(31, 0.998, 0.06),
    "int5": _q(15, 0.995, 0.15),
    "int4": _q(7, 0.985, 0.30),
    "int2": Tolerance(0.85, 0.26, 0.80),
    "ternary": Tolerance(0.70, 0.51, 0.90),
    "fp4-e2m1": Tolerance(0.985, 0.25, 0.30),
    "fp8-e4m3": Tolerance(0.998, 0.065, 0.08),
    "bf16": Tolerance(0.99999, 0.0040, 0.006),
    "fp32": Tolerance(1 - 1e-9, 1e-6, 1e-6),
}
#: classes not in the table (passthrough ``gguf_*`` is exact; anything new is judged loosely until measured)
DEFAULT = Tolerance(0.98, 0.5, 0.30)


def _class_of(fmt: str | None) -> str | None:
    return codecs.FORMATS[fmt].tolerance_class if fmt in codecs.FORMATS else None


def for_format(fmt: str | None) -> Tolerance:
    """The bounds of ``fmt``'s tolerance class (:data:`DEFAULT` for a class without bounds or an unknown format)."""
    return CLASSES.get(_class_of(fmt) or "", DEFAULT)


#: format -> bounds, for every registered format whose class has bounds (the table of docs/thresholds.md)
FORMATS: dict[str, Tolerance] = {f: CLASSES[c] for f in codecs.FORMATS if (c := _class_of(f)) in CLASSES}


def loosest(formats) -> Tolerance:
    """The loosest tolerance of several formats (a parameter bound across objects of different formats)."""
    ts = [for_format(f) for f in formats] or [DEFAULT]
    return Tolerance(min(t.cosine for t in ts), max(t.max_rel for t in ts), max(t.row_rel for t in ts))
