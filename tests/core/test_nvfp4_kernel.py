"""The compiled nvfp4 encoder (ninfer_core/codecs/nvfp4_kernel.py) against the numpy statement of the same
rules in tests/support/nvfp4_reference.py: bytes and decoded values bit for bit, absmax and weighted."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ninfer_core import codecs
from ninfer_core.codecs import nvfp4_kernel
from ninfer_core.codecs.nvfp4 import E2M1_VALUES, unswizzle
from tests.support import nvfp4_reference as ref

NV = "block_scale_k16_m128x4_v1"
E2M1_TIES = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)


def _encode(x, divisors=1, weights=None):
    decoded = np.empty(x.shape, dtype=np.float32)
    data = codecs.encode("nvfp4", NV, x, divisors=divisors, weights=weights, as_array=True, decoded=decoded)
    return data, decoded


def _same_as_reference(x, divisors=1, weights=None):
    data, decoded = _encode(x, divisors, weights)
    want, _, want_decoded = ref.encode(x, divisors, weights)
    np.testing.assert_array_equal(data, want)
    np.testing.assert_array_equal(decoded.view(np.uint32), want_decoded.view(np.uint32))  # -0.0 included
    return data


def _e4m3_test_points() -> np.ndarray:
    """Every non-negative E4M3FN value up to 448, every midpoint between neighbours, and the float32
    neighbours (±1 ulp) of each (the encoder rounds only non-negative scales)."""
    values = np.arange(0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    mids = ((values[:-1].astype(np.float64) + values[1:]) / 2).astype(np.float32)  # exact in float32
    pts = np.concatenate([values, mids])
    pts = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))])
    return pts[pts <= np.float32(448)]


def _e4m3_rounding_is_ml_dtypes_cast(pts: np.ndarray) -> None:
    got = [nvfp4_kernel.e4m3fn_round(v) for v in pts]
    want = pts.astype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(np.array([c for c, _ in got], dtype=np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(np.array([v for _, v in got], dtype=np.float32), want.astype(np.float32))


def test_e4m3_rounding_is_ml_dtypes_cast_at_every_value_midpoint_and_neighbour():
    pts = _e4m3_test_points()
    assert pts.size > 350
    _e4m3_rounding_is_ml_dtypes_cast(pts)
    rng = np.random.default_rng(0)  # random float32 bit patterns of [0, 448], subnormals of float32 included
    bits = rng.integers(0, np.float32(448).view(np.uint32), 1000, np.uint32)
    _e4m3_rounding_is_ml_dtypes_cast(bits.view(np.float32))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 3e4])
def test_random_rows_are_the_reference_bytes(scale):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((256, 320)) * rng.lognormal(0, 2, (256, 1)) * scale).astype(np.float32)
    _same_as_reference(x)
    _same_as_reference(x, divisors=2)


def test_ties_signed_zeros_and_all_zero_blocks():
    rng = np.random.default_rng(2)
    n, k = 128, 256
    # divisor 1 (amax 2688 = 448·6), each block's amax 6·s for an E4M3 scale s, every other element a tie
    # of the E2M1 rounding times s: exact ties for power-of-two scales, within an ulp for the others
    s = np.arange(1, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    blocks = rng.choice(s, (n, k // 16)).astype(np.float32)
    y = rng.choice(E2M1_TIES, (n, k // 16, 16)) * blocks[:, :, None]
    y[:, :, 0] = 6 * blocks
    y *= rng.choice(np.array([-1, 1], dtype=np.float32), y.shape)
    x = y.reshape(n, k)
    x[0, 0] = 2688.0
    x[1, :16] = 0.0
    x[2, :16] = -0.0  # all -0.0: scale 0, codes 0x8, decoded -0.0
    x[3, 5] = -0.0
    data = _same_as_reference(x)
    codes = data[: n * k // 2].reshape(n, -1)
    assert (codes[2, :8] == 0x88).all()


def test_tiny_subnormal_and_huge_inputs():
    tiny = np.zeros((128, 64), dtype=np.float32)
    tiny[5, 7] = np.float32(1e-45)  # the smallest float32 subnormal: the divisor saturates at the float32 max
    tiny[9, 9] = -np.float32(1e-45)
    _same_as_reference(tiny)
    rng = np.random.default_rng(3)
    sub = (rng.standard_normal((128, 64)) * 1e-40).astype(np.float32)  # float32 subnormals throughout
    _same_as_reference(sub)
    huge = (rng.standard_normal((128, 64)) * 5e37).astype(np.float32)
    huge[0, 0] = np.finfo(np.float32).max
    _same_as_reference(huge)


def test_other_input_dtypes_and_strides_are_cast_as_numpy_casts():
    rng = np.random.default_rng(4)
    x64 = rng.standard_normal((128, 192)) * 7
    _same_as_reference(x64)
    _same_as_reference(x64.astype(ml_dtypes.bfloat16))
    wide = rng.standard_normal((128, 384)).astype(np.float32)
    _same_as_reference(wide[:, ::2])


def test_one_compiled_signature_whatever_the_input():
    """Read-only, unaligned, cast and weighted inputs all run the same compiled kernels (each new array
    type would compile, 3-5 s, and cache another copy)."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    readonly = x.copy()
    readonly.flags.writeable = False
    unaligned = np.frombuffer(b"\0" + x.tobytes(), dtype=np.float32, offset=1).reshape(x.shape)
    w = np.frombuffer(b"\0" + np.ones(64, np.float32).tobytes(), dtype=np.float32, offset=1)
    for data in (x, readonly, unaligned, x.astype(ml_dtypes.bfloat16)):
        _same_as_reference(data)
    _same_as_reference(readonly, weights=w)
    assert len(nvfp4_kernel.encode_rows.signatures) == 1
    assert len(nvfp4_kernel.row_amax.signatures) == 1


