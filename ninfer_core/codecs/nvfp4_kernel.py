"""Compiled nvfp4 encode kernels (numba; storage-layouts §3, docs/imatrix.md §Requantization speed).

:mod:`ninfer_core.codecs.nvfp4` imports this module on its first encode only (numba's import costs about a
third of a second). Every kernel is ``njit(nogil=True, cache=True)``: compiled once per machine into
``__pycache__``, and run by the codec's row-block thread pool in parallel. Arithmetic is float32 throughout
(every constant ``np.float32``), with no ``fastmath``, so each value is the one numpy's float32 operations
give; sums run in one fixed order (below), so the results are the same on every CPU.

Per row, ``y = x * divisor``; per 16-element block of it: the block amax; the block scale
``s = e4m3fn(min(amax / 6, 448))``; with importance weights the weighted search (docs/imatrix.md §Weighted
search) over ``s`` and ``e4m3fn(min(amax / 6 * f, 448))`` for each factor ``f``, in that order, each scored
by ``Σ_j t_j``, ``t_j = (d_j·w_j)·d_j``, ``d_j = y_j − s·e2m1(y_j / s)``, summed in float32 by halving
(``t_j + t_{j+8}`` for ``j < 8``, then ``+ …_{j+4}`` for ``j < 4``, ``+ …_{j+2}``, ``+ …_{j+1}``), a candidate
replacing the best only when its error is strictly lower; then ``inv = 1/s`` (0 for ``s = 0``), the E2M1
code of ``y * inv`` (nearest, ties to the even pattern, saturated at ±6, sign from the sign bit: ``-0.0``
gives ``0x8``), two codes per byte (even column in the low nibble), the scale byte straight into its 128×4
tile, and the decoded value ``e2m1 · s / divisor``. Loops over a block's 16 elements are written so that
LLVM vectorises them (integer max trees, selects instead of table look-ups); the candidates' sums are the
one place where the order matters, and it is the one above.
"""

from __future__ import annotations

import numba
import numpy as np

_F0, _F1, _F6 = np.float32(0.0), np.float32(1.0), np.float32(6.0)
_E4M3_MAX = np.float32(448.0)
_SUBNORMAL_STEPS = np.float32(512.0)  # 2**9: E4M3 subnormals are multiples of 2**-9
_SUBNORMAL_STEP = np.float32(1.0 / 512.0)
_ROUND_TO_INTEGER = np.float32(8388608.0)  # 2**23: (a + 2**23) - 2**23 rounds 0 <= a < 2**22 to nearest even
_MIN_NORMAL_BITS = 0x3C800000  # float32 bits of 2**-6, the smallest normal E4M3 magnitude
_NON_FINITE_BITS = 0x7F800000
#: E2M1 magnitude midpoints (0.25 0.75 1.25 1.75 2.5 3.5 5): a tie rounds up where the pattern above is even
_M1, _M2, _M3, _M4 = np.float32(0.25), np.float32(0.75), np.float32(1.25), np.float32(1.75)
_M5, _M6, _M7 = np.float32(2.5), np.float32(3.5), np.float32(5.0)
_Q = tuple(np.float32(v) for v in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0))
TILE_ROWS = 128


@numba.njit(nogil=True, cache=True)
def e4m3fn_round(v):
    """``(bit pattern, value)`` of a float32 ``0 <= v <= 448`` rounded to E4M3FN: nearest, ties to even,
    subnormals included — ml_dtypes' ``float8_e4m3fn`` cast on that range. Branch-free (vectorises)."""
    mag = np.float32(v).view(np.uint32)  # normal range: drop 20 of the 23 mantissa bits, ties to even (a carry
    # bumps the exponent), code = the kept bits with the exponent bias 127 → 7; below 2**-6, steps of 2**-9
    rounded = np.uint32((mag + np.uint32(0x7FFFF) + ((mag >> np.uint32(20)) & np.uint32(1))) & np.uint32(0xFFF00000))
    steps = (v * _SUBNORMAL_STEPS + _ROUND_TO_INTEGER) - _ROUND_TO_INTEGER  # subnormal range: multiples of 2**-9
    normal = mag >= np.uint32(_MIN_NORMAL_BITS)
    code = (rounded >> np.uint32(20)) - np.uint32(120 << 3) if normal else np.uint32(steps)
    value = rounded.view(np.float32) if normal else steps * _SUBNORMAL_STEP
    return code, value


@numba.njit(nogil=True, cache=True)
def _e2m1_magnitude(a):
    """The E2M1 magnitude a non-negative float32 rounds to: the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6, a
    tie to the even pattern (midpoints 0.75, 1.75, 3.5 round up, 0.25, 1.25, 2.5, 5 down), 6 beyond."""
    q = _Q[0]
    q = _Q[1] if a > _M1 else q
    q = _Q[2] if a >= _M2 else q
    q = _Q[3] if a > _M3 else q
    q = _Q[4] if a >= _M4 else q
    q = _Q[5] if a > _M5 else q
    q = _Q[6] if a >= _M6 else q
    return _Q[7] if a > _M7 else q


