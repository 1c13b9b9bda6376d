"""The nvfp4 encoder stated in numpy (storage-layouts §3, docs/imatrix.md §Weighted search): the reference
the compiled kernels (``ninfer_core.codecs.nvfp4_kernel``) are compared with. It is the codec's numpy
encoder from before the kernels, kept here whole.

``error_sum`` chooses how a candidate's weighted error ``Σ (d·w)·d`` over a block's 16 elements is summed:
``"halving"`` (float32: ``t_j + t_{j+8}``, then ``+ t_{j+4}``, ``+ t_{j+2}``, ``+ t_{j+1}``: the kernel's
documented order) or ``"einsum"`` (numpy's ``einsum``: the order of the numpy encoder before the kernel, which
depends on numpy's SIMD code for the CPU).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ninfer_core.codecs.fp8_row import E4M3_MAX
from ninfer_core.codecs.nvfp4 import BLOCK_SCALE_FACTORS, E2M1_VALUES, NVFP4, swizzle

E2M1_MAX = np.float32(6.0)
F32_MAX = np.float32(np.finfo(np.float32).max)
#: midpoints between consecutive E2M1 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 and whether a tie rounds up (to
#: the even pattern above: the pattern below is odd)
E2M1_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))


def e2m1_codes(y: np.ndarray) -> np.ndarray:
    """E2M1 bit patterns of finite float32 ``y``: the number of midpoints ``|y|`` passes, ties to the even
    pattern, saturated at 6, the sign bit from ``signbit`` (``-0.0`` gives ``0x8``)."""
    a = np.abs(y)
    out = np.zeros(y.shape, dtype=np.uint8)
    for mid, tie_up in E2M1_MIDPOINTS:
        out += (np.greater_equal if tie_up else np.greater)(a, np.float32(mid)).astype(np.uint8)
    return out | (np.signbit(y).astype(np.uint8) << 3)


def divisors(x: np.ndarray, n_divisors: int = 1) -> np.ndarray:
    """``448·6 / amax`` per stacked matrix (1 for an all-zero one), at most the largest float32."""
    amax = np.abs(x.astype(np.float32)).reshape(n_divisors, -1).max(axis=1)
    with np.errstate(divide="ignore", over="ignore"):
        d = np.where(amax > 0, (E4M3_MAX * E2M1_MAX) / amax, np.float32(1.0)).astype(np.float32)
    return np.minimum(d, F32_MAX)


def _inverse(s32: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(s32 > 0, np.float32(1.0) / s32, np.float32(0.0)).astype(np.float32)


def block_errors(y: np.ndarray, s32: np.ndarray, w: np.ndarray, error_sum: str = "halving") -> np.ndarray:
    """``Σ (d·w)·d`` per block, ``d = y − s·e2m1(y/s)`` (y: (rows, blocks, 16); s32: (rows, blocks))."""
    q = np.take(E2M1_VALUES, e2m1_codes(y * _inverse(s32)[:, :, None]))
    d = y - q * s32[:, :, None]
    t = d * w
    if error_sum == "einsum":
        return np.einsum("rbk,rbk->rb", t, d)
    e = t * d
    for half in (8, 4, 2, 1):
        e = e[:, :, :half] + e[:, :, half : 2 * half]
    return e[:, :, 0]


def weighted_block_scales(y: np.ndarray, base: np.ndarray, s: np.ndarray, w: np.ndarray,
                          error_sum: str = "halving") -> np.ndarray:
    """Per block the E4M3 scale among ``s`` (absmax) then ``f × base`` for each factor below 1, in order,
    with the lowest weighted error; a candidate replaces the best only when strictly lower."""
    best = s.copy()
    best_e = block_errors(y, s.astype(np.float32), w, error_sum)
    for f in BLOCK_SCALE_FACTORS[:-1]:
        cand = np.minimum(base * f, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn)
        e = block_errors(y, cand.astype(np.float32), w, error_sum)
        better = e < best_e
        best_e = np.where(better, e, best_e)
        best = np.where(better, cand, best)
    return best


def encode(x: np.ndarray, n_divisors: int = 1, weights: np.ndarray | None = None,
           error_sum: str = "halving") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(bytes, block scales (N, K/16) uint8, decoded float32 (N, K))`` of ``x`` (N, K) as nvfp4."""
    x = np.asarray(x)
    n, k = x.shape
    geom = NVFP4.geometry((n, k), n_divisors)
    buf = np.zeros(geom.nbytes, dtype=np.uint8)
    views = NVFP4.plane_views(geom, buf)
    d = divisors(x, n_divisors)
    row_d = d[np.arange(n) // (n // n_divisors)][:, None, None]
    views["divisors"][...] = d.astype("<f4").view(np.uint8).reshape(-1, 4)
    y = x.astype(np.float32).reshape(n, k // 16, 16) * row_d
    base = np.abs(y).max(axis=-1) / E2M1_MAX
    s = np.minimum(base, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float32).reshape(-1, k // 16, 16)
        s = weighted_block_scales(y, base, s, w, error_sum)
    s32 = s.astype(np.float32)
    codes = e2m1_codes((y * _inverse(s32)[:, :, None]).reshape(n, k))
    views["codes"][...] = codes[:, 0::2] | (codes[:, 1::2] << 4)
    views["block_scales"][...] = swizzle(s.view(np.uint8), k)
    decoded = (np.take(E2M1_VALUES, codes).reshape(n, k // 16, 16) * s32[:, :, None] / row_d).reshape(n, k)
    return buf, s.view(np.uint8), decoded
