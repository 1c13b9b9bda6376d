"""Choosing a group's FP16 multiplier and integer codes: the ``absmax`` and ``mse`` encoders.

Both work on a ``(rows, groups, G)`` float32 view and return ``(s, v)``: the multipliers as float16
``(rows, groups)`` and the code values as float32 integers in ``[vmin, vmax]`` (the caller turns values into
bit patterns; ``v`` lives in a per-thread scratch buffer). Codes are always computed from the FP16-rounded
multiplier, so the decoded error is the error actually stored. Multipliers saturate at the largest finite
FP16 (65504): magnitudes beyond ``vmax * 65504`` are clipped, never turned into an infinite multiplier.

- ``absmax``: the multiplier maps the group's largest-magnitude element onto the extreme code on its side:
  ``s = amax / vmax`` (symmetric formats, ``s >= 0``), or, for q2 whose codes are ``-1..2``, the signed
  ``s = m / 2`` with ``m`` the element of largest magnitude (a negative ``m`` flips the code range).
  Codes are ``clip(rint(x / s), vmin, vmax)``.
- ``mse``: per group, code with the multipliers ``f * s_base`` for a grid of factors ``f`` (for q2 from both
  the positive and the negative extreme) and score each by the error of the least-squares multiplier for
  its codes (``Σ x² - (Σ x·v)² / Σ v²``); refit the best (``s* = Σ x·v / Σ v²``), re-round the codes, and
  keep it where its squared error is below the ``absmax`` result's, so ``mse`` is never worse per group.
  Given importance weights (an imatrix, docs/imatrix.md §Weighted search) the scores, the refit and the
  choice use ``Σ w (x - s v)²``.
"""

from __future__ import annotations

import numpy as np

from .base import scratch

FP16_MAX = np.float32(65504.0)
#: least-squares refits of the chosen multiplier in the ``mse`` search (a second one changed no measured error)
REFITS = 1


def to_fp16(s: np.ndarray) -> np.ndarray:
    """float32 → float16 with magnitudes clipped to the largest finite FP16 (multipliers stay finite),
    and ``-0.0`` turned into ``+0.0``."""
    return (np.clip(s, -FP16_MAX, FP16_MAX) + np.float32(0.0)).astype(np.float16)


