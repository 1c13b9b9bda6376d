"""Evidence records of GGUF, safetensors and sharded directories: typed metadata, rows, totals,
limitations, chat templates, header vs full hashing (docs/inspect.md)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from safetensors.numpy import save_file

from converters.inspect import inspect_model_artifact
from converters.inspect.evidence import SCHEMA, canonical
from tests.support.hf import SHARD1, SHARD2, make_sharded
from tests.support.sources import RawGGUF, raw_safetensors, writer_gguf


def _f32(n):
    return np.zeros(n, dtype="<f4").tobytes()


@pytest.fixture
def typed_gguf(tmp_path):
    raw = RawGGUF().kv("general.architecture", V.STRING, "qwen35").kv("general.name", V.STRING, "tiny")
    raw.kv("x.u64", V.UINT64, 2**64 - 1).kv("x.i64", V.INT64, -(2**63)).kv("x.u32", V.UINT32, 4000000000)
    raw.kv("x.nan", V.FLOAT32, float("nan")).kv("x.pinf", V.FLOAT64, float("inf"))
    raw.kv("x.ninf", V.FLOAT32, float("-inf")).kv("x.negzero", V.FLOAT32, -0.0).kv("x.eps", V.FLOAT32, 1e-6)
    raw.kv("x.flag", V.BOOL, 1)
    raw.kv("tokenizer.ggml.tokens", V.ARRAY, [f"tok{i}" for i in range(10)], V.STRING)
    raw.kv("x.short", V.ARRAY, [1, 2, 3], V.INT64)
    raw.kv("x.nested", V.ARRAY, [([1, 2], V.UINT8), ([3], V.UINT8)], V.ARRAY)
    raw.kv("tokenizer.chat_template", V.STRING, "{{ default }}")
    raw.kv("tokenizer.chat_template.tool_use", V.STRING, "{{ tools }}")
    raw.kv("tokenizer.chat_templates", V.ARRAY, ["tool_use", "rag"], V.STRING)
    raw.tensor("token_embd.weight", [64, 3], Q.F32, _f32(192))
    raw.tensor("blk.0.ffn_down.weight", [256, 2], Q.Q4_K, b"\0" * 288)
    raw.tensor("blk.0.x", [256], 23, b"\0" * 136)
    raw.tensor("blk.0.y", [256], 23, b"\0" * 136)
    raw.tensor("empty", [0, 5], 9)
    return raw.write(tmp_path / "typed.gguf")


def test_gguf_evidence_typed_metadata(typed_gguf):
    ev = inspect_model_artifact(typed_gguf)
    md = {r["key"]: r for r in ev["metadata"]}
    assert md["x.u64"] == {"index": 2, "key": "x.u64", "type": "UINT64", "value": "18446744073709551615"}
    assert md["x.i64"]["value"] == "-9223372036854775808" and md["x.u32"]["value"] == 4000000000
    assert (md["x.nan"]["value"], md["x.nan"]["type"]) == ("NaN", "FLOAT32")
    assert (md["x.pinf"]["value"], md["x.pinf"]["type"]) == ("+Infinity", "FLOAT64")
    assert md["x.ninf"]["value"] == "-Infinity" and md["x.negzero"]["value"] == "-0"
    assert md["x.eps"]["value"] == 1e-06 and md["x.flag"]["value"] is True
    tok = md["tokenizer.ggml.tokens"]
    assert (tok["element_type"], tok["count"], tok["preview_complete"]) == ("STRING", "10", False)
    assert tok["preview"] == [f"tok{i}" for i in range(8)]
    assert md["x.short"]["preview"] == ["1", "2", "3"] and md["x.short"]["preview_complete"] is True
    nested = md["x.nested"]
    assert nested["element_type"] == "ARRAY" and nested["preview"][0]["preview"] == [1, 2]
    assert ev["chat_template"] == {"present": True, "default": True, "named": ["tool_use"],
                                   "listed_without_content": ["rag"], "source": "gguf_metadata"}
    json.dumps(ev, allow_nan=False)  # strict JSON: no bare NaN/Infinity anywhere


def test_gguf_evidence_rows_totals_limitations(typed_gguf):
    ev = inspect_model_artifact(typed_gguf)
    assert ev["schema"] == SCHEMA and ev["status"] == "complete" and ev["format"] == "gguf"
    t = ev["tensors"]
    assert [r["index"] for r in t] == list(range(5))
    assert t[0]["shape"] == ["64", "3"] and t[0]["byte_length"] == 768 and t[0]["parameter_count"] == 192
    assert (t[1]["type"], t[1]["type_id"], t[1]["byte_length"], t[1]["storage_validation"]) == (
        "Q4_K", 12, None, "unknown")
    assert t[2]["type"] == "AMBIGUOUS_23" and t[4]["byte_length"] == 0
    types = {r["type"]: r for r in ev["types"]}
    assert types["F32"]["bytes"] == 768 and types["Q4_K"]["bytes"] is None
    assert types["AMBIGUOUS_23"]["tensor_count"] == 2 and types["AMBIGUOUS_23"]["parameter_count"] == 512
    assert ev["totals"]["bytes"] is None and ev["totals"]["parameter_count"] == 192 + 512 + 512
    assert ev["totals"]["tensors_with_unknown_bytes"] == 3
    lims = {lim["code"]: lim for lim in ev["limitations"]}
    assert lims["k_quant_block_unknown"]["tensors"] == [1]
    assert lims["type_id_ambiguous"]["tensors"] == [2, 3]
    assert "IQ4_XS" in lims["type_id_ambiguous"]["candidates"] and "I32" in lims["type_id_ambiguous"]["candidates"]
    assert "q8_1_layout_unknown" not in lims  # the empty Q8_1 tensor has a derived zero length
    assert ev["coverage"]["storage_sizes"] == "partial"
    assert any("total bytes" in u for u in ev["unknowns"])


def test_header_mode_reads_only_the_header_and_full_mode_hashes_everything(typed_gguf):
    data = typed_gguf.read_bytes()
    ev = inspect_model_artifact(typed_gguf)
    art = ev["artifact"]
    n = art["header_length"]
    assert art["bytes_read"] == n and art["ranges_read"] == [[0, n]] and n < len(data)
    assert art["header_sha256"] == hashlib.sha256(data[:n]).hexdigest()
    assert art["sha256"] is None and ev["body"] is None and ev["coverage"]["digest"] == "not_requested"
    assert art["identity"] == "verified" and art["size"] == len(data)
    full = inspect_model_artifact(typed_gguf, hash="full", buffer_bytes=64)
    assert full["artifact"]["sha256"] == hashlib.sha256(data).hexdigest() == full["body"]["sha256"]
    assert full["artifact"]["header_sha256"] == art["header_sha256"]
    assert full["artifact"]["bytes_read"] == len(data) and full["coverage"]["digest"] == "complete"
    assert full["tensors"] == ev["tensors"]


def test_evidence_id_is_the_digest_of_the_record(typed_gguf):
    ev = inspect_model_artifact(typed_gguf)
    assert ev["evidence_id"] == "sha256:" + hashlib.sha256(canonical(ev)).hexdigest()
    assert inspect_model_artifact(typed_gguf)["evidence_id"] == ev["evidence_id"]  # deterministic


def test_gguf_writer_llama_style_evidence(tmp_path):
    emb = np.ones((8, 32), np.float32)
    writer_gguf(tmp_path / "w.gguf", tensors={"token_embd.weight": emb},
                kv=lambda w: w.add_array("tokenizer.ggml.tokens", [str(i) for i in range(300)]))
    ev = inspect_model_artifact(tmp_path / "w.gguf")
    assert ev["details"]["version"] == 3 and ev["details"]["byte_order"] == "little"
    assert ev["details"]["alignment_source"] == "default" and ev["details"]["alignment"] == 32
    assert ev["tensors"][0]["file_offset"] == ev["details"]["data_offset"]
    assert ev["chat_template"]["present"] is False


def test_safetensors_evidence_rows_in_name_order(tmp_path):
    save_file({"z": np.zeros((2, 2), np.float32), "a": np.zeros(3, np.float16)}, tmp_path / "m.st",
              metadata={"format": "pt"})
    ev = inspect_model_artifact(tmp_path / "m.st", hash="full")
    assert ev["format"] == "safetensors"
    assert [r["name"] for r in ev["tensors"]] == ["a", "z"]
    assert ev["tensors"][1]["shape"] == ["2", "2"] and ev["tensors"][1]["type_id"] is None
    assert ev["metadata"] == [{"index": 0, "key": "format", "type": "STRING", "value": "pt"}]
    data = (tmp_path / "m.st").read_bytes()
    assert ev["artifact"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert ev["artifact"]["header_length"] == 8 + int.from_bytes(data[:8], "little")


def test_safetensors_unknown_dtype_and_huge_empty_dims(tmp_path):
    hdr = {"e": {"dtype": "F16", "shape": [0, 2**60], "data_offsets": [0, 0]},
           "w": {"dtype": "F9_SOMETHING", "shape": [3], "data_offsets": [0, 5]}}
    (tmp_path / "u.st").write_bytes(raw_safetensors(hdr, b"12345"))
    ev = inspect_model_artifact(tmp_path / "u.st")
    rows = {r["name"]: r for r in ev["tensors"]}
    assert rows["e"]["shape"] == ["0", str(2**60)] and rows["e"]["byte_length"] == 0
    assert rows["w"]["storage_validation"] == "unknown" and rows["w"]["byte_length"] == 5
    assert ev["limitations"][0]["code"] == "unknown_dtype" and ev["coverage"]["storage_sizes"] == "complete"


def test_sharded_directory_evidence(tmp_path):
    make_sharded(tmp_path / "m")
    (tmp_path / "m" / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": [{"name": "default", "template": "x"}, {"name": "tool_use", "template": "y"}]}))
    ev = inspect_model_artifact(tmp_path / "m", hash="full")
    assert ev["format"] == "safetensors-sharded" and ev["status"] == "complete"
    assert [r["file"] for r in ev["tensors"]] == [SHARD1, SHARD1, SHARD2]
    assert ev["details"]["index"]["total_size_matches"] is True
    names = [f["name"] for f in ev["artifact"]["files"]]
    assert names[:2] == ["config.json", "model.safetensors.index.json"] and SHARD2 in names
    for f in ev["artifact"]["files"]:
        assert f["sha256"] == hashlib.sha256((tmp_path / "m" / f["name"]).read_bytes()).hexdigest()
    assert ev["chat_template"]["present"] and ev["chat_template"]["named"] == ["tool_use"]
    assert ev["artifact"]["sha256"] is not None and ev["artifact"]["kind"] == "directory"
