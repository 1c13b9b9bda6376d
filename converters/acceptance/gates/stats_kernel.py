"""Compiled per-row comparison of decoded (``g``) against source (``w``) values, for gates 4–5 (numba;
docs/acceptance.md §Golden at scale).

One pass over a float32 block ``[rows, K]``, no temporaries: per row ``Σw²``, ``Σg²``, ``Σg·w`` and
``Σ(g−w)²`` accumulated in float64 (each product of float32 values widened first, so every term is the one
numpy's float64 arithmetic gives; only the summation order differs from numpy's pairwise sums), and over the
block ``max |g − w|`` (NaN when a difference is NaN), ``max |w|``, the number of elements that differ (NaN
equal to NaN) and the flat index of the first. :class:`~converters.acceptance.gates.values.Stats` imports it on
its first block (numba's import costs about a third of a second); ``njit(nogil=True, cache=True)``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def row_stats(g, w, sums):
    """Fill ``sums [rows, 4]`` (``Σw²``, ``Σg²``, ``Σgw``, ``Σ(g−w)²`` per row); return ``(max_abs, max_want,
    differing, first)`` (``first`` = -1 when none differ)."""
    max_abs, max_want, nan = 0.0, 0.0, False
    differing, first = 0, -1
    rows, k = g.shape
    for r in range(rows):
        ww = gg = gw = dd = 0.0
        for j in range(k):
            a, b = np.float64(g[r, j]), np.float64(w[r, j])
            ww += b * b
            gg += a * a
            gw += a * b
            d = a - b
            dd += d * d
            if d != d:
                nan = True
            elif abs(d) > max_abs:
                max_abs = abs(d)
            if abs(b) > max_want:
                max_want = abs(b)
            if a != b and not (a != a and b != b):
                if first < 0:
                    first = r * k + j
                differing += 1
        sums[r, 0], sums[r, 1], sums[r, 2], sums[r, 3] = ww, gg, gw, dd
    return (np.nan if nan else max_abs), max_want, differing, first
