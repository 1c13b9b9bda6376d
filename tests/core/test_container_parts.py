"""Files and continuation parts (container spec §2.1–§2.3, §3.2, §3.3, §11.1, §11.2), hand-assembled.

Also the spec's own numbers: ``json_bytes = 65504`` → ``entry_payload_start = 65536`` and the §3.3
example of a 32,000,000,000-byte entry with an 8192-byte part (a sparse file).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ninfer_core import open_artifact, validate
from ninfer_core.container.framing import EntryHeader, part_name, split_capacities, split_payload
from ninfer_core.container.planner import plan_files
from ninfer_core.errors import ReadError, SchemaError, WriterError
from tests.support.container import (
    AID,
    OTHER_AID,
    base_payload,
    base_root,
    entry_file,
    part_file,
    write_single,
    write_split,
)

SIZES = [100, 200, 4]  # w.a [0,64) in the entry; w.b [256,288) in part 1; r.t [288,304) across parts 1 and 2


def test_split_reads_match_single_file(tmp_path):
    payload = base_payload()
    path = write_split(tmp_path, SIZES)
    with open_artifact(path) as art:
        assert [f.payload_offset for f in art.files] == [0, 100, 300]
        assert [f.payload_start for f in art.files] == [art.entry_payload_start, 4096, 4096]
        assert art.files[2].location == tmp_path / "a.ninfer.part-0002"
        for off in range(0, len(payload), 7):
            for n in (0, 1, 5, 99, 150, 304 - off):
                if off + n <= len(payload):
                    assert bytes(art.read_range(off, n)) == payload[off:off + n]
        assert art.resource("r.t") == b"tokenizer-bytes!"
        assert art.binding_array("text/b").tolist() == list(range(100, 108))
    assert validate(path) == []


def _open_reads(path):
    """Which reads work: (w.a in the entry, w.b in part 1, r.t across parts 1 and 2)."""
    out = {}
    with open_artifact(path) as art:
        for oid in ("w.a", "w.b", "r.t"):
            try:
                art.object_bytes(oid)
                out[oid] = "ok"
            except ReadError as exc:
                out[oid] = exc
    return out


def test_missing_part_fails_only_reads_that_need_it(tmp_path):
    path = write_split(tmp_path, SIZES, skip=(2,))
    reads = _open_reads(path)  # opening succeeds: parts are opened on demand (§11.1)
    assert reads["w.a"] == "ok" and reads["w.b"] == "ok"
    err = reads["r.t"]
    assert err.rule == "part_missing" and "a.ninfer.part-0002" in str(err) and err.json_path == "$.files[2]"
    findings = validate(path)
    assert [(f.rule, f.json_path) for f in findings] == [("part_missing", "$.files[2]")]


def test_foreign_artifact_part(tmp_path):
    path = write_split(tmp_path, SIZES, part_aids={1: OTHER_AID})
    reads = _open_reads(path)
    assert reads["w.a"] == "ok"
    for oid in ("w.b", "r.t"):
        assert reads[oid].rule == "part_artifact_id" and "a.ninfer.part-0001" in str(reads[oid])
        assert OTHER_AID.hex() in str(reads[oid]) and AID.hex() in str(reads[oid])
    assert [f.rule for f in validate(path)] == ["part_artifact_id"]


@pytest.mark.parametrize("damage, rule", [
    ("magic", "part_magic"), ("index", "part_index"), ("longer", "part_length"), ("shorter", "part_length"),
    ("header_only", "part_length"), ("empty", "part_length"), ("entry_magic", "part_magic"),
])
def test_part_header_rules(tmp_path, damage, rule):
    path = write_split(tmp_path, SIZES)
    part = tmp_path / "a.ninfer.part-0002"
    data = part.read_bytes()
    data = {"magic": b"NINPRT\x00\x02" + data[8:],
            "index": part_file(1, base_payload()[300:]),
            "longer": data + b"\x00", "shorter": data[:-1], "header_only": data[:20], "empty": b"",
            "entry_magic": b"NINFER\x00\x03" + data[8:]}[damage]
    part.write_bytes(data)
    reads = _open_reads(path)
    assert reads["w.a"] == "ok" and reads["w.b"] == "ok"
    assert reads["r.t"].rule == rule and reads["r.t"].file == str(part)
    assert [f.rule for f in validate(path)] == [rule]


@pytest.mark.parametrize("name, reason", [
    ("sub/a.part", "contains '/'"), ("sub\\a.part", "contains '\\'"), ("a\u0000b", "contains U+0000"),
    (".", "is '.' or '..'"), ("..", "is '.' or '..'"), ("", "is empty"), ("a.ninfer", "names the entry file"),
])
def test_part_name_rules(tmp_path, name, reason):
    root = base_root(SIZES, part_names=[name, "a.ninfer.part-0002"])
    path = write_single(tmp_path, root)
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert info.value.rule == "part_name" and info.value.json_path == "$.files[1].path"
    assert reason in info.value.message


def test_part_names_unique_and_typed(tmp_path):
    path = write_single(tmp_path, base_root(SIZES, part_names=["p", "p"]))
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert info.value.rule == "part_name_duplicate" and info.value.json_path == "$.files[2].path"
    path = write_single(tmp_path, base_root(SIZES, part_names=[None, "p"]))
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert info.value.rule == "field_type" and info.value.json_path == "$.files[1].path"


def test_any_valid_part_name_is_read(tmp_path):
    """§2.1: the generated naming rule is not a reading condition; any §3.3-valid name works."""
    payload = base_payload()
    root = base_root(SIZES, part_names=["weights ü.bin", "x"])
    (tmp_path / "a.ninfer").write_bytes(entry_file(root, payload[:100]))
    (tmp_path / "weights ü.bin").write_bytes(part_file(1, payload[100:300]))
    (tmp_path / "x").write_bytes(part_file(2, payload[300:]))
    with open_artifact(tmp_path / "a.ninfer") as art:
        assert art.resource("r.t") == b"tokenizer-bytes!"


def test_directory_moves_as_a_whole(tmp_path):
    write_split(tmp_path, SIZES)
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in os.listdir(tmp_path):
        if name.startswith("a.ninfer"):
            os.rename(tmp_path / name, moved / name)
    os.rename(moved / "a.ninfer", moved / "renamed.ninfer")  # the entry's own name is free too
    with open_artifact(moved / "renamed.ninfer") as art:
        assert art.resource("r.t") == b"tokenizer-bytes!"


def test_payload_sum_overflow(tmp_path):
    root = base_root([2**63, 2**63], part_names=["p"])
    path = write_single(tmp_path, root)
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert info.value.rule == "u64_overflow" and info.value.json_path == "$.files"


# ---- the spec's numbers -----------------------------------------------------------------------


def test_json_bytes_65504_gives_payload_start_65536(tmp_path):
    assert EntryHeader(65504, AID).payload_start == 65536
    assert EntryHeader(65505, AID).payload_start == 69632
    assert EntryHeader(4064, AID).payload_start == 4096
    payload = base_payload()
    path = write_single(tmp_path, json_bytes=65504)
    assert os.path.getsize(path) == 65536 + len(payload)
    with open_artifact(path) as art:
        assert art.json_bytes == 65504 and art.entry_payload_start == 65536
        assert bytes(art.read_range(0, len(payload))) == payload


def test_section_3_3_example_sparse(tmp_path):
    """files = [{null, 31999934464}, {"example.ninfer.part-0001", 4096}] with entry_payload_start 65536:
    the entry is exactly 32,000,000,000 bytes and the part 8192 bytes (§3.3)."""
    b0, b1 = 31_999_934_464, 4096
    tail = bytes(range(256)) * 16  # 4096 bytes at the end of the entry
    part_payload = bytes(reversed(range(256))) * 16
    root = {
        "components": {"text": {"config": {"architectures": ["Test"]}}},
        "objects": [{"id": "r.big", "kind": "resource", "encoding": "raw_bytes_v1", "offset": b0 - 4096,
                     "bytes": 8192}],
        "bindings": {}, "uses": [],
        "files": [{"path": None, "payload_bytes": b0}, {"path": "example.ninfer.part-0001", "payload_bytes": b1}],
    }
    entry = tmp_path / "example.ninfer"
    head = entry_file(root, b"", json_bytes=65504)
    assert len(head) == 65536
    try:
        with open(entry, "wb") as f:
            f.write(head)
            f.truncate(32_000_000_000)
            f.seek(32_000_000_000 - 4096)
            f.write(tail)
    except OSError as exc:  # pragma: no cover - a file system without sparse files
        pytest.skip(f"cannot create a sparse 32 GB file here: {exc}")
    (tmp_path / "example.ninfer.part-0001").write_bytes(part_file(1, part_payload))
    try:
        assert os.path.getsize(entry) == 32_000_000_000
        assert os.path.getsize(tmp_path / "example.ninfer.part-0001") == 8192
        with open_artifact(entry) as art:
            assert art.entry_payload_start == 65536 and art.payload_bytes == b0 + b1
            assert art.files[0].file_bytes == 32_000_000_000 and art.files[1].file_bytes == 8192
            assert art.resource("r.big") == tail + part_payload
            assert bytes(art.read_range(0, 16)) == bytes(16)
    finally:
        entry.unlink()


def test_section_3_3_example_writer_plan():
    """The writer's split of the §3.3 payload under a 32,000,000,000-byte limit (§2.3)."""
    root = {"components": {"text": {"config": {}}}, "objects": [], "bindings": {}, "uses": [], "files": []}
    plan = plan_files(root, 31_999_934_464 + 4096, "example.ninfer", max_file_bytes=32_000_000_000,
                      reserve_json_bytes=65504)
    assert plan.json_bytes == 65504 and plan.entry_payload_start == 65536
    assert plan.sizes == (31_999_934_464, 4096)
    assert plan.names == (None, "example.ninfer.part-0001")
    assert plan.file_bytes(0) == 32_000_000_000 and plan.file_bytes(1) == 8192
    assert plan.root["files"] == [{"path": None, "payload_bytes": 31999934464},
                                  {"path": "example.ninfer.part-0001", "payload_bytes": 4096}]


