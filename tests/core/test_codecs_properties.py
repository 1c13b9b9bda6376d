"""Property tests per format: error bounds, exact round trips of representable inputs, encoder quality.

Bounds are stated per group from the stored multiplier (read from the scale plane, not from the encoder):
symmetric formats with ``absmax`` round to the nearest code, ``|x - x̂| <= s/2`` (plus the absolute FP16
rounding of a subnormal multiplier); q2 may clip the side opposite to its extreme, ``|x - x̂| <= |s|``; NVFP4 ``<= (block scale + 6·2**-10) / divisor``; FP8 a relative
``2**-4`` plus the subnormal step. Representable inputs are built from codes and multipliers chosen so
that ``absmax`` must find exactly those multipliers.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ninfer_core import codecs

RS = "row_split_k128_v1"
NV = "block_scale_k16_m128x4_v1"
INT_FORMATS = {  # format: (group, vmin, vmax, signed multiplier)
    "q2_g64_fp16": (64, -1, 2, True),
    "q4_g64_fp16": (64, -7, 7, False),
    "q5_g64_fp16": (64, -15, 15, False),
    "q6_g64_fp16": (64, -31, 31, False),
    "q8_g32_fp16": (32, -127, 127, False),
    "t2_g128_fp16": (128, -1, 1, False),
}
PROFILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def sample(seed: int, shape, scale: float, tails: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_t(3, shape) if tails else rng.standard_normal(shape)
    return (x * scale).astype(np.float32)


def scales_of(fmt: str, shape, data: bytes) -> np.ndarray:
    p = {q.name: q for q in codecs.planes(fmt, RS, shape)}["scale"]
    return np.frombuffer(data[p.offset : p.offset + p.size], "<f2").astype(np.float32).reshape(shape[0], -1)


rows = st.integers(1, 4)
cols = st.integers(1, 300)
seeds = st.integers(0, 2**32 - 1)
magnitudes = st.sampled_from([1e-3, 0.02, 1.0, 30.0, 5e3])


@pytest.mark.parametrize("fmt", sorted(INT_FORMATS))
@PROFILE
@given(n=rows, k=cols, seed=seeds, scale=magnitudes, tails=st.booleans())
def test_int_formats_absmax_error_bound(fmt, n, k, seed, scale, tails):
    g, vmin, vmax, signed = INT_FORMATS[fmt]
    x = sample(seed, (n, k), scale, tails)
    data = codecs.encode(fmt, RS, x)
    assert len(data) == codecs.encoded_size(fmt, RS, x.shape)
    y = codecs.decode(fmt, RS, x.shape, data)
    assert y.shape == x.shape and y.dtype == np.float32
    kp = -(-k // 128) * 128
    s = np.repeat(np.abs(scales_of(fmt, x.shape, data)), g, axis=1)[:, :kp][:, :k]
    # + the FP16 rounding of a subnormal multiplier (at most 2**-25), which can clip the extreme code
    bound = (s if signed else s / 2) * (1 + 2**-9) + vmax * 2.0**-25
    # a multiplier saturated at 65504 clips magnitudes beyond the format's range
    saturated = s == 65504
    bound = np.where(saturated, np.maximum(bound, np.abs(x) - (1 if signed else vmax) * s), bound)
    assert (np.abs(x - y) <= bound).all()
    assert [f for f in codecs.check(fmt, RS, x.shape, data) if f.severity == "ERROR"] == []
    assert codecs.check(fmt, RS, x.shape, data) == []  # padding written as the spec says


@pytest.mark.parametrize("fmt", sorted(INT_FORMATS))
@PROFILE
@given(n=rows, k=cols, seed=seeds, scale=magnitudes, tails=st.booleans())
def test_int_formats_mse_never_worse_per_group(fmt, n, k, seed, scale, tails):
    g = INT_FORMATS[fmt][0]
    x = sample(seed, (n, k), scale, tails)
    a = codecs.decode(fmt, RS, x.shape, codecs.encode(fmt, RS, x, encoder="absmax"))
    m_data = codecs.encode(fmt, RS, x, encoder="mse")
    m = codecs.decode(fmt, RS, x.shape, m_data)
    kp = -(-k // 128) * 128

    def group_sse(y):
        d = np.zeros((n, kp), np.float64)
        d[:, :k] = (x.astype(np.float64) - y) ** 2
        return d.reshape(n, -1, g).sum(-1)

    assert (group_sse(m) <= group_sse(a) * (1 + 1e-6) + 1e-30).all()
    assert codecs.check(fmt, RS, x.shape, m_data) == []


def _representable(fmt: str, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Values c·s where every group's extreme code is present, so absmax finds s exactly."""
    g, vmin, vmax, signed = INT_FORMATS[fmt]
    groups = -(-k // g)
    mant = rng.integers(1024, 2048, (n, groups))
    exps = rng.integers(-20, 6, (n, groups))
    s = np.ldexp(mant.astype(np.float64), exps - 10).astype(np.float16)  # normal FP16, exact
    if signed:
        s = np.where(rng.random((n, groups)) < 0.5, s, -s).astype(np.float16)
    codes = rng.integers(vmin, vmax + 1, (n, groups * g))
    extreme = vmax if signed else rng.choice([vmin, vmax], (n, groups))
    cols_in_group = np.minimum(g, k - np.arange(groups) * g)
    pos = (rng.random((n, groups)) * cols_in_group).astype(int) + np.arange(groups) * g
    np.put_along_axis(codes, pos, extreme, axis=1)
    x = codes * np.repeat(s.astype(np.float32), g, axis=1)
    return x[:, :k].astype(np.float32)


@pytest.mark.parametrize("fmt", sorted(INT_FORMATS))
@PROFILE
@given(n=rows, k=cols, seed=seeds)
def test_int_formats_representable_roundtrip_exact(fmt, n, k, seed):
    x = _representable(fmt, n, k, np.random.default_rng(seed))
    data = codecs.encode(fmt, RS, x)
    np.testing.assert_array_equal(codecs.decode(fmt, RS, x.shape, data), x)
    # the encoder reproduces the multipliers, so the object is a fixed point
    assert codecs.encode(fmt, RS, codecs.decode(fmt, RS, x.shape, data)) == data


@PROFILE
@given(n=st.sampled_from([128, 256]), c=st.integers(1, 3), seed=seeds, scale=magnitudes, divisors=st.sampled_from([1, 2]),
       tails=st.booleans())
def test_nvfp4_error_bound(n, c, seed, scale, divisors, tails):
    k = 64 * c
    x = sample(seed, (n, k), scale, tails)
    data = codecs.encode("nvfp4", NV, x, divisors=divisors)
    y = codecs.decode("nvfp4", NV, x.shape, data, divisors=divisors)
    p = {q.name: q for q in codecs.planes("nvfp4", NV, x.shape, divisors)}
    d = np.frombuffer(data[p["divisors"].offset :][:4 * divisors], "<f4")
    from ninfer_core.codecs.nvfp4 import unswizzle
    tiles = np.frombuffer(data, np.uint8)[p["block_scales"].offset :][: p["block_scales"].size].reshape(n // 128, -1)
    s = unswizzle(tiles, k).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    bound = (np.repeat(s, 16, axis=1) + 6 * 2**-10) / np.repeat(d, n // divisors)[:, None] * (1 + 1e-6)
    assert (np.abs(x - y) <= bound).all()
    assert codecs.check("nvfp4", NV, x.shape, data, divisors) == []


@PROFILE
@given(c=st.integers(1, 3), seed=seeds, divisors=st.sampled_from([1, 2]))
def test_nvfp4_representable_roundtrip_exact(c, seed, divisors):
    n, k = 256, 64 * c
    rng = np.random.default_rng(seed)
    e2m1 = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    codes = e2m1[rng.integers(0, 16, (n, k))]
    blocks = codes.reshape(n, k // 16, 16)
    blocks[:, :, 0] = rng.choice([-6.0, 6.0], (n, k // 16))  # every block reaches the largest code
    e4m3 = np.arange(0x08, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)  # normal, < NaN
    scales = rng.choice(e4m3, (n, k // 16))
    per = n // divisors
    for i in range(divisors):
        scales[i * per + rng.integers(per), rng.integers(k // 16)] = 448.0  # one block per matrix at the top
    d = np.ldexp(1.0, rng.integers(-6, 7, divisors)).astype(np.float32)
    x = (blocks * scales[:, :, None]).reshape(n, k) / np.repeat(d, per)[:, None]
    data = codecs.encode("nvfp4", NV, x, divisors=divisors)
    y = codecs.decode("nvfp4", NV, x.shape, data, divisors=divisors)
    np.testing.assert_array_equal(y, x)
    assert codecs.encode("nvfp4", NV, y, divisors=divisors) == data


@PROFILE
@given(n=rows, k=cols, seed=seeds, scale=magnitudes, tails=st.booleans())
def test_fp8_row_error_bound(n, k, seed, scale, tails):
    x = sample(seed, (n, k), scale, tails)
    data = codecs.encode("fp8_e4m3fn_row_bf16", "row_scale_v1", x)
    y = codecs.decode("fp8_e4m3fn_row_bf16", "row_scale_v1", x.shape, data)
    s = (np.frombuffer(data[-2 * n :], "<u2").astype(np.uint32) << 16).view(np.float32)[:, None]
    assert (np.abs(x - y) <= np.abs(x) * (2**-4 + 2**-7) + s * 2**-10).all()
    assert codecs.check("fp8_e4m3fn_row_bf16", "row_scale_v1", x.shape, data) == []


@PROFILE
@given(n=rows, k=cols, seed=seeds)
def test_fp8_row_representable_roundtrip_exact(n, k, seed):
    rng = np.random.default_rng(seed)
    finite = np.array([b for b in range(256) if b & 0x7F != 0x7F], dtype=np.uint8)
    codes = rng.choice(finite, (n, k)).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    codes[np.arange(n), rng.integers(0, k, n)] = rng.choice([-448.0, 448.0], n)
    s = rng.integers(0x3000, 0x4800, n).astype(np.uint16)  # BF16 words, normal, positive
    x = codes * (s.astype(np.uint32) << 16).view(np.float32)[:, None]
    data = codecs.encode("fp8_e4m3fn_row_bf16", "row_scale_v1", x)
    np.testing.assert_array_equal(codecs.decode("fp8_e4m3fn_row_bf16", "row_scale_v1", x.shape, data), x)


@pytest.mark.parametrize("fmt", ["bf16", "fp32", "int32"])
@PROFILE
@given(shape=st.lists(st.integers(1, 5), min_size=0, max_size=3), seed=seeds)
def test_contiguous_roundtrip(fmt, shape, seed):
    rng = np.random.default_rng(seed)
    if fmt == "int32":
        x = rng.integers(-(2**24), 2**24, shape).astype(np.int64)
        expected = x.astype(np.float32)
    else:
        x = (rng.standard_normal(shape) * 100).astype(np.float32)
        expected = x.astype(ml_dtypes.bfloat16).astype(np.float32) if fmt == "bf16" else x
    data = codecs.encode(fmt, "contiguous_le_v1", x)
    y = codecs.decode(fmt, "contiguous_le_v1", shape, data)
    assert y.shape == tuple(shape) and y.dtype == np.float32
    np.testing.assert_array_equal(y, expected)
    if fmt == "bf16":
        assert (np.abs(y - x) <= np.abs(x) * 2**-8).all()
        assert codecs.encode(fmt, "contiguous_le_v1", y) == data


@pytest.mark.parametrize("fmt", ["q2_g64_fp16", "q4_g64_fp16", "t2_g128_fp16", "q8_g32_fp16"])
@pytest.mark.parametrize("tails", [False, True])
def test_mse_measurably_better_than_absmax(fmt, tails):
    x = sample(11, (64, 1024), 0.02, tails)
    err = {}
    for enc in codecs.ENCODERS:
        y = codecs.decode(fmt, RS, x.shape, codecs.encode(fmt, RS, x, encoder=enc))
        err[enc] = float(np.mean((x.astype(np.float64) - y) ** 2))
    assert err["mse"] < err["absmax"] * (0.97 if fmt != "q8_g32_fp16" else 0.999)
