"""Each transform against an independent reference (written here, not imported from the code under test).

The V-head reference is llama.cpp's ``_reorder_v_heads`` (grouped → tiled) written out with explicit
loops; the transforms undo it. Asymmetric values, so a wrong axis or a swapped head shows.
"""

from __future__ import annotations

import numpy as np
import pytest

from converters.errors import TransformError
from converters.mapping import transforms as T
from converters.mapping.chain import resolve_chain


def llama_cpp_tile(x: np.ndarray, nk: int, nv: int, head_dim: int, axis: int) -> np.ndarray:
    """Grouped (k, r) → tiled (r, k) value heads along ``axis``, by explicit loops over heads."""
    r = nv // nk
    x = np.moveaxis(x, axis, 0)
    out = np.empty_like(x)
    for k in range(nk):
        for j in range(r):
            src = (k * r + j) * head_dim
            dst = (j * nk + k) * head_dim
            out[dst:dst + head_dim] = x[src:src + head_dim]
    return np.moveaxis(out, 0, axis)


@pytest.mark.parametrize(("nk", "nv", "hd"), [(2, 4, 3), (2, 6, 2), (1, 3, 4), (3, 3, 2), (4, 8, 1)])
def test_v_heads_rows_undo_llama_cpp(nk, nv, hd):
    grouped = np.arange(nv * hd * 5, dtype=np.float32).reshape(nv * hd, 5) * 1.5 - 7
    tiled = llama_cpp_tile(grouped, nk, nv, hd, axis=0)
    back = T.v_heads_tiled_to_grouped(tiled, num_k_heads=nk, num_v_heads=nv, head_dim=hd, start=0)
    np.testing.assert_array_equal(back, grouped)
    if 1 < nk < nv:  # with one key head, or as many key as value heads, both orders coincide
        assert not np.array_equal(tiled, grouped)


def test_v_heads_worked_permutation():
    # 2 key heads, 6 value heads: tiled position t = j*2 + k holds grouped head k*3 + j
    assert list(T.tiled_to_grouped_heads(2, 6)) == [0, 2, 4, 1, 3, 5]


def test_v_heads_rows_after_start_only():
    nk, nv, hd, qk = 2, 4, 2, 5
    grouped = np.random.default_rng(1).standard_normal((qk + nv * hd, 3))
    tiled = np.concatenate([grouped[:qk], llama_cpp_tile(grouped[qk:], nk, nv, hd, axis=0)])
    back = T.v_heads_tiled_to_grouped(tiled, num_k_heads=nk, num_v_heads=nv, head_dim=hd, start=qk)
    np.testing.assert_array_equal(back, grouped)


def test_v_head_columns_undo_llama_cpp():
    nk, nv, hd = 2, 4, 3
    grouped = np.random.default_rng(2).standard_normal((7, nv * hd))
    tiled = llama_cpp_tile(grouped, nk, nv, hd, axis=1)
    np.testing.assert_array_equal(
        T.v_head_columns_tiled_to_grouped(tiled, num_k_heads=nk, num_v_heads=nv, head_dim=hd), grouped)


def test_select_head_rows_deinterleaves_query_and_gate():
    heads, hd, k = 3, 2, 4
    q = np.random.default_rng(3).standard_normal((heads * hd, k))
    g = np.random.default_rng(4).standard_normal((heads * hd, k))
    fused = np.empty((2 * heads * hd, k))
    for h in range(heads):  # per head [q (hd rows) | gate (hd rows)], as transformers' chunk(2) reads it
        fused[2 * hd * h:2 * hd * h + hd] = q[h * hd:(h + 1) * hd]
        fused[2 * hd * h + hd:2 * hd * (h + 1)] = g[h * hd:(h + 1) * hd]
    np.testing.assert_array_equal(T.select_head_rows(fused, heads=heads, stride=2 * hd, offset=0, count=hd), q)
    np.testing.assert_array_equal(T.select_head_rows(fused, heads=heads, stride=2 * hd, offset=hd, count=hd), g)