@numba.njit(nogil=True, cache=True)
def _weighted_scale(y, w, base, factors, cand, scale, inv, terms):
    """Index of the lowest ``Σ (d·w)·d`` among the candidates ``e4m3fn(min(base·factors[i], 448))``
    (``factors[0] = 1``: the absmax scale), the first one on a tie; fills cand/scale/inv for each."""
    n = factors.shape[0]
    for lane in range(n):  # each candidate a lane
        c, s = e4m3fn_round(min(base * factors[lane], _E4M3_MAX))
        cand[lane] = c
        scale[lane] = s
        inv[lane] = _F1 / s if s > _F0 else _F0
    for lane in range(n):  # vectorised across the 16 elements
        s, s_inv = scale[lane], inv[lane]
        for j in range(16):
            a = abs(y[j])  # d = |y| − q·s: the same square as y − sign(y)·q·s
            d = a - _e2m1_magnitude(a * s_inv) * s
            terms[lane, j] = (d * w[j]) * d
    best, best_err = 0, _F0
    for lane in range(n):  # the fixed order: j + 8, then j + 4, j + 2, j + 1 (halving)
        t = terms[lane]
        for j in range(8):
            t[j] = t[j] + t[j + 8]
        for j in range(4):
            t[j] = t[j] + t[j + 4]
        for j in range(2):
            t[j] = t[j] + t[j + 2]
        e = t[0] + t[1]
        if lane == 0 or e < best_err:
            best, best_err = lane, e
    return best


@numba.njit(nogil=True, cache=True)
def encode_rows(x, row_divisor, weights, factors, codes, tiles, decoded):
    """Encode the rows of one row block (a multiple of 128 rows, starting on a tile row).

    x: float32 (rows, K); row_divisor: float32 (rows,); weights: float32 (0, 0) for absmax, else (1, K) or
    (rows, K); factors: float32, the weighted search's candidates in order, 1 (the absmax scale) first;
    codes: uint8 (rows, K/2); tiles: uint8 (rows/128, K/64*512), the block's scale tiles; decoded: float32
    (rows, K), or (0, 0) for none."""
    rows, k = x.shape
    nb = k // 16
    weighted, per_row_weights, want_decoded = weights.shape[0] > 0, weights.shape[0] > 1, decoded.shape[0] > 0
    y = np.empty(k, np.float32)
    y_bits = y.view(np.uint32)
    m16 = np.empty(16, np.uint32)
    c_row = np.empty(k, np.uint8)
    amax_row = np.empty(nb, np.uint32)
    sc_row, s_row, inv_row = np.empty(nb, np.uint32), np.empty(nb, np.float32), np.empty(nb, np.float32)
    n = factors.shape[0]
    cand, scale, inv = np.empty(n, np.uint32), np.empty(n, np.float32), np.empty(n, np.float32)
    terms = np.empty((n, 16), np.float32)
    for r in range(rows):
        d = row_divisor[r]
        tile, rr = r // TILE_ROWS, r % TILE_ROWS
        for j in range(k):
            y[j] = x[r, j] * d
        for b in range(nb):  # block amax: the largest sign-cleared bit pattern (a max tree of integers)
            for j in range(16):
                m16[j] = y_bits[16 * b + j] & np.uint32(0x7FFFFFFF)
            for j in range(8):
                m16[j] = max(m16[j], m16[j + 8])
            for j in range(4):
                m16[j] = max(m16[j], m16[j + 4])
            amax_row[b] = max(max(m16[0], m16[2]), max(m16[1], m16[3]))
        for b in range(nb):  # absmax scales, vectorised across blocks
            base = np.uint32(amax_row[b]).view(np.float32) / _F6
            c, s = e4m3fn_round(min(base, _E4M3_MAX))
            sc_row[b] = c
            s_row[b] = s
            inv_row[b] = _F1 / s if s > _F0 else _F0
        if weighted:
            w = weights[r if per_row_weights else 0]
            for b in range(nb):
                c0 = 16 * b
                base = np.uint32(amax_row[b]).view(np.float32) / _F6
                best = _weighted_scale(y[c0:c0 + 16], w[c0:c0 + 16], base, factors, cand, scale, inv, terms)
                if best:
                    sc_row[b], s_row[b], inv_row[b] = cand[best], scale[best], inv[best]
        for b in range(nb):
            tiles[tile, (b // 4) * 512 + (rr % 32) * 16 + (rr // 32) * 4 + b % 4] = sc_row[b]
        for b in range(nb):  # codes (and decoded values), vectorised across the block's 16 elements
            c0, s, s_inv = 16 * b, s_row[b], inv_row[b]
            for j in range(16):
                v = y[c0 + j] * s_inv
                a = abs(v)
                sign = np.uint32(np.float32(v).view(np.uint32) & np.uint32(0x80000000))
                count = (np.int32(a > _M1) + np.int32(a >= _M2) + np.int32(a > _M3) + np.int32(a >= _M4)
                         + np.int32(a > _M5) + np.int32(a >= _M6) + np.int32(a > _M7))
                c_row[c0 + j] = np.uint8(count | (sign >> np.uint32(28)))
                if want_decoded:  # e2m1 value (sign from v's sign bit: -0.0 for 0x8) × s / divisor
                    q = np.uint32(np.float32(_e2m1_magnitude(a)).view(np.uint32) | sign).view(np.float32)
                    decoded[r, c0 + j] = q * s / d
        for i in range(k // 2):
            codes[r, i] = c_row[2 * i] | (c_row[2 * i + 1] << np.uint8(4))


@numba.njit(nogil=True, cache=True)
def row_amax(x, out):
    """Largest magnitude per row of float32 ``x`` (rows, K) into float32 ``out``; returns the flat index
    (row-major) of the first NaN or infinity, or -1. Reduces the sign-cleared bit patterns as integers
    (the order of the magnitudes; vectorises without reassociating any float sum)."""
    bits = x.view(np.uint32)
    out_bits = out.view(np.uint32)
    rows, k = bits.shape
    for r in range(rows):
        m = np.uint32(0)
        for j in range(k):
            m = max(m, bits[r, j] & np.uint32(0x7FFFFFFF))
        if m >= _NON_FINITE_BITS:
            for j in range(k):
                if bits[r, j] & np.uint32(0x7FFFFFFF) >= _NON_FINITE_BITS:
                    return r * k + j
        out_bits[r] = m
    return -1
