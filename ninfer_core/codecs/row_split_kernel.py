"""Compiled encode kernel of the row_split integer formats (numba; storage-layouts §1, docs/imatrix.md
§Requantization speed).

:mod:`ninfer_core.codecs.row_split` imports this module on its first encode only (numba's import costs about
a third of a second). Kernels are ``njit(nogil=True, cache=True)``: compiled once per machine into
``__pycache__`` and run by the codec's row-block thread pool in parallel. One kernel serves every format
(q2, q4, q5, q6, q8, t2): the group, code range and plane widths are arguments, so a process compiles (about
10 s, once per machine) or loads (about 0.4 s with numba's import) a single signature. Arithmetic is float32 throughout (every constant ``np.float32``) with no
``fastmath``, so each value is the one numpy's float32 operations give.

Per group of ``G`` elements of a row:

- **extremes**: the largest magnitude (an integer maximum of the sign-cleared bit patterns; a non-finite
  element stops the kernel, which returns its row-major index), and for q2 (signed multiplier, offset
  codes) the group's max and min through order-preserving integer keys; ``m`` is the element of largest
  magnitude, the positive one on a tie.
- **absmax**: ``s = fp16(m / vmax)`` (:func:`fp16_bits`: clipped to ±65504, ``-0.0`` → ``+0.0``, nearest
  even), ``inv = 1/s`` (0 for ``s = 0``), codes ``clip(rint(x * inv), vmin, vmax)`` — the float32 operations
  of the numpy statement in the same order, so the bytes and decoded values are bit-identical to it.
- **search** (``mse``, and any encode given importance weights; docs/imatrix.md §Weighted search): the
  candidate multipliers ``fp16(base * f)`` for every factor ``f``, ``base = m / vmax`` (q2: ``max(hi, 0)/vmax``
  then ``min(lo, 0)/vmax``), one lane each. One pass over the group's elements in order ``j = 0..G-1``
  accumulates, per lane, ``Σ (x_j·w_j)·v_j`` and ``Σ (v_j·w_j)·v_j`` in float32 — the lanes are independent
  (LLVM vectorises across them), each lane's sum has this fixed order. The lane of largest
  ``(Σwxv)² / Σwv²`` wins (strictly: the first of equal scores; a lane needs ``Σwv² > 0`` and, for the
  non-negative multipliers, ``Σwxv > 0``); its least-squares multiplier ``Σwxv / Σwv²`` (non-negative unless
  q2; those sums are the winning lane's own, the codes of its multiplier) is rounded to FP16, the codes made
  again, and kept where its error ``Σ (d_j·w_j)·d_j``, ``d_j = x_j − v_j·s``, summed in the same order, is
  below the absmax result's (summed in the candidates' pass). Unweighted ``mse`` runs with every weight 1,
  which changes no product. Sums in another order (numpy's einsum) may pick another candidate where two
  scores are within rounding of each other: the ``mse`` bytes are not the numpy statement's bit for bit.

Speed (each measured; see docs/imatrix.md §Requantization speed): the rows are taken two at a time and a
group's passes run over both rows' groups side by side, so that every float32 sum has an independent twin
(a lone chain of dependent additions through memory ran about twice as slow); the lane state has the
constant inner shape ``(4, LANES)`` and the block count is a constant per call, so LLVM addresses it
without aliasing checks; column indices are masked to 32 bits so that LLVM can drop numba's negative-index
wrap-around from the inner loops; helpers that take arrays are inlined by numba (a call passing arrays
costs an atomic reference count per array); and each packing loop reads its elements before storing.

Codes become patterns (two's complement, q2 ``value + 1``) packed LSB first into the ``low`` plane (and
the ``high`` plane for q5/q6), the FP16 bits go to the ``scale`` plane, and ``decoded`` (when given) gets
``code × multiplier`` in float32 for the first ``K`` columns.
"""

from __future__ import annotations

import numba
import numpy as np

FP16_MAX_BITS = 0x477FE000  # float32 bits of 65504, the largest finite FP16
_F16_MIN_NORMAL_BITS = 0x38800000  # float32 bits of 2**-14
_F16_SUBNORMAL_STEP = np.float32(2.0**-24)
_F16_STEPS = np.float32(2.0**24)
_NON_FINITE_BITS = 0x7F800000
_F0, _F1 = np.float32(0.0), np.float32(1.0)
LANES = 16  # candidate lanes per block (one AVX-512 or two AVX2 vectors of float32)


