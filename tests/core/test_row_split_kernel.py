"""The compiled row_split encode kernel (ninfer_core/codecs/row_split_kernel.py; docs/imatrix.md §Requantization
speed) against the numpy statement of the same rules in tests/support/row_split_reference.py: FP16 rounding
exhaustively, absmax bit for bit, the mse / weighted search to within near-ties."""

from __future__ import annotations

import numpy as np
import pytest

from ninfer_core import codecs
from ninfer_core.codecs import row_split_kernel
from ninfer_core.errors import EncodingError
from tests.support import row_split_reference as ref

RS = "row_split_k128_v1"
FORMATS = ["q2_g64_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16", "t2_g128_fp16"]
F16_MAX = 0x7BFF  # 65504


def _f32(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _both_signs(bits: np.ndarray) -> np.ndarray:
    bits = np.unique(bits.astype(np.uint32))
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


def _check_fp16(bits: np.ndarray) -> None:
    x = _f32(_both_signs(bits))
    want = ref.to_fp16(x).view(np.uint16)
    got = row_split_kernel.fp16_bits_array(x)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} mismatches, first {x[bad[0]]!r}: {got[bad[0]]:#06x} != {want[bad[0]]:#06x}"


def test_fp16_rounding_at_every_fp16_value_midpoint_and_their_neighbours():
    """Every finite FP16 magnitude, every midpoint between neighbours (the ties), and the float32 one ulp
    either side of each: round to nearest even, subnormals included, both signs."""
    values = np.arange(F16_MAX + 1, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = (values[:-1].astype(np.float64) + values[1:]) / 2  # exact in float32: 12 significant bits
    points = np.concatenate([values, mids.astype(np.float32)]).view(np.uint32)
    _check_fp16(np.concatenate([points, points + 1, points[points > 0] - 1]))


def test_fp16_rounding_on_a_sweep_of_float32_patterns_and_beyond_the_range():
    sweep = np.arange(0, 0x477FE000 + 1, 1021, dtype=np.uint32)  # every 1021st pattern in [0, 65504]
    tiny = np.arange(0, 1 << 16, dtype=np.uint32)  # float32 subnormals: FP16 zero
    beyond = np.array([0x477FE001, 0x477FF000, 0x47800000, 0x7F7FFFFF, 0x7F800000], dtype=np.uint32)  # saturate
    _check_fp16(np.concatenate([sweep, tiny, beyond]))
    assert row_split_kernel.fp16_bits_array(np.array([-0.0, 0.0], np.float32)).tolist() == [0, 0]  # -0 → +0


def test_fp16_value_is_the_float16_cast_for_every_finite_pattern():
    h = np.concatenate([np.arange(F16_MAX + 1), np.arange(F16_MAX + 1) | 0x8000]).astype(np.uint16)
    got = np.array([row_split_kernel.fp16_value(v) for v in h[::7]], dtype=np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), h[::7].view(np.float16).astype(np.float32).view(np.uint32))


def _inputs(fmt: str) -> dict[str, np.ndarray]:
    """Named float32 inputs; K not a multiple of 128 pads; an odd row count leaves the last row alone."""
    c = codecs.FORMATS[fmt]
    rng = np.random.default_rng(7)
    n, k = 9, 300
    s = np.ldexp(1.0, rng.integers(-12, 4, (n, 1)))  # exact powers of two
    ties = (rng.integers(-2 * c.vmax, 2 * c.vmax + 1, (n, k)) / 2 * s).astype(np.float32)
    ties[:, :: c.group] = np.float32(c.vmax) * s.astype(np.float32)  # absmax finds s: x / s are half-integers
    zeros = np.zeros((n, k), np.float32)
    zeros[::2] = -0.0
    zeros[1, 5] = -1e-30  # a multiplier that rounds to -0 in FP16 (q2)
    return {
        "random": (rng.standard_normal((n, k)) * 0.05).astype(np.float32),
        "heavy tails": (rng.standard_t(2, (n, k)) * 3).astype(np.float32),
        "ties": ties,
        "signed zeros": zeros,
        "subnormal": (rng.standard_normal((n, k)) * 1e-39).astype(np.float32),
        "tiny multipliers": (rng.standard_normal((n, k)) * 1e-6).astype(np.float32),
        "huge": (rng.standard_normal((n, k)) * 1e37).astype(np.float32),
        "one column": rng.standard_normal((n, 1)).astype(np.float32),
        "one row": rng.standard_normal((1, 256)).astype(np.float32),
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_absmax_is_bit_identical_to_the_numpy_statement(fmt):
    for name, x in _inputs(fmt).items():
        got = np.full(x.shape, np.nan, np.float32)
        data = codecs.encode(fmt, RS, x, decoded=got)
        want, decoded = ref.encode(fmt, x)
        assert data == want, name
        np.testing.assert_array_equal(got.view(np.uint32), decoded.view(np.uint32), err_msg=name)


@pytest.mark.parametrize("fmt", ["q4_g64_fp16", "q2_g64_fp16"])
def test_other_input_types_and_read_only_arrays_encode_as_their_float32_values(fmt):
    x = (np.random.default_rng(3).standard_normal((6, 256)) * 4).astype(np.float16)
    want = codecs.encode(fmt, RS, x.astype(np.float32))
    assert codecs.encode(fmt, RS, x) == want
    ro = x.astype(np.float32)
    ro.flags.writeable = False
    assert codecs.encode(fmt, RS, ro) == want
    w = np.linspace(0.5, 2, 256, dtype=np.float32)
    w.flags.writeable = False
    assert codecs.encode(fmt, RS, ro, weights=w) == codecs.encode(fmt, RS, ro, weights=w.copy())
    assert len(row_split_kernel.encode_rows.signatures) == 1  # read-only, cast and weighted inputs: one kernel


@pytest.mark.parametrize("fmt", ["q4_g64_fp16", "q2_g64_fp16", "q8_g32_fp16"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_the_first_non_finite_element_row_major_is_named(fmt, bad):
    x = np.ones((5, 300), np.float32)
    x[3, 290] = bad  # later row: not reported
    x[2, 250] = bad  # row 2 is paired with row 3; its element comes first row-major
    x[3, 10] = bad
    with pytest.raises(EncodingError) as e:
        codecs.encode(fmt, RS, x, encoder="mse")
    assert e.value.rule == "non_finite_input"
    assert "(2, 250)" in e.value.message
    y = np.ones((1100, 1024), np.float32)  # several row blocks on the pool: the first block's error wins
    y[1050, 3] = bad
    y[600, 1000] = bad
    with pytest.raises(EncodingError, match=r"\(600, 1000\)"):
        codecs.encode(fmt, RS, y)


def _group_errors(fmt: str, x: np.ndarray, data: bytes, w: np.ndarray) -> np.ndarray:
    g = codecs.FORMATS[fmt].group
    n, k = x.shape
    kp = -(-k // 128) * 128
    d = np.zeros((n, kp))
    d[:, :k] = (x.astype(np.float64) - codecs.decode(fmt, RS, x.shape, data)) ** 2 * w
    return d.reshape(n, -1, g).sum(-1)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("weighted", [False, True])
def test_search_matches_the_numpy_statement_but_for_near_ties(fmt, weighted):
    """The kernel sums each candidate in element order, numpy's einsum in its own order: a group may
    choose another candidate only where two candidates' scores are within float32 rounding of each other
    (rare; its refit may then land elsewhere), and over many groups that is as good."""
    rng = np.random.default_rng(11)
    x = (rng.standard_t(3, (64, 700)) * 0.05).astype(np.float32)
    w = rng.lognormal(0, 1.5, 700).astype(np.float32) if weighted else None
    data = codecs.encode(fmt, RS, x, encoder="mse", weights=w)
    want, _ = ref.encode(fmt, x, "mse", w)
    ones = np.ones(700) if w is None else w.astype(np.float64)
    e_got, e_want = _group_errors(fmt, x, data, ones), _group_errors(fmt, x, want, ones)
    differ = ~np.isclose(e_got, e_want, rtol=0, atol=0)
    assert differ.mean() <= 0.01
    assert abs(e_got.sum() - e_want.sum()) <= 2e-3 * e_want.sum()


@pytest.mark.parametrize("fmt", FORMATS)
def test_weighted_search_is_never_worse_than_absmax_per_group(fmt):
    rng = np.random.default_rng(5)
    x = (rng.standard_t(3, (32, 520)) * rng.lognormal(0, 1, (32, 1))).astype(np.float32)
    w = rng.lognormal(0, 2, (32, 520)).astype(np.float32)  # per element
    searched = codecs.encode(fmt, RS, x, weights=w)
    plain = codecs.encode(fmt, RS, x)
    assert (_group_errors(fmt, x, searched, w) <= _group_errors(fmt, x, plain, w) * (1 + 1e-5) + 1e-30).all()
    assert codecs.check(fmt, RS, x.shape, searched) == []