def _inverse(s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(s != 0, np.float32(1.0) / s, np.float32(0.0)).astype(np.float32)


def codes_for(x: np.ndarray, s: np.ndarray, vmin: int, vmax: int, out: np.ndarray) -> np.ndarray:
    """``clip(rint(x / s), vmin, vmax)`` per group into ``out`` (``s`` float32 ``(rows, groups)``; codes
    are 0 where ``s == 0``)."""
    np.multiply(x, _inverse(s)[..., None], out=out)
    np.rint(out, out=out)
    return np.clip(out, vmin, vmax, out=out)


def group_amax(x: np.ndarray) -> np.ndarray:
    """Largest magnitude per group of a float32 ``(rows, groups, G)`` array. Reduces the sign-cleared bit
    patterns as int32 (same order as the magnitudes, NaN above infinity), which numpy does about twice
    as fast as a float max."""
    bits = np.bitwise_and(x.view(np.int32), np.int32(0x7FFFFFFF), out=scratch("amax", x.shape, np.int32))
    return bits.max(axis=-1).view(np.float32)


def extremes(x: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Per group: ``m``, the element of largest magnitude (signed) or the largest magnitude (symmetric
    formats), and for signed formats the group's max and min. Non-finite groups give a non-finite ``m``."""
    if not signed:
        return group_amax(x), None, None
    hi, lo = x.max(axis=-1), x.min(axis=-1)
    return np.where(hi >= -lo, hi, lo), hi, lo


def _codes_stay_in_range(s16: np.ndarray) -> bool:
    mag = s16.view(np.uint16) & 0x7FFF
    return bool(((mag == 0) | ((mag >= 0x0400) & (mag < 0x7BFF))).all())


def absmax(x: np.ndarray, m: np.ndarray, vmin: int, vmax: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    s16 = to_fp16(m / np.float32(vmax))
    v = scratch("codes", x.shape, np.float32)
    if signed or not _codes_stay_in_range(s16):
        return s16, codes_for(x, s16.astype(np.float32), vmin, vmax, v)
    # |x / s| <= vmax * (1 + 2**-11) for a normal, unclipped FP16 s: rint cannot leave [-vmax, vmax]
    np.multiply(x, _inverse(s16.astype(np.float32))[..., None], out=v)
    return s16, np.rint(v, out=v)


def _sse(x: np.ndarray, v: np.ndarray, s: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    d = np.multiply(v, s[..., None], out=scratch("residual", x.shape, np.float32))
    np.subtract(x, d, out=d)
    if w is None:
        return np.einsum("rgk,rgk->rg", d, d)
    wd = np.multiply(d, w, out=scratch("weighted", x.shape, np.float32))
    return np.einsum("rgk,rgk->rg", wd, d)


def mse(x: np.ndarray, m: np.ndarray, hi: np.ndarray | None, lo: np.ndarray | None, vmin: int, vmax: int,
        signed: bool, factors: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``mse`` search; with ``w`` (importance per element, broadcastable to ``x``: docs/imatrix.md
    §Weighted search) every candidate is judged by the weighted error ``Σ w (x - s v)²``.

    Each candidate multiplier ``f * s_base`` only chooses codes ``v``; it is scored by the error of its
    least-squares multiplier for those codes, ``Σ w x² - (Σ w x v)² / Σ w v²`` (llama.cpp's
    ``make_qx_quants``), which needs two products per candidate and no second coding. The best candidate's
    multiplier is refit :data:`REFITS` times (``s* = Σ w x v / Σ w v²`` rounded to FP16, codes again) and
    kept where its actual error is below the ``absmax`` result's: never worse than absmax per group."""
    best_s, v = absmax(x, m, vmin, vmax, signed)
    best_v = scratch("best_codes", x.shape, np.float32)
    np.copyto(best_v, v)
    best_e = _sse(x, best_v, best_s.astype(np.float32), w)
    wx = x if w is None else np.multiply(x, w, out=scratch("weighted_x", x.shape, np.float32))
    if signed:
        bases = [np.maximum(hi, 0) / np.float32(vmax), np.minimum(lo, 0) / np.float32(vmax)]
    else:
        bases = [m / np.float32(vmax)]
    score = np.full(m.shape, -np.inf, dtype=np.float32)
    chosen = np.zeros(m.shape, dtype=np.float32)
    for base in bases:
        for f in factors:
            cand = to_fp16(base * np.float32(f)).astype(np.float32)
            num, den = _products(x, wx, w, codes_for(x, cand, vmin, vmax, v))
            with np.errstate(divide="ignore", invalid="ignore"):
                sc = np.where((den > 0) & (signed | (num > 0)), num * num / den, np.float32(0))
            better = sc > score
            score = np.where(better, sc, score)
            chosen = np.where(better, cand, chosen)
    s32 = chosen
    s16 = to_fp16(chosen)
    for _ in range(REFITS):
        num, den = _products(x, wx, w, codes_for(x, s32, vmin, vmax, v))
        with np.errstate(divide="ignore", invalid="ignore"):
            refit = np.where(den > 0, num / den, 0).astype(np.float32)
        if not signed:
            np.maximum(refit, 0, out=refit)
        s16 = to_fp16(refit)
        s32 = s16.astype(np.float32)
    codes_for(x, s32, vmin, vmax, v)
    e = _sse(x, v, s32, w)
    better = e < best_e
    best_s = np.where(better, s16, best_s)
    np.copyto(best_v, v, where=better[..., None])
    return best_s, best_v


def _products(x: np.ndarray, wx: np.ndarray, w: np.ndarray | None, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group ``Σ w x v`` and ``Σ w v²`` (``w`` = 1 when None)."""
    num = np.einsum("rgk,rgk->rg", wx, v)
    if w is None:
        return num, np.einsum("rgk,rgk->rg", v, v)
    return num, np.einsum("rgk,rgk->rg", np.multiply(v, w, out=scratch("weighted", x.shape, np.float32)), v)
