"""Reading llama.cpp importance files in both forms, strictly (docs/imatrix.md §File forms)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from converters.errors import SourceError, SourceFormatError
from converters.sources.imatrix import read_imatrix
from tests.support.imatrix_files import dat_bytes, write_dat_imatrix, write_gguf_imatrix

RNG = np.random.default_rng(7)
ENTRIES = {"blk.0.attn_q.weight": RNG.random(64, dtype=np.float32) * 3,
           "blk.0.ffn_down.weight": RNG.random(128, dtype=np.float32)}


def test_gguf_form_reads_means_and_metadata(tmp_path):
    experts = RNG.random((4, 64), dtype=np.float32)
    counts = {"blk.0.ffn_up_exps.weight": np.array([100, 0, 7, 3])}
    p = write_gguf_imatrix(tmp_path / "m.imatrix", {**ENTRIES, "blk.0.ffn_up_exps.weight": experts}, counts,
                           datasets=("wiki.txt", "code.txt"), chunk_count=12, chunk_size=256)
    im = read_imatrix(p)
    assert im.form == "gguf" and im.datasets == ["wiki.txt", "code.txt"]
    assert (im.chunk_count, im.chunk_size) == (12, 256)
    np.testing.assert_allclose(im.entries["blk.0.attn_q.weight"], ENTRIES["blk.0.attn_q.weight"][None], rtol=1e-6)
    exps = im.entries["blk.0.ffn_up_exps.weight"]
    assert exps.shape == (4, 64)
    np.testing.assert_allclose(exps[[0, 2, 3]], experts[[0, 2, 3]], rtol=1e-5)
    assert (exps[1] == 1.0).all()  # a matrix that saw no tokens: all ones, as llama-quantize does
    assert len(im.sha256) == 64 and im.to_json()["entries"] == 3


def test_dat_form_divides_by_ncall(tmp_path):
    im = read_imatrix(write_dat_imatrix(tmp_path / "m.dat", ENTRIES, ncall=5, chunk_count=33, dataset="d.txt"))
    assert im.form == "dat" and im.datasets == ["d.txt"] and im.chunk_count == 33
    for k, v in ENTRIES.items():
        np.testing.assert_allclose(im.entries[k][0], v, rtol=1e-6)
    older = read_imatrix(write_dat_imatrix(tmp_path / "old.dat", ENTRIES, chunk_count=None))
    assert older.chunk_count is None and older.datasets == []


@pytest.mark.parametrize("cut", [3, 9, 30, 200])
def test_truncated_dat_is_typed(tmp_path, cut):
    data = dat_bytes(ENTRIES)
    p = tmp_path / "t.dat"
    p.write_bytes(data[:cut])
    with pytest.raises(SourceFormatError) as e:
        read_imatrix(p)
    assert e.value.rule.startswith("imatrix_") and str(p) in str(e.value.to_dict())


@pytest.mark.parametrize("patch, rule", [
    (struct.pack("<i", 1 << 30), "imatrix_entry_count"),   # n_entries far beyond the file
    (struct.pack("<i", -1), "imatrix_entry_count"),
])
def test_impossible_dat_header(tmp_path, patch, rule):
    p = tmp_path / "x.dat"
    p.write_bytes(patch + dat_bytes(ENTRIES)[4:])
    with pytest.raises(SourceFormatError) as e:
        read_imatrix(p)
    assert e.value.rule == rule


def test_dat_negative_value_and_duplicate(tmp_path):
    with pytest.raises(SourceFormatError) as e:
        read_imatrix(write_dat_imatrix(tmp_path / "n.dat", {"a.weight": np.array([1.0, -2.0])}))
    assert e.value.rule == "imatrix_value" and "column 1" in e.value.message
    dup = dat_bytes({"a.weight": np.ones(4)})
    body = dup[4:4 + 4 + 8 + 8 + 16]
    p = tmp_path / "d.dat"
    p.write_bytes(struct.pack("<i", 2) + body + body)
    with pytest.raises(SourceFormatError) as e:
        read_imatrix(p)
    assert e.value.rule == "imatrix_duplicate"


def test_gguf_unpaired_and_mis_shaped(tmp_path):
    import gguf

    w = gguf.GGUFWriter(path=None, arch="x")
    w.add_tensor("a.weight.in_sum2", np.ones((1, 8), dtype=np.float32))
    w.write_header_to_file(path=tmp_path / "u.imatrix")
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(SourceFormatError) as e:
        read_imatrix(tmp_path / "u.imatrix")
    assert e.value.rule == "imatrix_pair"
    p = write_gguf_imatrix(tmp_path / "s.imatrix", {"a.weight": np.ones((2, 8))},
                           {"a.weight": np.array([1.0, 2.0, 3.0])})
    with pytest.raises(SourceFormatError) as e:
        read_imatrix(p)
    assert e.value.rule == "imatrix_shape"


def test_truncated_gguf_is_typed(tmp_path):
    p = write_gguf_imatrix(tmp_path / "m.imatrix", ENTRIES)
    data = p.read_bytes()
    from converters.sources.gguf import open_gguf

    with open_gguf(p) as src:
        last = max(t.file_offset for t in src.tensors.values())
    for cut in (10, len(data) // 2, last + 2):  # the end cuts into the last tensor's data, not its padding
        q = tmp_path / f"c{cut}.imatrix"
        q.write_bytes(data[:cut])
        with pytest.raises(SourceFormatError):
            read_imatrix(q)


def test_missing_file_and_special_files_are_typed(tmp_path):
    """Opened as every source is: a missing path or a FIFO is a typed refusal naming the file (never a hang)."""
    with pytest.raises(SourceError) as e:
        read_imatrix(tmp_path / "none.imatrix")
    assert e.value.rule == "target_usable" and "none.imatrix" in str(e.value)
    fifo = tmp_path / "fifo.imatrix"
    os.mkfifo(fifo)
    with pytest.raises(SourceError) as e:
        read_imatrix(fifo)
    assert e.value.rule == "target_regular_file"