@numba.njit(nogil=True, cache=True, inline="always")
def fp16_bits(s):
    """FP16 bit pattern of float32 ``s`` as ``(clip(s, -65504, 65504) + 0.0).astype(float16)``: magnitudes
    above 65504 saturate, ``-0.0`` becomes ``+0.0`` (a negative value that rounds to zero stays ``-0``), round
    to nearest with ties to even, FP16 subnormals included. ``s`` must not be NaN. Branch-free (both paths,
    then a select), so that a loop over candidate lanes vectorises:

    - normal (``|s| >= 2**-14``): keep 10 of the 23 mantissa bits of the float32 pattern, rebias the exponent
      (127 → 15), and add one where the 13 dropped bits are above half or exactly half with the kept ones
      odd (a carry moves into the exponent, as it must);
    - subnormal: ``rint(|s| · 2**24)``, the count of ``2**-24`` steps — exact (a scaling by a power of two),
      and ``rint`` rounds half to even."""
    bits = np.float32(s).view(np.int32)
    sign = (bits >> 16) & np.int32(0x8000)
    mag = min(bits & np.int32(0x7FFFFFFF), np.int32(FP16_MAX_BITS))
    kept = (mag >> 13) - np.int32(112 << 10)
    rest = mag & np.int32(0x1FFF)
    up = (rest > np.int32(0x1000)) | ((rest == np.int32(0x1000)) & ((kept & np.int32(1)) == np.int32(1)))
    normal = kept + np.int32(up)
    steps = np.int32(np.rint(np.int32(mag).view(np.float32) * _F16_STEPS))
    h = normal if mag >= np.int32(_F16_MIN_NORMAL_BITS) else steps
    return np.uint16(h | sign) if mag != np.int32(0) else np.uint16(0)


@numba.njit(nogil=True, cache=True, inline="always")
def fp16_value(h):
    """float32 value of the finite FP16 bit pattern ``h`` (``astype(float32)``; ``0x8000`` gives ``-0.0``),
    branch-free like :func:`fp16_bits`."""
    h = np.int32(h)
    mag = h & np.int32(0x7FFF)
    normal = np.int32(((h & 0x8000) << 16) | ((mag + (112 << 10)) << 13)).view(np.float32)
    sub = np.float32(mag) * _F16_SUBNORMAL_STEP  # exact: an integer below 2**10 times a power of two
    sub = -sub if h & np.int32(0x8000) else sub
    return normal if mag >= np.int32(0x0400) else sub


@numba.njit(nogil=True, cache=True)
def fp16_bits_array(x):
    """:func:`fp16_bits` of every element of a 1-D float32 array (for tests)."""
    out = np.empty(x.size, np.uint16)
    for i in range(x.size):
        out[i] = fp16_bits(x[i])
    return out


@numba.njit(nogil=True, cache=True, inline="always")
def _inverse(s):
    return _F1 / s if s != _F0 else _F0


@numba.njit(nogil=True, cache=True, inline="always")
def _code(x, inv, lo, hi):
    """``clip(rint(x * inv), lo, hi)`` in float32 (``lo``/``hi`` float32; a ``-0.0`` stays)."""
    return min(max(np.rint(x * inv), lo), hi)


@numba.njit(nogil=True, cache=True, inline="always")
def _extremes(xi, r, c0, group, signed):
    """``(amax bits, max key, min key)`` of the group from its int32 bit patterns: the sign-cleared
    maximum, and for ``signed`` the extremes of the order-preserving keys (``b`` for ``b >= 0``, else
    ``b ^ 0x7FFFFFFF``)."""
    amax = np.int32(0)
    for j in range(group):
        amax = max(amax, xi[r, c0 + j] & np.int32(0x7FFFFFFF))
    top = np.int32(-2147483648)
    bottom = np.int32(2147483647)
    if signed:
        for j in range(group):
            b = xi[r, c0 + j]
            key = b if b >= 0 else b ^ np.int32(0x7FFFFFFF)
            top = max(top, key)
            bottom = min(bottom, key)
    return amax, top, bottom


@numba.njit(nogil=True, cache=True)
def _first_non_finite(xi, r0, rows):
    """Row-major index of the first non-finite element of rows ``r0``, ``r0 + 1`` (-1 if none)."""
    kp = xi.shape[1]
    for r in range(r0, min(r0 + 2, rows)):
        for j in range(kp):
            if (xi[r, j] & 0x7FFFFFFF) >= _NON_FINITE_BITS:
                return r * kp + j
    return -1


