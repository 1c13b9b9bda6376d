"""Group maxima for the block encoders: :func:`group_amax`, the largest magnitude per group.

The row_split integer encoders (``absmax``, ``mse`` and the importance-weighted search) are compiled kernels in
:mod:`ninfer_core.codecs.row_split_kernel` (docs/imatrix.md §Weighted search, §Requantization speed); their
numpy statement is kept with the tests (tests/support/row_split_reference.py).
"""

from __future__ import annotations

import numpy as np

from .base import scratch


def group_amax(x: np.ndarray) -> np.ndarray:
    """Largest magnitude per group of a float32 ``(rows, groups, G)`` array. Reduces the sign-cleared bit
    patterns as int32 (same order as the magnitudes, NaN above infinity), which numpy does about twice
    as fast as a float max."""
    bits = np.bitwise_and(x.view(np.int32), np.int32(0x7FFFFFFF), out=scratch("amax", x.shape, np.int32))
    return bits.max(axis=-1).view(np.float32)
