"""Rows of a GGUF tensor read into a caller's buffer with ``pread`` (``TensorRows.raw(into=…)``,
docs/io-speed.md §Source reads): the same bytes as the mapped read, for a slice and an index list, a view of
the buffer for a slice, and a file that shrank after its header was checked is a typed error."""

from __future__ import annotations

import os

import gguf
import gguf.quants
import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType

from converters.errors import SourceError
from converters.sources import open_source
from converters.sources.rows import TensorRows

ROWS, COLS = 24, 96  # Q8_0: 3 blocks of 34 bytes per row


@pytest.fixture()
def q8_gguf(tmp_path):
    x = np.random.default_rng(7).standard_normal((ROWS, COLS)).astype(np.float32)
    raw = gguf.quants.quantize(x, GGMLQuantizationType.Q8_0)
    path = tmp_path / "t.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("w", raw, raw_shape=raw.shape, raw_dtype=GGMLQuantizationType.Q8_0)
    w.add_tensor("tail", np.ones(8, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, raw.reshape(ROWS, -1)


@pytest.mark.parametrize("ids", [slice(0, ROWS), slice(5, 17), np.array([9, 3, 4, 20]), np.array([6])])
def test_read_into_a_buffer_gives_the_mapped_bytes(q8_gguf, ids):
    path, want = q8_gguf
    buf = np.full(ROWS * 102 + 50, 0xEE, np.uint8)
    with open_source(path) as src:
        rows = TensorRows(src, "w")
        mapped = np.array(rows.raw(ids))
        read = rows.raw(ids, into=lambda n: buf)
    np.testing.assert_array_equal(read, mapped)
    np.testing.assert_array_equal(read, want[ids])
    assert np.shares_memory(read, buf) == isinstance(ids, slice)  # a slice's rows are the buffer itself


def test_a_buffer_too_small_is_refused(q8_gguf):
    path, _ = q8_gguf
    with open_source(path) as src, pytest.raises(ValueError, match="cannot hold"):
        TensorRows(src, "w").raw(slice(0, 4), into=lambda n: np.empty(100, np.uint8))


def test_a_file_that_shrank_is_a_typed_error(q8_gguf):
    path, _ = q8_gguf
    with open_source(path) as src:
        rows = TensorRows(src, "w")
        os.truncate(path, rows.tensor.file_offset + 5 * 102)  # the download was cut after row 5
        with pytest.raises(SourceError, match=rf"the file ended at byte {rows.tensor.file_offset + 5 * 102} ") as e:
            rows.raw(slice(0, ROWS), into=lambda n: np.empty(n, np.uint8))
    assert e.value.rule == "read_tensor"
    assert e.value.to_dict()["file"] == str(path)
