"""The compiled GGML decoders (``ninfer_core.codecs.ggml_kernel``): bit for bit gguf-py's values, on both paths
that use them — the ``gguf_<type>`` passthrough codec (artifact side) and the source decoder (source side)."""

from __future__ import annotations

import gguf.quants
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from converters.sources.decode import decode_tensor
from ninfer_core import codecs
from ninfer_core.codecs import ggml_blocks
from tests.core.test_codecs_ggml import random_blocks

COMPILED = sorted(ggml_blocks.COMPILED)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_decoder_is_bit_identical_to_gguf_py(name):
    qt = GGMLQuantizationType[name]
    b, t = GGML_QUANT_SIZES[qt]
    rng = np.random.default_rng(len(name) * 7 + int(qt))
    raw = random_blocks(qt, 5, 4096 // b, rng)
    want = gguf.quants.dequantize(raw, qt).astype(np.float32)
    got = ggml_blocks.dequantize(name, raw.reshape(-1, t)).reshape(want.shape)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))  # signed zeros and all
    through_codec = codecs.decode(f"gguf_{name.lower()}", "ggml_blocks_v1", list(want.shape), raw.tobytes())
    np.testing.assert_array_equal(np.asarray(through_codec).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("name", COMPILED)
def test_source_decoder_uses_the_same_values(name):
    from types import SimpleNamespace

    qt = GGMLQuantizationType[name]
    b, _ = GGML_QUANT_SIZES[qt]
    raw = random_blocks(qt, 3, 512 // b, np.random.default_rng(3))
    shape = (3, 512)
    tensor = SimpleNamespace(shape=shape, elements=3 * 512, type_id=int(qt), read_type=name, dtype=name,
                             name="t", file="x.gguf")
    got = decode_tensor(tensor, raw.reshape(-1))
    np.testing.assert_array_equal(got.view(np.uint32), gguf.quants.dequantize(raw, qt).view(np.uint32))


def test_a_type_without_a_reader_is_left_to_gguf_py():
    assert ggml_blocks.dequantize("IQ4_XS", np.zeros((1, 136), np.uint8)) is None
    assert ggml_blocks.dequantize("Q1_0", np.zeros((1, 18), np.uint8)).shape == (1, 128)  # the numpy reader