@numba.njit(nogil=True, cache=True, inline="always")
def _key_value(key):
    b = key if key >= 0 else key ^ np.int32(0x7FFFFFFF)
    return np.int32(b).view(np.float32)


@numba.njit(nogil=True, cache=True, inline="always")
def _start_lanes(lanes, p, bases, lane_base, lane_factor, n):
    """Lanes of group ``p`` of a pair: candidate multipliers ``fp16(base · f)``, lane ``i`` taking base
    ``lane_base[i]`` and factor ``lane_factor[i]`` (bases outer, factors inner), their inverses, zero sums;
    the lanes past the ``n`` candidates have factor 0 (multiplier 0, codes 0, zero sums) and are never
    scored. Whole blocks of :data:`LANES`, branch-free, so the loop vectorises."""
    b0, b1 = bases[p, 0], bases[p, 1]
    for b in range(lanes.shape[1]):
        for c in range(LANES):
            i = b * LANES + c
            cand = fp16_value(fp16_bits((b1 if lane_base[i] else b0) * lane_factor[i]))
            lanes[p, b, 0, c] = cand
            lanes[p, b, 1, c] = _inverse(cand)
            lanes[p, b, 2, c] = _F0
            lanes[p, b, 3, c] = _F0


@numba.njit(nogil=True, cache=True, inline="always")
def _search_pair(x, w, rows, wrows, c0, group, s, lo, hi, lanes, blocks):
    """One pass over the elements ``j = 0..G-1`` of the groups at column ``c0`` of two rows (``rows[p]``,
    weights row ``wrows[p]``), side by side so that each lane's sum is an independent chain: every lane adds
    ``(x·w)·v`` and ``(v·w)·v`` for its codes ``v``, in element order. Returns the two groups' absmax errors
    ``Σ (d·w)·d`` (multipliers ``s[p]``), summed in the same pass and order."""
    ra, rb, ca, cb = rows[0], rows[1], c0, c0
    wa, wb = wrows[0], wrows[1]
    sa, sb = s[0], s[1]
    inva, invb = _inverse(sa), _inverse(sb)
    ea = _F0
    eb = _F0
    for j in range(group):
        xa, xb = x[ra, ca + j], x[rb, cb + j]
        va, vb = w[wa, ca + j], w[wb, cb + j]
        xva, xvb = xa * va, xb * vb
        da = xa - _code(xa, inva, lo, hi) * sa
        ea += (da * va) * da
        db = xb - _code(xb, invb, lo, hi) * sb
        eb += (db * vb) * db
        for b in range(blocks):
            for c in range(LANES):
                v = _code(xa, lanes[0, b, 1, c], lo, hi)
                lanes[0, b, 2, c] += xva * v
                lanes[0, b, 3, c] += (v * va) * v
                u = _code(xb, lanes[1, b, 1, c], lo, hi)
                lanes[1, b, 2, c] += xvb * u
                lanes[1, b, 3, c] += (u * vb) * u
    return ea, eb


@numba.njit(nogil=True, cache=True, inline="always")
def _best(lanes, p, n, signed):
    """``(Σwxv, Σwv²)`` of group ``p``'s lane of largest ``(Σwxv)²/Σwv²`` (the first of equal scores; a lane
    needs ``Σwv² > 0`` and, unless ``signed``, ``Σwxv > 0``), ``(0, 0)`` when no lane scores."""
    best = np.float32(-np.inf)
    num = _F0
    den = _F0
    for i in range(n):
        b, c = i // LANES, i % LANES
        sx, sv = lanes[p, b, 2, c], lanes[p, b, 3, c]
        score = _F0
        if sv > _F0 and (signed or sx > _F0):
            score = sx * sx / sv
        if score > best:
            best = score
            num, den = (sx, sv) if sv > _F0 and (signed or sx > _F0) else (_F0, _F0)
    return num, den


