"""The importance-weighted scale search (docs/imatrix.md §Weighted search)."""

from __future__ import annotations

import numpy as np
import pytest

from ninfer_core import codecs

WEIGHTED = ["q2_g64_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16", "t2_g128_fp16"]


def _case(k: int = 256, n: int = 48, seed: int = 3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = (rng.lognormal(0.0, 1.5, k)).astype(np.float32)  # skewed column importance, as activations are
    return x, w


def _werr(fmt, x, data, w):
    got = codecs.decode(fmt, "row_split_k128_v1", x.shape, data)
    return float((((x - got) ** 2) * w).sum())


@pytest.mark.parametrize("fmt", WEIGHTED)
def test_weighted_search_lowers_the_weighted_error(fmt):
    x, w = _case(k=200)  # K not a multiple of 128: padding columns
    plain = codecs.encode(fmt, "row_split_k128_v1", x, encoder="mse")
    weighted = codecs.encode(fmt, "row_split_k128_v1", x, encoder="mse", weights=w)
    assert _werr(fmt, x, weighted, w) < _werr(fmt, x, plain, w)
    assert not codecs.check(fmt, "row_split_k128_v1", x.shape, weighted)


def test_uniform_weights_give_the_unweighted_bytes_and_none_changes_nothing():
    x, _ = _case()
    plain = codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="mse")
    assert codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="mse", weights=np.ones(x.shape[1])) == plain
    assert codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="mse", weights=None) == plain


def test_per_row_weights_and_absmax_name_use_the_search():
    x, w = _case()
    per_row = np.broadcast_to(w, x.shape).copy()
    a = codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="absmax", weights=w)
    b = codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="mse", weights=per_row)
    assert a == b


def test_weights_of_the_wrong_shape_or_format_are_refused():
    x, w = _case()
    with pytest.raises(codecs.EncodingError) as e:
        codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="mse", weights=w[:-1])
    assert e.value.rule == "importance_shape"
    with pytest.raises(codecs.EncodingError) as e:
        codecs.encode("bf16", codecs.FORMATS["bf16"].layout, x, weights=w)
    assert e.value.rule == "encoder_unsupported"


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8_e4m3fn_row_bf16"])
def test_float_formats_search_their_scales_by_weighted_error(fmt):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((128, 256)) * rng.lognormal(0, 1, (128, 1))).astype(np.float32)
    w = rng.lognormal(0.0, 2.0, 256).astype(np.float32)
    layout = codecs.FORMATS[fmt].layout
    plain = codecs.encode(fmt, layout, x)
    weighted = codecs.encode(fmt, layout, x, weights=w)

    def err(data):
        return float((((x - codecs.decode(fmt, layout, x.shape, data)) ** 2) * w).sum())

    assert err(weighted) < err(plain)
    assert not codecs.check(fmt, layout, x.shape, weighted)
    assert codecs.encode(fmt, layout, x) == plain  # without weights: the absmax bytes


@pytest.mark.parametrize("weighted", [False, True])
def test_mse_search_is_near_a_dense_search(weighted):
    """The candidates scored by their least-squares multiplier (docs/imatrix.md §Requantization speed) find
    nearly what trying 400 multipliers per group finds (codes -8..7, FP16 multipliers)."""
    x, w = _case(k=256, n=16, seed=11)
    w = w if weighted else np.ones_like(w)
    data = codecs.encode("q4_g64_fp16", "row_split_k128_v1", x, encoder="mse", weights=w if weighted else None)
    found = _werr("q4_g64_fp16", x, data, w)
    x3, w3 = x.reshape(16, 4, 64), w.reshape(1, 4, 64)
    amax = np.abs(x3).max(axis=-1)
    best = np.full(amax.shape, np.inf)
    for f in np.linspace(0.3, 1.3, 400):
        s = (amax * f / 7).astype(np.float16).astype(np.float32)
        v = np.clip(np.rint(x3 / s[..., None]), -8, 7)
        best = np.minimum(best, (((x3 - v * s[..., None]) ** 2) * w3).sum(axis=-1))
    assert found <= best.sum() * 1.03
