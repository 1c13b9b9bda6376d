"""The order probes and tolerances alone, on synthetic arrays with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance.gates import tolerance
from converters.acceptance.gates.values import Stats, _head_probe, _row_probe
from ninfer_core import codecs

TOL = tolerance.for_format("q4_g64_fp16")


def probe_rows(g, w, tol=TOL, exact=False):
    st = Stats()
    st.add(np.asarray(g, np.float32), np.asarray(w, np.float32))
    return _row_probe("p", st, tol, exact)


def test_swapped_rows_keep_their_norms_and_are_row_order(rng=np.random.default_rng(0)):
    w = rng.standard_normal((16, 64))
    g = w.copy()
    g[[2, 9]] = w[[9, 2]]
    g[2] *= np.linalg.norm(w[2]) / np.linalg.norm(g[2])  # same norm, other direction
    g[9] *= np.linalg.norm(w[9]) / np.linalg.norm(g[9])
    (issue,) = probe_rows(g, w)
    assert issue.code == "VERIFY_ROW_ORDER" and issue.detail["rows"] == [2, 9]


def test_scaled_row_is_row_norm(rng=np.random.default_rng(1)):
    w = rng.standard_normal((8, 64))
    g = w.copy()
    g[5] += 1.0  # a shift that was not undone
    (issue,) = probe_rows(g, w)
    assert issue.code == "VERIFY_ROW_NORM" and issue.detail["rows"] == [5]


def test_quantization_noise_and_empty_rows_are_not_order_problems(rng=np.random.default_rng(2)):
    w = rng.uniform(-1, 1, (64, 128)).astype(np.float32)
    w[7] = 0.0  # an unused vocabulary row
    w[8] *= 1e-6  # a near-empty one: q4 noise is large relative to it, small against a typical row
    g = codecs.decode("q4_g64_fp16", "row_split_k128_v1", w.shape, codecs.encode("q4_g64_fp16", "row_split_k128_v1", w))
    assert probe_rows(g, w) == []
    g[7] = 0.5  # but a non-empty row where the source has none is found
    assert [i.code for i in probe_rows(g, w)] == ["VERIFY_ROW_NORM"]


def test_exact_parameters_leave_ulps_to_the_value_gate_but_not_moved_rows(rng=np.random.default_rng(3)):
    w = rng.standard_normal((4, 32))
    g = w.astype(np.float32)
    g[1, 3] = np.nextafter(g[1, 3], np.float32(np.inf))  # a value problem (gate 4 compares bit for bit)
    assert probe_rows(g, w, tolerance.EXACT, exact=True) == []
    g[[0, 2]] = g[[2, 0]]
    assert probe_rows(g, w, tolerance.EXACT, exact=True)[0].detail["rows"] == [0, 2]


@pytest.mark.parametrize("axis", [0, 1])
def test_head_probe_names_the_swapped_heads(axis, rng=np.random.default_rng(4)):
    w = rng.standard_normal((8 * 4, 8 * 4))
    slices = [(i * 8, (i + 1) * 8) for i in range(4)]
    g = w.copy()
    if axis == 0:
        g[8:16], g[24:32] = w[24:32], w[8:16]
    else:
        g[:, 8:16], g[:, 24:32] = w[:, 24:32], w[:, 8:16]
    (issue,) = _head_probe("p", g, w, axis, slices, TOL, exact=False)
    assert {(m["head"], m["matches"]) for m in issue.detail["moved"]} == {(1, 3), (3, 1)}
    assert ("rows" if axis == 0 else "columns") in issue.evidence


def test_head_probe_tolerates_identical_heads_and_flags_foreign_ones(rng=np.random.default_rng(5)):
    w = np.ones((4, 1))  # dt_bias initialised to ones: every head equal
    g = w + rng.normal(0, 1e-3, w.shape)
    slices = [(i, i + 1) for i in range(4)]
    assert _head_probe("p", g, w, 0, slices, TOL, exact=False) == []
    w2 = rng.standard_normal((16, 8))
    g2 = w2.copy()
    g2[4:8] = rng.standard_normal((4, 8))  # a head from somewhere else entirely
    (issue,) = _head_probe("p", g2, w2, 0, [(i * 4, (i + 1) * 4) for i in range(4)], TOL, exact=False)
    assert issue.detail["moved"] == [{"head": 1, "matches": None}] and "matches no source head" in issue.evidence


def test_integer_format_error_bounds_follow_half_a_step():
    for fmt, qmax in (("q8_g32_fp16", 127), ("q5_g64_fp16", 15), ("q4_g64_fp16", 7)):
        assert tolerance.for_format(fmt).max_rel == round(1 / (2 * qmax) + 2 ** -10, 4)
    rng = np.random.default_rng(6)
    w = rng.uniform(-1, 1, (32, 256)).astype(np.float32)
    for fmt in ("q8_g32_fp16", "q5_g64_fp16", "q4_g64_fp16"):
        g = codecs.decode(fmt, "row_split_k128_v1", w.shape, codecs.encode(fmt, "row_split_k128_v1", w))
        assert np.max(np.abs(g - w)) / np.max(np.abs(w)) <= tolerance.for_format(fmt).max_rel