def test_split_capacities_formula():
    cap = split_capacities(64_000_000, 65536)
    assert cap.entry == (64_000_000 - 65536) // 4096 * 4096 == 63_934_464
    assert cap.part == (64_000_000 - 4096) // 4096 * 4096 == 63_995_904
    sizes = split_payload(200_000_000, 64_000_000, 65536)
    assert sizes == [63_934_464, 63_995_904, 63_995_904, 200_000_000 - 63_934_464 - 2 * 63_995_904]
    assert all(s % 4096 == 0 for s in sizes[:-1])
    assert split_payload(63_934_464, 64_000_000, 65536) == [63_934_464]  # fits: one file
    assert split_payload(10**12, None, 65536) == [10**12]  # default: never split
    for limit, eps in [(8191, 4096), (4096 + 4095, 4096), (69631, 65536), (65536, 65536), (100, 4096)]:
        with pytest.raises(WriterError) as info:
            split_capacities(limit, eps)
        assert info.value.rule == "limit_too_small"
    assert split_capacities(69632, 65536).entry == 4096
    with pytest.raises(WriterError) as info:
        split_payload(10**12, 8192, 4096)  # 244 million files
    assert info.value.rule == "too_many_parts"


def test_part_names_generated():
    assert part_name("example.ninfer", 1) == "example.ninfer.part-0001"
    assert part_name("example.ninfer", 42) == "example.ninfer.part-0042"
    assert part_name("example.ninfer", 12345) == "example.ninfer.part-12345"


def test_spanning_read_copies_and_single_file_read_maps(tmp_path):
    path = write_split(tmp_path, SIZES)
    with open_artifact(path) as art:
        spanning = art.read_range(290, 14)  # parts 1 and 2
        assert not spanning.readonly  # a fresh copy
        assert bytes(spanning) == base_payload()[290:]
        inside = art.object_bytes("w.b")
        assert inside.readonly and np.frombuffer(inside, "<f4")[0] == 100
