"""``codecs.encode(decoded=…)``: the values made while encoding are exactly what ``codecs.decode`` of the
result returns (docs/imatrix.md §Requantization speed), for every format an encoder writes — as numbers: a
zero may be −0.0 where decode gives +0.0, which no sum, product or difference of the error statistics tells
apart."""

from __future__ import annotations

import numpy as np
import pytest

from ninfer_core import codecs
from ninfer_core.errors import EncodingError

ROW_SPLIT = ["q2_g64_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16", "t2_g128_fp16"]


def _x(shape, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(0.03)
    x.reshape(-1)[:: 97] *= 40  # outliers: clipped groups in the mse search, large multipliers
    return x


def _same(fmt, layout, x, **kw):
    got = np.full(x.shape, np.nan, dtype=np.float32)
    data = codecs.encode(fmt, layout, x, decoded=got, **kw)
    assert data == codecs.encode(fmt, layout, x, **kw)  # asking for the values changes no byte
    want = codecs.decode(fmt, layout, x.shape, data, divisors=kw.get("divisors", 1))
    np.testing.assert_array_equal(got, want)  # no NaN left: every element was written
    differ = got.view(np.uint32) != want.view(np.uint32)
    assert (got[differ] == 0).all()  # bit patterns differ only in the sign of a zero


@pytest.mark.parametrize("fmt", ROW_SPLIT)
@pytest.mark.parametrize("encoder", ["absmax", "mse"])
@pytest.mark.parametrize("k", [200, 256])  # 200: padding columns the decoded values leave out
def test_row_split_decoded_while_encoding(fmt, encoder, k):
    _same(fmt, "row_split_k128_v1", _x((40, k)), encoder=encoder)


@pytest.mark.parametrize("fmt", ROW_SPLIT)
def test_row_split_weighted_and_several_row_blocks(fmt):
    x = _x((1100, 1024))  # more than one codec row block (BLOCK_ELEMENTS): blocks run on the pool
    w = np.random.default_rng(1).lognormal(0.0, 1.5, 1024).astype(np.float32)
    _same(fmt, "row_split_k128_v1", x, encoder="absmax")
    _same(fmt, "row_split_k128_v1", x[:64], encoder="mse", weights=w)


@pytest.mark.parametrize("divisors", [1, 2])
def test_nvfp4_decoded_after_its_divisors_are_written(divisors):
    x = _x((1024, 1152))  # several row blocks; the divisor plane is written by the first block only
    x[512:] *= 5  # a second member on another scale
    _same("nvfp4", "block_scale_k16_m128x4_v1", x, divisors=divisors)
    _same("nvfp4", "block_scale_k16_m128x4_v1", x[:256], weights=np.linspace(0.1, 3, 1152, dtype=np.float32))


@pytest.mark.parametrize("fmt,layout,shape", [
    ("fp8_e4m3fn_row_bf16", "row_scale_v1", (70, 96)),
    ("bf16", "contiguous_le_v1", (3, 5, 7)),
    ("fp32", "contiguous_le_v1", (9, 11)),
    ("gguf_q4_0", "ggml_blocks_v1", (6, 64)),
    ("gguf_q8_0", "ggml_blocks_v1", (6, 64)),
    ("gguf_bf16", "ggml_blocks_v1", (6, 64)),
    ("gguf_tq2_0", "ggml_blocks_v1", (4, 256)),
])
def test_other_formats_decode_their_block_after_encoding_it(fmt, layout, shape):
    _same(fmt, layout, _x(shape))


def test_decoded_must_fit_the_object():
    x = _x((8, 128))
    with pytest.raises(EncodingError) as e:
        codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, decoded=np.empty((8, 127), dtype=np.float32))
    assert e.value.rule == "decoded_shape"
    with pytest.raises(EncodingError):
        codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, decoded=np.empty((8, 128), dtype=np.float64))
