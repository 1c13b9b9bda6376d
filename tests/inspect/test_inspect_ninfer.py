"""Inspection of .ninfer artifacts through ninfer_core: header, files and part states, objects and the
files they span, binding coverage, uses, resources, metadata, provenance; typed rejections."""

from __future__ import annotations

import hashlib
import json

import pytest

from converters.errors import SourceFormatError
from converters.inspect import inspect_model_artifact
from tests.support.sources import write_ninfer


@pytest.fixture
def split(tmp_path):
    path, _ = write_ninfer(tmp_path / "m.ninfer", max_file_bytes=8192)
    return path


def test_single_file_artifact(tmp_path):
    path, _ = write_ninfer(tmp_path / "one.ninfer")
    ev = inspect_model_artifact(path, hash="full")
    assert ev["format"] == "ninfer" and ev["status"] == "complete"
    assert ev["details"]["artifact_id"] == "00112233445566778899aabbccddeeff"
    assert ev["details"]["components"] == ["text"] and ev["details"]["file_count"] == 1
    assert ev["artifact"]["kind"] == "file"
    assert ev["artifact"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    jb = ev["details"]["json_bytes"]
    assert ev["artifact"]["header_length"] == 32 + jb
    assert ev["artifact"]["header_sha256"] == hashlib.sha256(path.read_bytes()[:32 + jb]).hexdigest()
    assert ev["metadata"] == [{"index": 0, "key": "name", "type": "string", "value": "tiny"},
                              {"index": 1, "key": "layers", "type": "number", "value": 1}]
    assert ev["provenance"] == {"source": "tests"}
    assert ev["uses"] == [{"index": 0, "parameter": "text/token_embedding", "input": "text/final_hidden",
                           "activation_policy": "A16Only", "auxiliaries": {}}]
    assert ev["resources"] == [{"component": "text", "role": "chat_template.jinja", "object": "r.tpl", "bytes": 10}]
    assert ev["chat_template"]["present"] is True


def test_split_artifact_objects_span_files_and_binding_coverage(split):
    ev = inspect_model_artifact(split)
    rows = {r["name"]: r for r in ev["tensors"]}
    a = rows["w.a"]
    assert (a["type"], a["layout"], a["shape"], a["byte_length"], a["offset"]) == (
        "bf16", "contiguous_le_v1", ["4", "1024"], 8192, 0)
    assert [s["file"] for s in a["files"]] == [0, 1] and a["spans_files"] == 2
    assert a["files"][0]["payload_range"] == [0, 4096] and a["files"][1]["file_range"] == [4096, 8192]
    assert rows["w.b"]["bound_elements"] == 4 and rows["w.b"]["parameter_count"] == 8
    cov = ev["binding_coverage"]
    assert cov["partially_bound"] == [{"object": "w.b", "bound_elements": 4, "elements": 8}]
    assert cov["unbound_objects"] == [] and cov["fully_bound"] == 1
    assert [f["state"] for f in ev["files"]] == ["ok", "ok", "ok"]
    assert ev["artifact"]["kind"] == "file-set" and len(ev["artifact"]["files"]) == 3
    assert ev["artifact"]["bytes_read"] == ev["artifact"]["header_length"]
    assert [b["name"] for b in ev["bindings"]] == ["text/token_embedding", "text/final_norm"]
    assert ev["bindings"][1]["parts"] == [{"object": "w.b", "range": [0, 4]}]


def _copy_set(src, dst_dir):
    dst_dir.mkdir()
    for f in src.parent.glob(src.name + "*"):
        (dst_dir / f.name).write_bytes(f.read_bytes())
    return dst_dir / src.name


def _edit_directory(entry, edit):
    data = bytearray(entry.read_bytes())
    jb = int.from_bytes(data[8:16], "little")
    text = json.loads(data[32:32 + jb])
    edit(text)
    blob = json.dumps(text, separators=(",", ":")).encode()
    assert len(blob) <= jb
    data[32:32 + jb] = blob + b" " * (jb - len(blob))
    entry.write_bytes(data)
    return entry


def test_missing_and_foreign_parts_are_recorded_not_fatal(split):
    part2 = split.parent / "m.ninfer.part-0002"
    original = part2.read_bytes()
    part2.unlink()
    ev = inspect_model_artifact(split, hash="full")
    assert [f["state"] for f in ev["files"]] == ["ok", "ok", "missing"]
    lim = next(x for x in ev["limitations"] if x["code"] == "part_unavailable")
    assert sorted(lim["tensors"]) == [1, 2]
    assert ev["coverage"]["digest"] == "partial" and ev["artifact"]["sha256"] is None
    assert ev["status"] == "complete"
    foreign = bytearray(original)
    foreign[16:32] = bytes(16)  # another artifact_id
    part2.write_bytes(foreign)
    ev = inspect_model_artifact(split)
    assert ev["files"][2]["state"] == "foreign_artifact"
    assert ev["files"][2]["error"]["rule"] == "part_artifact_id"


def test_corrupt_directory_is_a_typed_rejection_with_the_container_rule(split, tmp_path):
    bad = _edit_directory(_copy_set(split, tmp_path / "bad"),
                          lambda t: t["objects"][1].__setitem__("offset", 0))  # overlaps w.a
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(bad)
    e = ei.value
    assert e.code == "target_unavailable" and e.category == "file_format_rejected"
    assert e.rule and e.section and str(bad) in str(e)


def test_encoded_size_mismatch_rejected(split, tmp_path):
    bad = _edit_directory(_copy_set(split, tmp_path / "size"),
                          lambda t: t["objects"][0].__setitem__("shape", [4, 512]))
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(bad)
    assert ei.value.rule == "object_encoded_size"


def test_unknown_format_kept_with_unknown_storage_validation(split, tmp_path):
    entry = _edit_directory(_copy_set(split, tmp_path / "unk"),
                            lambda t: t["objects"][1].__setitem__("format", "fp99_future"))
    ev = inspect_model_artifact(entry)
    row = ev["tensors"][1]
    assert row["storage_validation"] == "unknown" and row["type"] == "fp99_future"
    assert ev["limitations"][0]["code"] == "unknown_encoding" and ev["limitations"][0]["tensors"] == [1]