@numba.njit(nogil=True, cache=True, inline="always")
def _write_codes(x, r, c0, group, s, inv, lo, hi, offset, low_bits, high_bits, low, high, out, ro):
    """The packing loops of :func:`_write`, a byte at a time; ``out[ro, j]`` ← code × ``s``."""
    if low_bits == 8:
        for j in range(group):
            v = _code(x[r, c0 + j], inv, lo, hi)
            out[ro, c0 + j] = v * s
            low[r, c0 + j] = np.uint8((np.int32(v) + offset) & 0xFF)
    elif low_bits == 4:
        for j in range(group // 2):
            c = c0 + 2 * j
            v0 = _code(x[r, c], inv, lo, hi)
            v1 = _code(x[r, c + 1], inv, lo, hi)
            out[ro, c] = v0 * s
            out[ro, c + 1] = v1 * s
            low[r, c0 // 2 + j] = np.uint8(((np.int32(v0) + offset) & 0xF) | (((np.int32(v1) + offset) & 0xF) << 4))
    else:
        for j in range(group // 4):
            c = c0 + 4 * j
            v0 = _code(x[r, c], inv, lo, hi)
            v1 = _code(x[r, c + 1], inv, lo, hi)
            v2 = _code(x[r, c + 2], inv, lo, hi)
            v3 = _code(x[r, c + 3], inv, lo, hi)
            out[ro, c] = v0 * s
            out[ro, c + 1] = v1 * s
            out[ro, c + 2] = v2 * s
            out[ro, c + 3] = v3 * s
            low[r, c0 // 4 + j] = np.uint8(((np.int32(v0) + offset) & 3) | (((np.int32(v1) + offset) & 3) << 2)
                                           | (((np.int32(v2) + offset) & 3) << 4) | (((np.int32(v3) + offset) & 3) << 6))
    if high_bits == 1:  # bit 4 of the patterns, 8 per byte
        for j in range(group // 8):
            acc = np.int32(0)
            for i in range(8):
                acc |= ((np.int32(_code(x[r, c0 + 8 * j + i], inv, lo, hi)) >> 4) & 1) << i
            high[r, c0 // 8 + j] = np.uint8(acc)
    elif high_bits == 2:  # bits 4..5, 4 per byte
        for j in range(group // 4):
            acc = np.int32(0)
            for i in range(4):
                acc |= ((np.int32(_code(x[r, c0 + 4 * j + i], inv, lo, hi)) >> 4) & 3) << (2 * i)
            high[r, c0 // 4 + j] = np.uint8(acc)


@numba.njit(nogil=True, cache=True, inline="always")
def _write(x, r, c0, group, s, lo, hi, offset, low_bits, high_bits, low, high, dec, kd, spare):
    """Codes of the group at column ``c0`` of row ``r`` for multiplier ``s``, packed into row ``r`` of ``low``
    (and ``high``) a byte at a time (patterns: two's complement, q2 value + 1); ``dec`` ← code × ``s`` for the
    columns below ``kd`` (0: none asked for). The decoded values go straight to ``dec`` when the whole group
    is wanted, else to the row ``spare`` (an unconditional store keeps the loops vectorisable) and the
    wanted part is copied. Each step reads its elements before it stores anything, so that LLVM need not
    reload them after a store that might alias."""
    inv = _inverse(s)
    whole = c0 + group <= kd
    out = dec if whole else spare
    ro = r if whole else 0
    _write_codes(x, r, c0, group, s, inv, lo, hi, offset, low_bits, high_bits, low, high, out, ro)
    if not whole:
        for j in range(c0, min(c0 + group, kd)):
            dec[r, j] = spare[0, j]


@numba.njit(nogil=True, cache=True, inline="always")
def _error_pair(x, w, rows, wrows, c0, group, s, lo, hi):
    """``Σ (d·w)·d`` of the groups at column ``c0`` of rows ``rows[0]``, ``rows[1]`` for multipliers ``s[p]``
    (``d = x − v·s``, ``v`` the codes for ``s``), each summed in element order, side by side."""
    ra, rb, wa, wb = rows[0], rows[1], wrows[0], wrows[1]
    sa, sb = s[0], s[1]
    inva, invb = _inverse(sa), _inverse(sb)
    ea = _F0
    eb = _F0
    for j in range(c0, c0 + group):
        da = x[ra, j] - _code(x[ra, j], inva, lo, hi) * sa
        ea += (da * w[wa, j]) * da
        db = x[rb, j] - _code(x[rb, j], invb, lo, hi) * sb
        eb += (db * w[wb, j]) * db
    return ea, eb


@numba.njit(nogil=True, cache=True)
def encode_rows(x, w, search, factors, group, vmin, search_vmin, vmax, signed, low_bits, high_bits,
                low, high, scale, decoded, k):
    """Encode the float32 rows ``x`` ``(rows, Kp)`` (padding columns zero) into the plane rows ``low``,
    ``high`` (``(0, 0)`` when the format has none), ``scale`` (uint16 FP16 bits, ``(rows, Kp / G)``) and,
    unless it is ``(0, 0)``, ``decoded`` ``(rows, k)``. ``search``: the candidate search with the weights
    ``w`` (``(1, Kp)`` or ``(rows, Kp)``, padding weighted 0; all ones for unweighted ``mse``), else absmax
    with codes ``vmin..vmax``. ``signed``: the q2 rules (signed multiplier, codes offset by one). Rows are
    taken two at a time (the last one alone), group by group. Returns the row-major index of the first
    non-finite element of ``x``, or -1."""
    rows, kp = x.shape
    xi = x.view(np.int32)
    kd = k if decoded.shape[0] > 0 else 0
    # index bases masked to 16 / 32 bits: LLVM then knows every column index is non-negative and drops
    # numba's negative-index wrap-around from the inner loops (which otherwise ran up to 7× slower)
    group &= 0xFFFF
    groups = kp // group
    vmaxf = np.float32(vmax)
    hi = np.float32(vmax)
    lo = np.float32(search_vmin if search else vmin)
    offset = 1 if signed else 0
    n_bases = 2 if signed else 1
    lanes = np.zeros((2, -(-n_bases * factors.size // LANES), 4, LANES), np.float32)
    if lanes.shape[1] > 2:
        raise ValueError("more than 32 candidate multipliers")
    lane_base = np.zeros(lanes.shape[1] * LANES, np.int64)
    lane_factor = np.zeros(lanes.shape[1] * LANES, np.float32)
    for i in range(n_bases * factors.size):
        lane_base[i], lane_factor[i] = i // factors.size, factors[i % factors.size]
    bases = np.zeros((2, 2), np.float32)
    prow = np.zeros(2, np.int64)
    pw = np.zeros(2, np.int64)
    ph = np.zeros(2, np.uint16)
    ps = np.zeros(2, np.float32)
    fh = np.zeros(2, np.uint16)
    spare = np.zeros((1, kp), np.float32)
    fs = np.zeros(2, np.float32)
    for r0 in range(0, rows, 2):
        for g in range(groups):
            c0 = (g * group) & 0xFFFFFFFF
            for p in range(2):
                r = min(r0 + p, rows - 1)
                amax, top, bottom = _extremes(xi, r, c0, group, signed)
                if amax >= _NON_FINITE_BITS:
                    return _first_non_finite(xi, r0, rows)
                gmax = _key_value(top)
                gmin = _key_value(bottom)
                m = (gmax if gmax >= -gmin else gmin) if signed else np.int32(amax).view(np.float32)
                ph[p] = fp16_bits(m / vmaxf)
                ps[p] = fp16_value(ph[p])
                prow[p], pw[p] = r, r if w.shape[0] > 1 else 0
                if search:
                    bases[p, 0] = max(gmax, _F0) / vmaxf if signed else m / vmaxf
                    bases[p, 1] = min(gmin, _F0) / vmaxf
                    _start_lanes(lanes, p, bases, lane_base, lane_factor, n_bases * factors.size)
            if search:
                if lanes.shape[1] == 1:  # a constant block count: LLVM unrolls the blocks (a runtime one ran 5× slower)
                    e_abs = _search_pair(x, w, prow, pw, c0, group, ps, lo, hi, lanes, 1)
                else:
                    e_abs = _search_pair(x, w, prow, pw, c0, group, ps, lo, hi, lanes, 2)
                for p in range(2):
                    # the best lane's sums are its codes' Σwxv and Σwv²: the least-squares refit needs no new pass
                    n, d = _best(lanes, p, n_bases * factors.size, signed)
                    refit = n / d if d > _F0 else _F0
                    fh[p] = fp16_bits(refit if signed else max(refit, _F0))
                    fs[p] = fp16_value(fh[p])
                e_fit = _error_pair(x, w, prow, pw, c0, group, fs, lo, hi)
                for p in range(2):
                    if e_fit[p] < e_abs[p]:
                        ph[p], ps[p] = fh[p], fs[p]
            for p in range(min(2, rows - r0)):
                scale[r0 + p, g] = ph[p]
                _write(x, r0 + p, c0, group, ps[p], lo, hi, offset, low_bits, high_bits, low,
                       high if high_bits else low, decoded, kd, spare)
    return -1

