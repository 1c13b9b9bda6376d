"""Views, summaries and retained Evidence files (docs/inspect.md §Facts and queries)."""

from __future__ import annotations

import json

import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

from converters.errors import SourceError
from converters.inspect import EvidenceError, ViewError, inspect_model_artifact, load_evidence, select
from converters.inspect.bundle import load_bundle
from tests.support.sources import RawGGUF


@pytest.fixture
def model(tmp_path):
    raw = RawGGUF().kv("general.architecture", V.STRING, "qwen3").kv("general.name", V.STRING, "tiny")
    raw.kv("qwen3.block_count", V.UINT32, 2).kv("tokenizer.chat_template", V.STRING, "x" * 500)
    raw.kv("tokenizer.ggml.tokens", V.ARRAY, [f"t{i}" for i in range(12)], V.STRING)
    for i in range(6):
        raw.tensor(f"blk.{i}.w", [32], Q.F32 if i % 2 else 23, b"\0" * 128)
    raw.tensor("output.weight", [32], Q.F16, b"\0" * 64)
    return raw.write(tmp_path / "m.gguf")


@pytest.fixture
def record(model):
    return inspect_model_artifact(model)


def test_filters_intersect_and_rows_keep_their_index(record):
    page = select(record, {"collection": "tensors", "types": ["AMBIGUOUS_23"],
                           "names": ["blk.0.w", "blk.2.w", "blk.1.w"]})
    assert [r["index"] for r in page["rows"]] == [0, 2] and page["matches"] == 2
    assert page["rows"][0]["type"] == "AMBIGUOUS_23"
    assert select(record, {"collection": "tensors", "names": []})["rows"] == []
    assert select(record, {"collection": "tensors"})["matches"] == 7


def test_fields_and_paging(record):
    page = select(record, {"collection": "tensors", "fields": ["name", "byte_length"], "offset": 2, "limit": 3})
    assert page["rows"] == [{"index": 2, "name": "blk.2.w", "byte_length": None},
                            {"index": 3, "name": "blk.3.w", "byte_length": 128},
                            {"index": 4, "name": "blk.4.w", "byte_length": None}]
    assert page["next_offset"] == 5 and page["total_rows"] == 7
    only_index = select(record, {"collection": "tensors", "fields": [], "types": ["F16"]})
    assert only_index["rows"] == [{"index": 6}] and only_index["next_offset"] is None
    filtered = select(record, {"collection": "tensors", "types": ["F32"], "offset": 1, "limit": 1})
    assert filtered["rows"][0]["index"] == 3  # the offset counts filtered matches


def test_storage_validation_filter_and_types_and_metadata(record):
    unknown = select(record, {"collection": "tensors", "storage_validation": ["unknown"], "fields": ["name"]})
    assert [r["index"] for r in unknown["rows"]] == [0, 2, 4]
    types = select(record, {"collection": "types", "types": ["AMBIGUOUS_23"]})
    assert types["rows"][0]["bytes"] is None and types["rows"][0]["tensor_count"] == 3
    md = select(record, {"collection": "metadata", "keys": ["tokenizer.ggml.tokens", "general.name"]})
    assert [r["key"] for r in md["rows"]] == ["general.name", "tokenizer.ggml.tokens"]
    assert md["array_elisions"] == [{"index": 4, "key": "tokenizer.ggml.tokens", "count": "12", "previewed": 8}]
    assert md["parent_evidence_id"] == record["evidence_id"] and md["source"]["format"] == "gguf"


@pytest.mark.parametrize("view", [
    "tensors", {"collection": "weights"}, {"collection": "metadata", "names": ["x"]},
    {"collection": "tensors", "names": "x"}, {"collection": "tensors", "limit": 0},
    {"collection": "tensors", "offset": -1}, {"collection": "tensors", "bogus": 1},
    {"collection": "tensors", "indexes": ["1"]}, {"kind": "other", "collection": "tensors"},
    {"collection": ["tensors"]},  # unhashable: found by the --view fuzz target
])
def test_invalid_views_are_typed_errors(record, view):
    with pytest.raises(ViewError):
        select(record, view)


def test_unknown_field_rejected(record):
    with pytest.raises(ViewError, match="unknown field"):
        select(record, {"collection": "tensors", "fields": ["nmae"]})


def test_view_needs_summary_detail(model):
    with pytest.raises(ViewError, match="summary"):
        inspect_model_artifact(model, view={"collection": "tensors"})


def test_summary_is_compact_and_links_the_parent(model, tmp_path):
    out = tmp_path / "ev.json"
    s = inspect_model_artifact(model, detail="summary", evidence_output=out,
                               view={"collection": "tensors", "names": ["output.weight"],
                                     "fields": ["type", "shape", "file_offset"]})
    keys = [m["key"] for m in s["header_metadata"]]
    assert keys == ["general.architecture", "general.name", "qwen3.block_count"]  # long/compound values left out
    assert s["chat_template"]["present"] is True and s["counts"] == {"tensors": 7, "metadata": 5, "types": 3}
    assert s["page"]["rows"] == [{"index": 6, "type": "F16", "shape": ["32"], "file_offset":
                                  s["page"]["rows"][0]["file_offset"]}]
    (full,) = load_bundle(out)  # --evidence-output writes a bundle of one record (docs/inspect.md §Bundles)
    assert full["evidence_id"] == s["parent_evidence_id"] == s["page"]["parent_evidence_id"]
    assert s["warnings"]["count"] == 1 and s["warnings"]["full_evidence"] == str(out)
    # the same page from the retained record, without reopening the model
    model.unlink()
    again = inspect_model_artifact(out, detail="summary", view={"collection": "tensors", "names": ["output.weight"],
                                                                "fields": ["type", "shape", "file_offset"]})
    assert again["page"]["rows"] == s["page"]["rows"]


def test_evidence_output_refuses_overwrite_and_tampering_is_detected(model, tmp_path):
    out = tmp_path / "ev.json"
    out.write_text("{}")
    with pytest.raises(SourceError, match="refusing to overwrite"):
        inspect_model_artifact(model, evidence_output=out)
    assert out.read_text() == "{}"
    out.unlink()
    inspect_model_artifact(model, evidence_output=out)
    rec = json.loads(out.read_text())["records"][0]
    rec["tensors"][0]["byte_length"] = 999
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(EvidenceError, match="evidence_id"):
        load_evidence(bad)
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({"records": [rec]}))
    with pytest.raises(EvidenceError, match="bundle"):
        load_evidence(bundle)
    with pytest.raises(ViewError, match="re-hashed"):
        inspect_model_artifact(out, hash="full")
    assert not list(tmp_path.glob(".ev.json.*"))  # no temporaries left


def test_reordered_rows_in_a_record_are_rejected(model, tmp_path):
    from converters.inspect.evidence import seal

    rec = inspect_model_artifact(model)
    rec["tensors"] = rec["tensors"][::-1]
    seal(rec)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    with pytest.raises(EvidenceError, match="positional index"):
        load_evidence(p)