def test_first_non_finite_element_row_major_is_named():
    x = np.ones((384, 128), dtype=np.float32)
    x[300, 100] = np.inf
    x[200, 127] = np.nan
    x[200, 126] = -np.inf
    with pytest.raises(codecs.EncodingError, match=r"\(200, 126\)") as info:
        codecs.encode("nvfp4", NV, x)
    assert info.value.rule == "non_finite_input"


@pytest.mark.parametrize("per_row", [False, True])
def test_weighted_search_is_the_reference_choice(per_row):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((256, 256)) * rng.lognormal(0, 1, (256, 1))).astype(np.float32)
    w = rng.lognormal(0, 2, (256, 256) if per_row else 256).astype(np.float32)
    w[..., :16] = 0  # a block without importance keeps the absmax scale (no candidate is strictly better)
    data = _same_as_reference(x, weights=w)
    assert not np.array_equal(data, _encode(x)[0])


def test_weighted_search_never_worse_than_absmax_and_as_the_numpy_encoder_off_ties():
    """The kernel sums a candidate's 16 weighted squares by halving; the numpy encoder it replaced used
    ``einsum``: the choices differ only where two candidates' errors are within rounding of each other."""
    rng = np.random.default_rng(7)
    n, k = 256, 512
    x = (rng.standard_normal((n, k)) * rng.lognormal(0, 1, (n, 1))).astype(np.float32)
    w = rng.lognormal(0, 2, k).astype(np.float32)
    _, scales, _ = ref.encode(x, weights=w)
    _, einsum_scales, _ = ref.encode(x, weights=w, error_sum="einsum")
    got = unswizzle(_encode(x, weights=w)[0][n * k // 2 : n * k // 2 + n * k // 16].reshape(n // 128, -1), k)
    np.testing.assert_array_equal(got, scales)
    y = (x * ref.divisors(x)[0]).reshape(n, k // 16, 16)
    _, absmax_scales, _ = ref.encode(x)

    def errors(s):
        s32 = s.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        q = np.take(E2M1_VALUES, ref.e2m1_codes((y / s32[:, :, None]).astype(np.float32)))
        return (((y - q * s32[:, :, None]) ** 2) * w.reshape(1, -1, 16)).sum(axis=-1)

    chosen, absmax, einsum = errors(got), errors(absmax_scales), errors(einsum_scales)
    assert (chosen <= absmax * (1 + 1e-6)).all()
    differ = got != einsum_scales
    assert differ.mean() < 1e-3
    np.testing.assert_allclose(chosen[differ], einsum[differ], rtol=1e-5)


def test_decoding_and_checking_never_import_numba():
    """Only an encode loads the kernels (numba's import costs about a third of a second)."""
    import subprocess
    import sys

    code = ("import sys\nfrom ninfer_core import codecs\n"
            f"data = bytes(codecs.encoded_size('nvfp4', '{NV}', [128, 64]))\n"
            f"codecs.decode('nvfp4', '{NV}', [128, 64], data)\ncodecs.check('nvfp4', '{NV}', [128, 64], data)\n"
            "assert 'numba' not in sys.modules and 'ninfer_core.codecs.nvfp4_kernel' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
