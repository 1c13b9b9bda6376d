"""Compiled Hadamard un-rotation for the gates' artifact side (numba; storage-layouts §7, docs/acceptance.md
§Golden at scale).

``W = W' · H · D`` per 1024-column block: each block of each row is loaded once into a float64 buffer, put
through the 10 butterfly stages of the Sylvester order in place (pairs ``j``, ``j + h`` of every ``2h`` block
become ``a + b``, ``a - b``), divided by ``sqrt(1024) = 32`` and multiplied by the signs — the same operations,
in the same order, on every element as the numpy butterfly, so the values are bit for bit the same; one pass
over the data instead of ten, and no temporaries. Written apart from the converter's rotation
(:func:`converters.mapping.transforms.fwht`) so that the converter's own code is not what checks it.
"""

from __future__ import annotations

import numba
import numpy as np

BLOCK = 1024


@numba.njit(nogil=True, cache=True)
def unrotate(stored, signs, out):
    """``out [rows, K]`` (float32) = ``stored [rows, K]`` un-rotated with ``signs [K]`` (float64)."""
    rows, k = stored.shape
    y = np.empty(BLOCK, dtype=np.float64)
    for r in range(rows):
        for b0 in range(0, k, BLOCK):
            for j in range(BLOCK):
                y[j] = np.float64(stored[r, b0 + j])
            h = 1
            while h < BLOCK:
                for start in range(0, BLOCK, 2 * h):
                    for j in range(start, start + h):
                        a, c = y[j], y[j + h]
                        y[j] = a + c
                        y[j + h] = a - c
                h *= 2
            for j in range(BLOCK):
                out[r, b0 + j] = np.float32(y[j] / 32.0 * signs[b0 + j])
