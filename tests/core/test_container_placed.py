"""Placed chunks (docs/io-speed.md §Write path): the in-process writer writes a chunk at its own offset
inside the object, checks that every byte is written exactly once, and refuses placed chunks where the
bytes must be hashed in order (a content-derived ID)."""

from __future__ import annotations

import pytest

from ninfer_core import ArtifactWriter, Component, open_artifact
from ninfer_core.container.object_data import Placed
from ninfer_core.errors import WriterError

AID = "00112233445566778899aabbccddeeff"
DATA = bytes(range(256)) * 40  # 10240 bytes


def write(path, chunks, **kw):
    kw = kw or {"artifact_id": AID}
    with ArtifactWriter(path, components={"text": Component({"architectures": ["T"]})}, **kw) as w:
        w.add_tensor("w.0", (len(DATA) // 2,), "bf16", "contiguous_le_v1")
        w.write_object("w.0", chunks)


def test_placed_chunks_in_any_order(tmp_path):
    write(tmp_path / "a.ninfer", [DATA[:1000], Placed(6000, DATA[6000:]), Placed(1000, DATA[1000:6000])])
    write(tmp_path / "b.ninfer", DATA)
    assert (tmp_path / "a.ninfer").read_bytes() == (tmp_path / "b.ninfer").read_bytes()
    with open_artifact(tmp_path / "a.ninfer") as art:
        assert bytes(art.read_range(art.object("w.0").offset, len(DATA))) == DATA


@pytest.mark.parametrize("chunks, says", [
    ([Placed(0, DATA[:6000]), Placed(5000, DATA[5000:])], "overlap at byte 5000"),
    ([Placed(0, DATA[:6000]), Placed(7000, DATA[7000:])], "leave a gap at byte 6000"),
    ([DATA[:100], Placed(0, DATA)], "overlap at byte 0"),
    ([Placed(5000, DATA)], "more than"),
    ([Placed(0, DATA[:5000])], "got 5000 of its 10240"),
    ([Placed(-1, DATA[:10])], "more than"),
])
def test_bad_placements_refused(tmp_path, chunks, says):
    out = tmp_path / "m.ninfer"
    with pytest.raises(WriterError) as exc:
        write(out, chunks)
    assert exc.value.rule == "object_length" and says in exc.value.message
    assert not out.exists()


def test_placed_refused_with_a_content_id(tmp_path):
    with pytest.raises(WriterError) as exc:
        write(tmp_path / "m.ninfer", [Placed(0, DATA)], artifact_id_from_content=True)
    assert exc.value.rule == "object_data"


def write_shares(path, shares, parts=None, **kw):
    """Each share written by its own thread, all at once (``write_object(..., parts=n)``)."""
    from concurrent.futures import ThreadPoolExecutor

    kw = kw or {"artifact_id": AID}
    with ArtifactWriter(path, components={"text": Component({"architectures": ["T"]})}, **kw) as w:
        w.add_tensor("w.0", (len(DATA) // 2,), "bf16", "contiguous_le_v1")
        w.plan()
        with ThreadPoolExecutor(len(shares)) as pool:
            for f in [pool.submit(w.write_object, "w.0", s, parts=len(shares) if parts is None else parts) for s in shares]:
                f.result()


def test_an_object_written_in_shares_at_once(tmp_path):
    write_shares(tmp_path / "a.ninfer", [[Placed(6000, DATA[6000:])], [Placed(0, DATA[:1000])],
                                         [Placed(1000, DATA[1000:3000]), Placed(3000, DATA[3000:6000])]])
    write(tmp_path / "b.ninfer", DATA)
    assert (tmp_path / "a.ninfer").read_bytes() == (tmp_path / "b.ninfer").read_bytes()


@pytest.mark.parametrize("shares, parts, rule, says", [
    ([[Placed(0, DATA[:6000])], [Placed(5000, DATA[5000:])]], None, "object_length", "overlap at byte 5000"),
    ([[Placed(0, DATA[:6000])], [Placed(7000, DATA[7000:])]], None, "object_length", "leave a gap at byte 6000"),
    ([[Placed(0, DATA[:6000])], [DATA[6000:]]], None, "object_data", "placed chunks only"),
    ([[Placed(0, DATA[:5000])], [Placed(5000, DATA[5000:])], [Placed(0, DATA[:1])]], 2, "object_written_twice",
     "is already"),  # a third share of two: while the others write, or after
    ([[Placed(0, DATA)]], 0, "object_data", "positive integer"),
])
def test_bad_shares_refused(tmp_path, shares, parts, rule, says):
    out = tmp_path / "m.ninfer"
    with pytest.raises(WriterError) as exc:
        write_shares(out, shares, parts)
    assert exc.value.rule == rule and says in exc.value.message
    assert not out.exists()


def test_shares_refused_with_a_content_id(tmp_path):
    with pytest.raises(WriterError) as exc:
        write_shares(tmp_path / "m.ninfer", [[Placed(0, DATA)], []], artifact_id_from_content=True)
    assert exc.value.rule == "object_data"


def test_a_failed_share_leaves_the_object_unwritten(tmp_path):
    def failing():
        yield Placed(5000, DATA[5000:])
        raise OSError("disk gone")

    out = tmp_path / "m.ninfer"
    w = ArtifactWriter(out, components={"text": Component({"architectures": ["T"]})}, artifact_id=AID)
    w.add_tensor("w.0", (len(DATA) // 2,), "bf16", "contiguous_le_v1")
    w.write_object("w.0", [Placed(0, DATA[:5000])], parts=2)
    with pytest.raises(OSError):
        w.write_object("w.0", failing(), parts=2)
    with pytest.raises(WriterError) as exc:
        w.write_object("w.0", [Placed(5000, DATA[5000:])], parts=2)  # no share is tried again
    assert exc.value.rule == "object_written_twice"
    with pytest.raises(WriterError) as exc:
        w.commit()
    assert exc.value.rule == "coverage_incomplete"
    w.abort()
    assert not out.exists()
