"""Unchanged bytes copied in the kernel (docs/io-speed.md §Unchanged bytes): a writer given
:class:`FileRange` chunks writes the same files as one given the bytes, through ``copy_file_range``,
``sendfile`` or ``pread``/``pwrite`` alike, across a split, and refuses short or oversized ranges."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from ninfer_core import ArtifactWriter, Component, open_artifact
from ninfer_core.container.filecopy import FileRange, RangeCopier
from ninfer_core.errors import WriterError

AID = "00112233445566778899aabbccddeeff"
SRC = np.random.default_rng(3).integers(0, 256, size=3 * 70_000 + 123, dtype=np.uint8).tobytes()
HEAD = 123  # the source's objects start after a header, at an unaligned offset


def write(tmp_path, name: str, as_ranges: bool, *, max_file_bytes=None, from_content=False,
          durable=True) -> dict[str, bytes]:
    src = tmp_path / "source.bin"
    if not src.exists():
        src.write_bytes(SRC)
    out = tmp_path / name
    out.mkdir()
    kw = {"artifact_id_from_content": True} if from_content else {"artifact_id": AID}
    with ArtifactWriter(out / "m.ninfer", components={"text": Component({"architectures": ["T"]})},
                        max_file_bytes=max_file_bytes, durable=durable, **kw) as w:
        for i in range(3):
            w.add_tensor(f"w.{i}", (35_000,), "bf16", "contiguous_le_v1")
        w.plan()
        for i in range(3):
            start = HEAD + i * 70_000
            if as_ranges:  # two ranges for the first object, one for the others
                w.write_object(f"w.{i}", [FileRange(src, start, 30_000), FileRange(src, start + 30_000, 40_000)]
                               if i == 0 else FileRange(src, start, 70_000))
            else:
                w.write_object(f"w.{i}", SRC[start:start + 70_000])
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.fixture(autouse=True)
def fresh_methods():
    RangeCopier._refused.clear()
    yield
    RangeCopier._refused.clear()


def test_ranges_write_the_same_bytes(tmp_path):
    want = write(tmp_path, "bytes", False)
    got = write(tmp_path, "ranges", True)
    assert got == want
    with open_artifact(tmp_path / "ranges" / "m.ninfer") as art:
        o = art.object("w.2")
        assert bytes(art.read_range(o.offset, o.bytes)) == SRC[HEAD + 140_000:HEAD + 210_000]


def test_ranges_across_a_split_and_with_a_content_id(tmp_path):
    assert write(tmp_path, "a", True, max_file_bytes=90_000) == write(tmp_path, "b", False, max_file_bytes=90_000)
    assert write(tmp_path, "c", True, from_content=True) == write(tmp_path, "d", False, from_content=True)


@pytest.mark.parametrize("refused", [("copy_file_range",), ("copy_file_range", "sendfile")])
def test_fallbacks_write_the_same_bytes(tmp_path, monkeypatch, refused):
    used = []
    real = {m: getattr(RangeCopier, f"_{m}") for m in RangeCopier.methods}

    def make(method):
        def run(*args):
            used.append(method)
            if method in refused:
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
            return real[method](*args)
        return staticmethod(run)

    for m in RangeCopier.methods:
        monkeypatch.setattr(RangeCopier, f"_{m}", make(m))
    # through the page cache: a durable writer assembles a copy's partial units instead of copying them
    # (tests/core/test_container_direct.py)
    assert write(tmp_path, "ranges", True, durable=False) == write(tmp_path, "bytes", False)
    expected = RangeCopier.methods[len(refused)]
    assert used.count(expected) == 4  # every range went through the first method not refused
    assert all(used.count(m) == 1 for m in refused)  # each refused method was tried once, then remembered


def test_short_source_is_a_typed_error(tmp_path):
    src = tmp_path / "short.bin"
    src.write_bytes(SRC[:1000])
    out = tmp_path / "m.ninfer"
    with pytest.raises(WriterError) as exc:
        with ArtifactWriter(out, components={"text": Component({"architectures": ["T"]})}, artifact_id=AID) as w:
            w.add_tensor("w.0", (1000,), "bf16", "contiguous_le_v1")
            w.write_object("w.0", FileRange(src, 0, 2000))
    assert exc.value.rule == "object_length"
    assert not out.exists() and not list(tmp_path.glob(".m.ninfer*"))


def test_oversized_range_and_missing_file_refused(tmp_path):
    src = tmp_path / "s.bin"
    src.write_bytes(SRC)
    for rng, rule in ((FileRange(src, 0, 3000), "object_length"), (FileRange(tmp_path / "gone", 0, 2000), "io_error")):
        out = tmp_path / f"{rule}.ninfer"
        with pytest.raises(WriterError) as exc:
            with ArtifactWriter(out, components={"text": Component({"architectures": ["T"]})},
                                artifact_id=AID) as w:
                w.add_tensor("w.0", (1000,), "bf16", "contiguous_le_v1")
                w.write_object("w.0", [rng])
        assert exc.value.rule == rule
        assert not out.exists()
    with pytest.raises(WriterError):
        FileRange(src, -1, 5)


def test_range_chunks(tmp_path):
    src = tmp_path / "s.bin"
    src.write_bytes(SRC)
    assert b"".join(FileRange(src, 7, 20_000).chunks(4096)) == SRC[7:20_007]
