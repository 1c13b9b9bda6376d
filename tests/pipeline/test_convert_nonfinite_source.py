"""A NaN in a source tensor (a Q8_0 block scale set to NaN) is refused by name — the file, the tensor, the
row, the block and the NaN — instead of surfacing as a directory that cannot be written as JSON."""

from __future__ import annotations

import numpy as np
import pytest

from converters.errors import ConversionError
from converters.pipeline.convert import convert
from converters.sources import open_gguf
from tinymodels import qwen3


def nan_scale_gguf(tmp_path):
    path = qwen3.write_gguf(tmp_path / "m.gguf", matrix_type="Q8_0")
    with open_gguf(path) as src:
        name = next(n for n, t in src.tensors.items() if t.dtype == "Q8_0" and "blk.0" in n)
        offset = src.tensors[name].file_offset
    raw = bytearray(path.read_bytes())
    raw[offset + 34:offset + 36] = np.array([np.nan], dtype="<f2").tobytes()  # the second block's scale d
    path.write_bytes(bytes(raw))
    return path, name


def test_nan_q8_0_scale_is_named(tmp_path):
    path, name = nan_scale_gguf(tmp_path)
    with pytest.raises(ConversionError) as info:
        convert(path, tmp_path / "o.ninfer", recipe="bf16")
    err = info.value
    assert err.rule == "source_not_finite" and err.json_path == name and err.file == str(path)
    assert "nan" in err.message.lower() and "Q8_0 block 1" in err.message and "row 0" in err.message
    assert not (tmp_path / "o.ninfer").exists()


def test_an_infinite_scale_gives_the_typed_error_and_no_numpy_warning(tmp_path):
    """An infinite scale times a zero code is NaN: numpy's RuntimeWarning ('invalid value encountered in
    multiply') is not printed beside the one error line."""
    import warnings

    path, name = nan_scale_gguf(tmp_path)
    with open_gguf(path) as src:
        offset = src.tensors[name].file_offset
    raw = bytearray(path.read_bytes())
    raw[offset + 34:offset + 36] = np.array([np.inf], dtype="<f2").tobytes()
    raw[offset + 36:offset + 68] = bytes(32)  # the block's codes: 0, so inf * 0
    path.write_bytes(bytes(raw))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(ConversionError) as info:
            convert(path, tmp_path / "o.ninfer", recipe="bf16")
    assert info.value.rule == "source_not_finite"
    assert [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)] == []
