"""Compiled in-place Walsh–Hadamard butterfly for :func:`converters.mapping.transforms.fwht` (numba).

Each row of a float64 ``[rows, n]`` array (``n`` a power of two) goes through the ``log2 n`` stages of the
Sylvester order in place — pairs ``j``, ``j + h`` of every ``2h`` block become ``a + b``, ``a - b`` — while it
is in cache: the same operations in the same order on every element as the numpy stage-by-stage butterfly, so
the values are bit for bit the same, in one pass over the data instead of ``log2 n``.
"""

from __future__ import annotations

import numba


@numba.njit(nogil=True, cache=True)
def butterfly(y):
    """``y [rows, n]`` float64 ← ``y · H`` unnormalised, in place."""
    rows, n = y.shape
    for r in range(rows):
        h = 1
        while h < n:
            for start in range(0, n, 2 * h):
                for j in range(start, start + h):
                    a, b = y[r, j], y[r, j + h]
                    y[r, j] = a + b
                    y[r, j + h] = a - b
            h *= 2
