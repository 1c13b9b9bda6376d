"""The measured error's statistics (``produce.ErrorStats``): one pass over a block, row chunk by row chunk
(docs/imatrix.md §Requantization speed), records exactly what the three whole-block products recorded —
provenance pins these numbers (tests/regress)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from converters.pipeline.produce import STATS_CHUNK_ROWS, STATS_ROW, ErrorStats


def _whole_block(ref: np.ndarray, got: np.ndarray) -> tuple[float, float, float, float, int]:
    """The statistics as three whole-block products over zero-padded rows of STATS_ROW (the definition)."""
    dt = np.float64 if ref.dtype == np.float64 else np.float32
    r, g = ref.astype(dt).reshape(-1), got.astype(dt).reshape(-1)
    pad = -r.size % STATS_ROW
    r2, g2 = np.pad(r, (0, pad)).reshape(-1, STATS_ROW), np.pad(g, (0, pad)).reshape(-1, STATS_ROW)
    return (float(np.einsum("ij,ij->i", r2, g2).sum(dtype=np.float64)),
            float(np.einsum("ij,ij->i", r2, r2).sum(dtype=np.float64)),
            float(np.einsum("ij,ij->i", g2, g2).sum(dtype=np.float64)),
            float(np.max(np.abs(r - g))), r.size)


@pytest.mark.parametrize("n", [1, 100, STATS_ROW, STATS_ROW * 3 + 17, STATS_ROW * (STATS_CHUNK_ROWS + 5),
                               STATS_ROW * STATS_CHUNK_ROWS * 2 + 4095])
@pytest.mark.parametrize("wide", [False, True])
def test_fused_pass_records_what_the_whole_block_products_record(n, wide):
    rng = np.random.default_rng(n)
    ref = rng.standard_normal(n) * 0.05
    ref = ref if wide else ref.astype(np.float32)
    got = (ref + rng.standard_normal(n) * 1e-3).astype(np.float32)
    s = ErrorStats()
    s.add(ref, got)
    assert (s.sxy, s.sxx, s.syy, s.max_abs, s.elements) == _whole_block(ref, got)


def test_blocks_accumulate_and_match_float64():
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((300, 1000)).astype(np.float32)
    got = (ref + rng.standard_normal(ref.shape).astype(np.float32) * np.float32(0.01)).astype(np.float32)
    s = ErrorStats()
    for a in range(0, 300, 70):
        s.add(ref[a:a + 70], got[a:a + 70])
    r, g = ref.astype(np.float64), got.astype(np.float64)
    assert s.elements == ref.size
    assert s.max_abs == float(np.abs(r - g).max())
    assert math.isclose(s.sxy, float((r * g).sum()), rel_tol=1e-6)
    assert math.isclose(s.cosine, float((r * g).sum() / np.sqrt((r * r).sum() * (g * g).sum())), rel_tol=1e-6)
    assert math.isclose(s.to_json()["rms"], float(np.sqrt(((r - g) ** 2).mean())), rel_tol=1e-3)


def test_exact_copy_and_empty_block():
    x = np.linspace(-1, 1, 5000, dtype=np.float32)
    s = ErrorStats()
    s.add(x[:0], x[:0])
    s.add(x, x.copy())
    assert s.exact and s.cosine == 1.0 and s.elements == 5000
