"""A rank-3 tensor read transposed (``transpose: true`` in a mapping, docs/qwen3-vl.md §Fused transposed
experts): rows of ``[E, N, K]`` served as ``[E, K, N]`` — values and raw bytes, by slice or by index list, in
any order — and a tensor that cannot be read so is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from converters.errors import SourceError
from converters.sources import open_source
from converters.sources.rows import TensorRows, TransposedRows


@pytest.fixture()
def source(tmp_path):
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    save_file({"bank": x, "flat": np.zeros((2, 3), np.float32)}, str(tmp_path / "t.safetensors"))
    with open_source(tmp_path / "t.safetensors") as s:
        yield s, x.transpose(0, 2, 1).reshape(15, 4)


def test_rows_are_the_transposed_entries(source):
    s, want = source
    rows = TransposedRows(TensorRows(s, "bank"))
    assert (rows.storage.rows, rows.storage.cols, rows.storage.row_bytes) == (15, 4, 16)
    np.testing.assert_array_equal(rows.floats(slice(0, 15)), want)
    np.testing.assert_array_equal(rows.floats(np.array([14, 0, 7, 5])), want[[14, 0, 7, 5]])
    np.testing.assert_array_equal(rows.raw(slice(3, 9)).view(np.float32), want[3:9])


def test_a_tensor_that_is_not_rank_3_is_refused(source):
    s, _ = source
    with pytest.raises(SourceError, match="rank-3") as e:
        TransposedRows(TensorRows(s, "flat"))
    assert e.value.rule == "transpose_supported"
