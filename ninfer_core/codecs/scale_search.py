"""Choosing a group's FP16 multiplier and integer codes: the ``absmax`` and ``mse`` encoders.

Both work on a ``(rows, groups, G)`` float32 view and return ``(s, v)``: the multipliers as float16
``(rows, groups)`` and the code values as float32 integers in ``[vmin, vmax]`` (the caller turns values into
bit patterns). Codes are always computed from the FP16-rounded multiplier, so the decoded error is the
error actually stored.

- ``absmax``: the multiplier maps the group's largest-magnitude element onto the extreme code on its side:
  ``s = amax / vmax`` (symmetric formats, ``s >= 0``), or, for q2 whose codes are ``-1..2``, the signed
  ``s = m / 2`` with ``m`` the element of largest magnitude (a negative ``m`` flips the code range).
  Codes are ``clip(rint(x / s), vmin, vmax)``.
- ``mse``: per group, try the multipliers ``f * s_base`` for a grid of factors ``f`` (for q2 from both the
  positive and the negative extreme), refit each by least squares for its codes
  (``s* = Σ x·v / Σ v²``), re-round the codes, and keep the candidate with the lowest squared error.
  The ``absmax`` result is one of the candidates, so ``mse`` is never worse per group.
"""

from __future__ import annotations

import numpy as np

FP16_MAX = np.float32(65504.0)


def to_fp16(s: np.ndarray) -> np.ndarray:
    """float32 → float16 with magnitudes clipped to the largest finite FP16 (multipliers stay finite),
    and ``-0.0`` turned into ``+0.0``."""
    return (np.clip(s, -FP16_MAX, FP16_MAX) + np.float32(0.0)).astype(np.float16)


def codes_for(x: np.ndarray, s: np.ndarray, vmin: int, vmax: int) -> np.ndarray:
    """``clip(rint(x / s), vmin, vmax)`` per group (``s`` float32 ``(rows, groups)``; 0 where ``s == 0``)."""
    with np.errstate(divide="ignore"):
        inv = np.where(s != 0, np.float32(1.0) / s, np.float32(0.0)).astype(np.float32)
    v = np.rint(x * inv[..., None])
    np.clip(v, vmin, vmax, out=v)
    return v


def absmax(x: np.ndarray, vmin: int, vmax: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    if signed:
        hi, lo = x.max(axis=-1), x.min(axis=-1)
        m = np.where(hi >= -lo, hi, lo)
    else:
        m = np.abs(x).max(axis=-1)
    s16 = to_fp16(m / np.float32(vmax))
    return s16, codes_for(x, s16.astype(np.float32), vmin, vmax)


def _sse(x: np.ndarray, v: np.ndarray, s: np.ndarray) -> np.ndarray:
    d = x - v * s[..., None]
    return np.einsum("rgk,rgk->rg", d, d)


def mse(x: np.ndarray, vmin: int, vmax: int, signed: bool, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    best_s, best_v = absmax(x, vmin, vmax, signed)
    best_e = _sse(x, best_v, best_s.astype(np.float32))
    if signed:
        bases = [np.maximum(x.max(axis=-1), 0) / np.float32(vmax), np.minimum(x.min(axis=-1), 0) / np.float32(vmax)]
    else:
        bases = [np.abs(x).max(axis=-1) / np.float32(vmax)]
    for base in bases:
        for f in factors:
            v = codes_for(x, to_fp16(base * np.float32(f)).astype(np.float32), vmin, vmax)
            num = np.einsum("rgk,rgk->rg", x, v)
            den = np.einsum("rgk,rgk->rg", v, v)
            with np.errstate(divide="ignore", invalid="ignore"):
                refit = np.where(den > 0, num / den, 0).astype(np.float32)
            if not signed:
                np.maximum(refit, 0, out=refit)
            s16 = to_fp16(refit)
            s32 = s16.astype(np.float32)
            v = codes_for(x, s32, vmin, vmax)
            e = _sse(x, v, s32)
            better = e < best_e
            best_e = np.where(better, e, best_e)
            best_s = np.where(better, s16, best_s)
            best_v = np.where(better[..., None], v, best_v)
    return best_s, best_v