def test_unshift_norm_and_a_log_in_float64():
    w = np.array([-0.25, 0.0, 0.125, 3.0], dtype=np.float32)
    np.testing.assert_array_equal(T.unshift_norm(w + np.float32(1)), w.astype(np.float64))
    a_log = np.array([-2.0, 0.0, 0.5, 1.25])
    got = T.a_log_from_ssm_a(-np.exp(a_log))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a_log, rtol=0, atol=1e-15)
    with pytest.raises(TransformError, match=r"ssm_a\[1\] = 0.0 is not negative"):
        T.a_log_from_ssm_a(np.array([-1.0, 0.0]))


def test_squeeze_and_row_slice_refuse_bad_shapes():
    x = np.zeros((6, 1, 4))
    assert T.squeeze(x, axis=1).shape == (6, 4)
    with pytest.raises(TransformError):
        T.squeeze(x, axis=2)
    with pytest.raises(TransformError):
        T.row_slice(np.zeros((4, 2)), start=2, stop=5)


def hadamard_reference(n: int) -> np.ndarray:
    """H[i, j] = (-1)^popcount(i & j) / sqrt(n): the normalized Sylvester matrix by its closed form."""
    i = np.arange(n)
    bits = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
    return np.where(bits % 2, -1.0, 1.0) / np.sqrt(n)


def test_hadamard_matrix_is_sylvester():
    np.testing.assert_allclose(T.hadamard_matrix(16), hadamard_reference(16), atol=1e-15)
    np.testing.assert_allclose(T.hadamard_matrix(1024) @ T.hadamard_matrix(1024), np.eye(1024), atol=1e-12)


def test_hadamard_rotation_preserves_the_product():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 2048))
    x = rng.standard_normal(2048)
    s = T.hadamard_signs(2048, seed=7)
    assert set(np.unique(s)) == {-1.0, 1.0}
    np.testing.assert_array_equal(s, T.hadamard_signs(2048, seed=7))  # deterministic
    rotated = T.hadamard_rotate(w, s)
    h = hadamard_reference(1024)
    x_rot = np.concatenate([h @ (s[b:b + 1024] * x[b:b + 1024]) for b in (0, 1024)])  # consumer's x' = H(s ⊙ x)
    np.testing.assert_allclose(rotated @ x_rot, w @ x, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(T.hadamard_unrotate(rotated, s), w, atol=1e-12)
    with pytest.raises(TransformError, match="K % 1024"):
        T.hadamard_rotate(np.zeros((2, 512)), np.ones(512))


def test_chain_row_map_equals_applying_transforms():
    rng = np.random.default_rng(6)
    nk, nv, hd, kd = 2, 4, 2, 3
    x = rng.standard_normal((2 * kd + nv * hd, 5))
    steps = [("row_slice", {"start": 2 * kd, "stop": 2 * kd + nv * hd}),
             ("v_heads_tiled_to_grouped", {"num_k_heads": nk, "num_v_heads": nv, "head_dim": hd, "start": 0})]
    chain = resolve_chain(x.shape, steps)
    direct = T.v_heads_tiled_to_grouped(T.row_slice(x, start=2 * kd, stop=2 * kd + nv * hd),
                                        num_k_heads=nk, num_v_heads=nv, head_dim=hd, start=0)
    assert chain.shape == direct.shape
    np.testing.assert_array_equal(x[chain.rows], direct)
    assert chain.row_ids(0, 2) == slice(6, 8)  # a contiguous run reads as a slice


def test_chain_identity_and_values():
    chain = resolve_chain((4, 1, 3), [("squeeze", {"axis": 1}), ("unshift_norm", {})])
    assert chain.shape == (4, 3) and chain.rows is None and chain.columns is None
    np.testing.assert_array_equal(chain.apply(np.ones((4, 3), np.float32)), np.zeros((4, 3), np.float32))
    with pytest.raises(TransformError):
        resolve_chain((8,), [("v_head_columns_tiled_to_grouped", {"num_k_heads": 2, "num_v_heads": 4,
                                                                   "head_dim": 2})])


def test_pick_selects_one_expert_of_a_bank():
    bank = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    chain = resolve_chain(bank.shape, [("pick", {"index": 2}), ("row_slice", {"start": 1, "stop": 3})])
    assert chain.shape == (2, 5)
    np.testing.assert_array_equal(bank.reshape(12, 5)[chain.rows], bank[2, 1:3])
    with pytest.raises(TransformError):
        T.pick(bank, index=3)
