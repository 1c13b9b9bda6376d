"""How far a decoded parameter may be from its source values, per storage format (``verify`` gates 4–5).

Exact objects (provenance ``bit-exact`` / ``value-exact``) must decode to the source's values after the
mapped transforms, element for element. Requantized ones are judged against bounds that follow from the
formats (storage-layouts §1–§4) with the ``absmax`` encoder, measured on tinymodels' uniform random
weights (the worst case for absmax grids: no outliers to waste codes on) and given about 2× margin:

==========================  ===========  ========  ========  ======================================
format                      min cosine   max_rel   row_rel   worst measured (cos / max_rel / row)
==========================  ===========  ========  ========  ======================================
q8_g32_fp16 (qmax 127)      0.9995       0.0050    0.03      0.999986 / 0.0039 / 0.0070
q6_g64_fp16 (qmax 31)       0.998        0.0172    0.06      (by the q5/q8 scaling)
q5_g64_fp16 (qmax 15)       0.995        0.0344    0.15      0.99866 / 0.0333 / 0.075
q4_g64_fp16 (qmax 7)        0.985        0.0725    0.30      0.99406 / 0.0714 / 0.157
q2_g64_fp16 (codes -1..2)   0.85         0.26      0.80      (bound only)
t2_g128_fp16 (ternary)      0.70         0.51      0.90      (bound only; t2 is for exact sources)
nvfp4 (e2m1, fp8 scales)    0.985        0.25      0.30      0.99529 / 0.168 / 0.120
fp8_e4m3fn_row_bf16         0.998        0.0650    0.08      0.99962 / 0.0357 / 0.033
bf16                        0.99999      0.0040    0.006     0.9999987 / 0.0031 / 0.0021
fp32                        1 - 1e-9     1e-6      1e-6      exact up to float64 → float32 rounding
==========================  ===========  ========  ========  ======================================

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


@dataclass(frozen=True)
class Tolerance:
    cosine: float
    max_rel: float
    row_rel: float


EXACT = Tolerance(1.0, 0.0, 0.0)
_FP16_SCALE = 2.0 ** -10


def _q(qmax: int, cosine: float, row_rel: float) -> Tolerance:
    return Tolerance(cosine, round(1 / (2 * qmax) + _FP16_SCALE, 4), row_rel)


FORMATS: dict[str, Tolerance] = {
    "q8_g32_fp16": _q(127, 0.9995, 0.03),
    "q6_g64_fp16": _q(31, 0.998, 0.06),
    "q5_g64_fp16": _q(15, 0.995, 0.15),
    "q4_g64_fp16": _q(7, 0.985, 0.30),
    "q2_g64_fp16": Tolerance(0.85, 0.26, 0.80),
    "t2_g128_fp16": Tolerance(0.70, 0.51, 0.90),
    "nvfp4": Tolerance(0.985, 0.25, 0.30),
    "fp8_e4m3fn_row_bf16": Tolerance(0.998, 0.065, 0.08),
    "bf16": Tolerance(0.99999, 0.0040, 0.006),
    "fp32": Tolerance(1 - 1e-9, 1e-6, 1e-6),
}
#: formats not in the table (passthrough ``gguf_*`` is exact; anything new is judged loosely until measured)
DEFAULT = Tolerance(0.98, 0.5, 0.30)


def for_format(fmt: str | None) -> Tolerance:
    return FORMATS.get(fmt or "", DEFAULT)


def loosest(formats) -> Tolerance:
    """The loosest tolerance of several formats (a parameter bound across objects of different formats)."""
    ts = [for_format(f) for f in formats] or [DEFAULT]
    return Tolerance(min(t.cosine for t in ts), max(t.max_rel for t in ts), max(t.row_rel for t in ts))
