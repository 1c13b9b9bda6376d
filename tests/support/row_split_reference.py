"""The numpy statement of the row_split integer encoders (storage-layouts §1, docs/imatrix.md §Weighted search),
kept as the independent reference the compiled kernel (ninfer_core/codecs/row_split_kernel.py) is tested
against. Whole-array float32 operations, in the order the rules state them:

- ``absmax``: ``s = fp16(m / vmax)`` with ``m`` the group's largest magnitude (q2: the element of largest
  magnitude, signed, the positive one on a tie), codes ``clip(rint(x * (1/s)), vmin, vmax)`` (0 where s = 0).
- ``mse``: every candidate ``fp16(base · f)`` codes the group and is scored by ``(Σwxv)² / Σwv²``; the best is
  refit once (``s* = Σwxv / Σwv²``, FP16, codes again) and kept where its ``Σ w (x − s v)²`` is below absmax's.

``fp16`` is ``(clip(s, ±65504) + 0.0).astype(float16)``. Sums here are numpy's (einsum), whose order is not
the kernel's, so ``mse`` results may differ from the kernel's in near-ties; ``absmax`` has no sum and must
match bit for bit.
"""

from __future__ import annotations

import numpy as np

from ninfer_core import codecs

FP16_MAX = np.float32(65504.0)
RS = "row_split_k128_v1"


def to_fp16(s: np.ndarray) -> np.ndarray:
    return (np.clip(s, -FP16_MAX, FP16_MAX) + np.float32(0.0)).astype(np.float16)


def _inverse(s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(s != 0, np.float32(1.0) / s, np.float32(0.0)).astype(np.float32)


def codes_for(x: np.ndarray, s: np.ndarray, vmin: int, vmax: int) -> np.ndarray:
    return np.clip(np.rint(x * _inverse(s)[..., None]), vmin, vmax)


def extremes(x: np.ndarray, signed: bool):
    if not signed:
        return np.abs(x).max(axis=-1), None, None
    hi, lo = x.max(axis=-1), x.min(axis=-1)
    return np.where(hi >= -lo, hi, lo), hi, lo


def absmax(x, m, vmin, vmax):
    s16 = to_fp16(m / np.float32(vmax))
    return s16, codes_for(x, s16.astype(np.float32), vmin, vmax)


def _sse(x, v, s, w):
    d = x - v * s[..., None]
    return np.einsum("rgk,rgk->rg", d * w, d)


def _products(x, w, v):
    return np.einsum("rgk,rgk->rg", x * w, v), np.einsum("rgk,rgk->rg", v * w, v)


def mse(x, m, hi, lo, vmin, vmax, signed, factors, w):
    best_s, best_v = absmax(x, m, vmin, vmax)
    best_e = _sse(x, best_v, best_s.astype(np.float32), w)
    if signed:
        bases = [np.maximum(hi, 0) / np.float32(vmax), np.minimum(lo, 0) / np.float32(vmax)]
    else:
        bases = [m / np.float32(vmax)]
    score = np.full(m.shape, -np.inf, dtype=np.float32)
    chosen = np.zeros(m.shape, dtype=np.float32)
    for base in bases:
        for f in factors:
            cand = to_fp16(base * np.float32(f)).astype(np.float32)
            num, den = _products(x, w, codes_for(x, cand, vmin, vmax))
            with np.errstate(divide="ignore", invalid="ignore"):
                sc = np.where((den > 0) & (signed | (num > 0)), num * num / den, np.float32(0))
            better = sc > score
            score = np.where(better, sc, score)
            chosen = np.where(better, cand, chosen)
    num, den = _products(x, w, codes_for(x, chosen, vmin, vmax))
    with np.errstate(divide="ignore", invalid="ignore"):
        refit = np.where(den > 0, num / den, 0).astype(np.float32)
    if not signed:
        refit = np.maximum(refit, np.float32(0))
    s16 = to_fp16(refit)
    v = codes_for(x, s16.astype(np.float32), vmin, vmax)
    better = _sse(x, v, s16.astype(np.float32), w) < best_e
    return np.where(better, s16, best_s), np.where(better[..., None], v, best_v)


def _pack(fields: np.ndarray, width: int) -> np.ndarray:
    """``(rows, n)`` uint8 fields → ``(rows, n * width / 8)`` bytes, lowest bits first."""
    per = 8 // width
    f = (fields.astype(np.uint16) & ((1 << width) - 1)).reshape(fields.shape[0], -1, per)
    return (f << (np.arange(per, dtype=np.uint16) * width)).sum(axis=-1).astype(np.uint8)


def encode(fmt: str, x: np.ndarray, encoder: str = "absmax", weights: np.ndarray | None = None):
    """``(bytes, decoded)`` of float32 ``x`` ``[N, K]`` as the numpy statement encodes it."""
    c = codecs.FORMATS[fmt]
    n, k = x.shape
    kp = -(-k // 128) * 128
    xb = np.zeros((n, kp), np.float32)
    xb[:, :k] = x
    x3 = xb.reshape(n, kp // c.group, c.group)
    signed = c.offset_codes
    m, hi, lo = extremes(x3, signed)
    if weights is None and encoder == "absmax":
        s16, v = absmax(x3, m, c.vmin, c.vmax)
    else:
        w = np.ones((1, kp), np.float32) if weights is None else np.zeros((weights.reshape(-1, k).shape[0], kp),
                                                                             np.float32)
        if weights is not None:
            w[:, :k] = weights.reshape(-1, k)
        s16, v = mse(x3, m, hi, lo, c.search_vmin(), c.vmax, signed, c.mse_factors, w.reshape(w.shape[0], -1, c.group))
    decoded = (v * s16.astype(np.float32)[..., None]).reshape(n, kp)[:, :k]
    p = (v.reshape(n, kp).astype(np.int16) + (1 if signed else 0)).astype(np.uint8)
    planes = {"low": _pack(p, c.low_bits) if c.low_bits < 8 else p, "scale": s16.view(np.uint8).reshape(n, -1)}
    if c.high_bits:
        planes["high"] = _pack(p >> c.low_bits, c.high_bits)
    out = np.zeros(codecs.encoded_size(fmt, RS, x.shape), np.uint8)
    for plane in codecs.planes(fmt, RS, x.shape):
        out[plane.offset:plane.offset + plane.size] = planes[plane.name].reshape(-1)
    return out.tobytes(), decoded
