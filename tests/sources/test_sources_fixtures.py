"""Fixture builders for the source/inspect tests, independent of the code under test.

- :func:`writer_gguf`: a little-endian GGUF written by ``gguf.GGUFWriter`` the way llama.cpp's converter
  writes one (header, KV data, tensor infos, padded tensor data).
- :class:`RawGGUF`: GGUF bytes assembled with ``struct.pack`` in either byte order, for big-endian files
  and for one malformed variant per rejection rule (counts, versions, offsets as given, not derived).
- :func:`raw_safetensors`: safetensors bytes from a header JSON text and a data buffer, for the same purpose.
- :func:`write_ninfer`: a small .ninfer artifact (optionally split into parts) through ``ninfer_core``'s
  writer, for the .ninfer inspection and the fuzz seeds.

The tests at the bottom check the builders against gguf-py's own reader so a builder bug cannot hide.
"""

from __future__ import annotations

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

from tests.support.sources import (
    RawGGUF,
    q8_0_blocks,
    writer_gguf,
)

# -- the builders agree with gguf-py's reader -------------------------------------------------------


def test_raw_gguf_builder_matches_gguf_py(tmp_path):
    data = np.arange(8, dtype="<f4").tobytes()
    raw = RawGGUF().kv("general.architecture", V.STRING, "x").kv("a.u", V.UINT32, 7)
    raw.tensor("t", [4, 2], Q.F32, data)
    r = gguf.GGUFReader(raw.write(tmp_path / "x.gguf"))
    assert [t.name for t in r.tensors] == ["t"]
    np.testing.assert_array_equal(np.asarray(r.tensors[0].data).reshape(-1), np.arange(8, dtype=np.float32))
    assert r.fields["a.u"].parts[-1][0] == 7


def test_writer_gguf_round_trips_through_gguf_py(tmp_path):
    x = np.arange(64, dtype=np.float32).reshape(2, 32)
    writer_gguf(tmp_path / "w.gguf", tensors={"x": x, "q": (q8_0_blocks(x), Q.Q8_0)})
    r = gguf.GGUFReader(tmp_path / "w.gguf")
    q = next(t for t in r.tensors if t.name == "q")
    deq = gguf.quants.dequantize(np.asarray(q.data), Q.Q8_0).reshape(2, 32)
    d = np.abs(x).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(deq - x) <= d / 2 + 1e-3 * np.abs(x))
