"""``transforms.fwht`` (in place, one reused buffer) against the stage-by-stage ``np.stack`` butterfly it
replaced — bit for bit, on random data of several shapes — and against an explicit Sylvester matrix product
(``H_2n = [[H, H], [H, -H]]`` built by Kronecker products here, not by the module) on small orders."""

from __future__ import annotations

import numpy as np
import pytest

from converters.errors import TransformError
from converters.mapping import transforms as T


def stacked_butterfly(x: np.ndarray) -> np.ndarray:
    """The previous implementation: a new array per stage (``np.stack`` of ``a + b``, ``a - b``)."""
    n = x.shape[-1]
    y = np.array(x, dtype=np.float64).reshape(-1, n)
    h = 1
    while h < n:
        y = y.reshape(y.shape[0], -1, 2, h)
        a, b = y[:, :, 0], y[:, :, 1]
        y = np.stack((a + b, a - b), axis=2)
        h *= 2
    return y.reshape(x.shape) / np.sqrt(n)


def sylvester(n: int) -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), h)
    return h / np.sqrt(n)


@pytest.mark.parametrize("shape, dtype", [((1,), np.float64), ((2,), np.float32), ((3, 4), np.float32),
                                          ((5, 1024), np.float32), ((2, 3, 64), np.float64), ((7, 2, 1024), np.float16)])
def test_bit_identical_to_the_stacked_butterfly(shape, dtype):
    x = np.random.default_rng(sum(shape) + 1).standard_normal(shape).astype(dtype)
    got = T.fwht(x)
    assert got.dtype == np.float64 and got.shape == x.shape
    assert np.array_equal(got, stacked_butterfly(x))


def test_input_is_not_modified_and_views_are_read_right():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((6, 2048))
    x = base[::2, 1024:]  # non-contiguous
    before = x.copy()
    assert np.array_equal(T.fwht(x), stacked_butterfly(np.ascontiguousarray(x)))
    assert np.array_equal(x, before)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 64, 256])
def test_equals_the_sylvester_product(n):
    x = np.random.default_rng(n).standard_normal((5, n))
    np.testing.assert_allclose(T.fwht(x), x @ sylvester(n), rtol=0, atol=1e-12)
    np.testing.assert_allclose(T.fwht(T.fwht(x)), x, rtol=0, atol=1e-12)  # H is its own inverse


def test_basis_vectors_give_the_rows_of_h():
    n = 32
    np.testing.assert_array_equal(T.fwht(np.eye(n)) * np.sqrt(n), sylvester(n) * np.sqrt(n))


def test_no_rows_give_no_rows():
    assert T.fwht(np.ones((0, 8))).shape == (0, 8)


def test_order_must_be_a_power_of_two():
    with pytest.raises(TransformError):
        T.fwht(np.ones((2, 12)))
