"""encode() takes any strided view (a transposed or sliced array), not only C-contiguous input."""

import numpy as np
import pytest

from ninfer_core import codecs

CASES = [
    ("bf16", "contiguous_le_v1", (64, 128)),
    ("fp32", "contiguous_le_v1", (64, 128)),
    ("int32", "contiguous_le_v1", (64, 128)),
    ("q4_g64_fp16", "row_split_k128_v1", (64, 128)),
    ("q8_g32_fp16", "row_split_k128_v1", (64, 128)),
    ("fp8_e4m3fn_row_bf16", "row_scale_v1", (64, 128)),
    ("nvfp4", "block_scale_k16_m128x4_v1", (128, 64)),
]


@pytest.mark.parametrize("fmt,layout,shape", CASES)
def test_strided_input_encodes_like_its_contiguous_copy(fmt, layout, shape):
    rng = np.random.default_rng(7)
    base = rng.integers(-8, 8, size=(shape[1], shape[0])).astype(np.float32)
    strided = base.T  # Fortran-ordered view with the object's shape
    assert not strided.flags.c_contiguous
    expected = codecs.encode(fmt, layout, np.ascontiguousarray(strided))
    assert codecs.encode(fmt, layout, strided) == expected
