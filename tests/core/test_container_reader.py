"""Reader rules, one crafted file per refusal (container spec §1, §3, §4, §5, §7, §8, §9, §11.1).

Files are hand-assembled (``test_container_fixtures``), never produced by the writer under test.
Each case checks the error type, its ``rule`` and where it points, and that ``validate`` reports it.
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from ninfer_core import open_artifact, validate
from ninfer_core.errors import (
    DirectoryReferenceError,
    EncodingError,
    FramingError,
    RangeError,
    ReadError,
    SchemaError,
)
from tests.support.container import (
    AID,
    PART_MAGIC,
    base_payload,
    base_root,
    entry_file,
    mutated,
    write_single,
)

U64 = 2**64


def _set(path: list, value):
    def change(root):
        node = root
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _delete(path: list):
    def change(root):
        node = root
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
    return change


def _do(*changes):
    def change(root):
        for c in changes:
            c(root)
    return change


# (id, change to the base directory, error type, rule, json_path)
DIRECTORY_CASES = [
    # §4.1 root field table
    ("root_unknown_field", _set(["extra"], 1), SchemaError, "unknown_field", "$.extra"),
    ("root_missing_uses", _delete(["uses"]), SchemaError, "missing_field", "$"),
    ("root_missing_files", _delete(["files"]), SchemaError, "missing_field", "$"),
    ("components_empty", _set(["components"], {}), SchemaError, "empty_collection", "$.components"),
    ("objects_empty", _set(["objects"], []), SchemaError, "empty_collection", "$.objects"),
    ("objects_not_array", _set(["objects"], {}), SchemaError, "field_type", "$.objects"),
    ("bindings_not_object", _set(["bindings"], []), SchemaError, "field_type", "$.bindings"),
    ("metadata_not_object", _set(["metadata"], "x"), SchemaError, "field_type", "$.metadata"),
    ("metadata_name_empty", _set(["metadata"], {"name": ""}), SchemaError, "metadata_name", "$.metadata.name"),
    # §4.2 components
    ("component_unknown_field", _set(["components", "text", "extra"], 1), SchemaError, "unknown_field",
     "$.components.text.extra"),
    ("component_missing_config", _delete(["components", "text", "config"]), SchemaError, "missing_field",
     "$.components.text"),
    ("component_config_not_object", _set(["components", "text", "config"], []), SchemaError, "field_type",
     "$.components.text.config"),
    ("component_target_missing", _set(["components", "mtp"], {"config": {}, "target": "vision"}),
     DirectoryReferenceError, "reference_missing", "$.components.mtp.target"),
    ("component_id_empty", _set(["components", ""], {"config": {}}), SchemaError, "id_rule", '$.components[""]'),
    ("resource_is_tensor", _set(["components", "text", "resources", "tokenizer.json"], "w.a"),
     DirectoryReferenceError, "reference_kind", '$.components.text.resources["tokenizer.json"]'),
    ("resource_missing", _set(["components", "text", "resources", "x"], "r.none"), DirectoryReferenceError,
     "reference_missing", "$.components.text.resources.x"),
    # §9.2 proposal
    ("proposal_not_on_text", _set(["components", "mtp"], {"config": {}, "proposal": {"domain": "full"}}),
     SchemaError, "proposal_placement", "$.components.mtp.proposal"),
    ("proposal_bad_domain", _set(["components", "text", "proposal"], {"domain": "some"}), SchemaError,
     "enum_value", "$.components.text.proposal.domain"),
    ("proposal_indexed_without_rows", _set(["components", "text", "proposal"], {"domain": "indexed"}),
     SchemaError, "proposal_rows", "$.components.text.proposal"),
    ("proposal_full_with_rows", _set(["components", "text", "proposal"], {"domain": "full", "rows": 3}),
     SchemaError, "proposal_rows", "$.components.text.proposal.rows"),
    ("proposal_unknown_field", _set(["components", "text", "proposal"], {"domain": "full", "x": 1}),
     SchemaError, "unknown_field", "$.components.text.proposal.x"),
    # §5.1 / §5.2 objects, §1 integer, ID and Shape rules
    ("object_unknown_field", _set(["objects", 0, "extra"], 1), SchemaError, "unknown_field", "$.objects[0].extra"),
    ("resource_with_shape", _set(["objects", 2, "shape"], [16]), SchemaError, "unknown_field",
     "$.objects[2].shape"),
    ("object_missing_bytes", _delete(["objects", 0, "bytes"]), SchemaError, "missing_field", "$.objects[0]"),
    ("object_kind_unknown", _set(["objects", 0, "kind"], "blob"), SchemaError, "object_kind", "$.objects[0].kind"),
    ("offset_negative", _set(["objects", 0, "offset"], -1), SchemaError, "u64_range", "$.objects[0].offset"),
    ("offset_beyond_u64", _set(["objects", 2, "offset"], U64), SchemaError, "u64_range", "$.objects[2].offset"),
    ("bytes_zero", _set(["objects", 2, "bytes"], 0), SchemaError, "u64_range", "$.objects[2].bytes"),
    ("bytes_float", _set(["objects", 2, "bytes"], 16.0), SchemaError, "field_type", "$.objects[2].bytes"),
    ("bytes_bool", _set(["objects", 2, "bytes"], True), SchemaError, "field_type", "$.objects[2].bytes"),
    ("bytes_string", _set(["objects", 2, "bytes"], "16"), SchemaError, "field_type", "$.objects[2].bytes"),
    ("offset_plus_bytes_overflow", _do(_set(["objects", 2, "offset"], U64 - 8)), SchemaError, "u64_overflow",
     "$.objects[2]"),
    ("id_empty", _set(["objects", 0, "id"], ""), SchemaError, "id_rule", "$.objects[0].id"),
    ("id_nul", _set(["objects", 0, "id"], "w\u0000a"), SchemaError, "id_rule", "$.objects[0].id"),
    ("id_lone_surrogate", _set(["objects", 0, "id"], "w\ud800"), SchemaError, "id_rule", "$.objects[0].id"),
    ("id_not_string", _set(["objects", 0, "id"], 7), SchemaError, "field_type", "$.objects[0].id"),
    ("format_empty", _set(["objects", 0, "format"], ""), SchemaError, "id_rule", "$.objects[0].format"),
    ("shape_rank_17", _set(["objects", 0, "shape"], [1] * 17), SchemaError, "shape_rule", "$.objects[0].shape"),
    ("shape_zero_dim", _set(["objects", 0, "shape"], [4, 0]), SchemaError, "shape_rule", "$.objects[0].shape[1]"),
    ("shape_negative_dim", _set(["objects", 0, "shape"], [-4, 4]), SchemaError, "shape_rule",
     "$.objects[0].shape[0]"),
    ("shape_not_list", _set(["objects", 0, "shape"], 16), SchemaError, "field_type", "$.objects[0].shape"),
    ("shape_elements_overflow", _set(["objects", 0, "shape"], [2**32, 2**32]), SchemaError, "u64_overflow",
     "$.objects[0].shape"),
    ("divisors_zero", _set(["objects", 0, "divisors"], 0), SchemaError, "u64_range", "$.objects[0].divisors"),
    ("divisors_not_nvfp4", _set(["objects", 0, "divisors"], 2), SchemaError, "divisors_not_allowed",
     "$.objects[0].divisors"),
    # §5.3 placement
    ("object_id_duplicate", _set(["objects", 1, "id"], "w.a"), SchemaError, "object_id_duplicate",
     "$.objects[1].id"),
    ("object_overlap", _set(["objects", 2, "offset"], 280), RangeError, "object_overlap", "$.objects[2]"),
    ("object_order", _set(["objects", 2, "offset"], 100), RangeError, "object_order", "$.objects[2].offset"),
    ("object_out_of_payload", _set(["objects", 2, "bytes"], 17), RangeError, "object_out_of_payload",
     "$.objects[2]"),
    ("tensor_misaligned", _do(_set(["objects", 1, "offset"], 128)), RangeError, "object_alignment",
     "$.objects[1].offset"),
    # §7.1 bindings and parts
    ("binding_both_forms", _set(["bindings", "text/a", "parts"], [{"object": "w.a", "range": [0, 1]}]),
     SchemaError, "binding_form", '$.bindings["text/a"]'),
    ("binding_no_form", _set(["bindings", "text/a"], {}), SchemaError, "binding_form", '$.bindings["text/a"]'),
    ("binding_unknown_field", _set(["bindings", "text/a", "shape"], [4, 4]), SchemaError, "unknown_field",
     '$.bindings["text/a"].shape'),
    ("binding_parts_empty", _set(["bindings", "text/a_rows", "parts"], []), SchemaError, "binding_form",
     '$.bindings["text/a_rows"].parts'),
    ("binding_object_missing", _set(["bindings", "text/a", "object"], "w.none"), DirectoryReferenceError,
     "reference_missing", '$.bindings["text/a"].object'),
    ("binding_to_resource", _set(["bindings", "text/a", "object"], "r.t"), DirectoryReferenceError,
     "reference_kind", '$.bindings["text/a"].object'),
    ("binding_name_empty", _set(["bindings", ""], {"object": "w.a"}), SchemaError, "id_rule", '$.bindings[""]'),
    ("part_unknown_field", _set(["bindings", "text/a_rows", "parts", 0, "shape"], [2]), SchemaError,
     "unknown_field", '$.bindings["text/a_rows"].parts[0].shape'),
    ("part_end_past_elements", _set(["bindings", "text/a_rows", "parts", 0, "range"], [4, 17]),
     DirectoryReferenceError, "part_range", '$.bindings["text/a_rows"].parts[0].range'),
    ("part_empty_range", _set(["bindings", "text/a_rows", "parts", 0, "range"], [4, 4]), DirectoryReferenceError,
     "part_range", '$.bindings["text/a_rows"].parts[0].range'),
    ("part_range_three", _set(["bindings", "text/a_rows", "parts", 0, "range"], [0, 1, 2]), SchemaError,
     "field_type", '$.bindings["text/a_rows"].parts[0].range'),
    ("part_range_negative", _set(["bindings", "text/a_rows", "parts", 0, "range"], [-1, 2]), SchemaError,
     "u64_range", '$.bindings["text/a_rows"].parts[0].range[0]'),
    ("part_object_missing", _set(["bindings", "text/a_rows", "parts", 0, "object"], "w.none"),
     DirectoryReferenceError, "reference_missing", '$.bindings["text/a_rows"].parts[0].object'),
    # §8 uses
    ("use_unknown_field", _set(["uses", 0, "extra"], 1), SchemaError, "unknown_field", "$.uses[0].extra"),
    ("use_missing_input", _delete(["uses", 0, "input"]), SchemaError, "missing_field", "$.uses[0]"),
    ("use_parameter_missing", _set(["uses", 0, "parameter"], "text/none"), DirectoryReferenceError,
     "reference_missing", "$.uses[0].parameter"),
    ("use_bad_policy", _set(["uses", 0, "activation_policy"], "AllowA2"), SchemaError, "enum_value",
     "$.uses[0].activation_policy"),
    ("use_policy_case", _set(["uses", 0, "activation_policy"], "a16only"), SchemaError, "enum_value",
     "$.uses[0].activation_policy"),
    ("use_duplicate", lambda r: r["uses"].append(dict(r["uses"][0])), SchemaError, "use_duplicate", "$.uses[1]"),
    ("use_auxiliary_not_binding", _set(["uses", 0, "auxiliaries"], {"hadamard_signs": "w.b"}), SchemaError,
     "field_type", "$.uses[0].auxiliaries.hadamard_signs"),
    ("use_auxiliary_missing_object", _set(["uses", 0, "auxiliaries"], {"d": {"object": "w.none"}}),
     DirectoryReferenceError, "reference_missing", "$.uses[0].auxiliaries.d.object"),
    # §3.3 files
    ("entry_path_not_null", _set(["files", 0, "path"], "a.ninfer"), SchemaError, "entry_path", "$.files[0].path"),
    ("file_unknown_field", _set(["files", 0, "sha"], "x"), SchemaError, "unknown_field", "$.files[0].sha"),
    ("file_payload_zero", _set(["files", 0, "payload_bytes"], 0), SchemaError, "u64_range",
     "$.files[0].payload_bytes"),
    ("files_empty", _set(["files"], []), SchemaError, "empty_collection", "$.files"),
]


@pytest.mark.parametrize("case", DIRECTORY_CASES, ids=[c[0] for c in DIRECTORY_CASES])
def test_directory_rule(tmp_path, case):
    _, change, error, rule, json_path = case
    path = write_single(tmp_path, mutated(change))
    with pytest.raises(error) as info:
        open_artifact(path)
    assert info.value.rule == rule
    assert info.value.json_path == json_path
    assert info.value.file == str(path)
    assert info.value.section  # every error cites the spec
    findings = validate(path)
    assert any(f.rule == rule and f.json_path == json_path and f.severity == "ERROR" for f in findings), findings


def test_base_fixture_is_valid(tmp_path):
    path = write_single(tmp_path)
    assert validate(path) == []
    with open_artifact(path) as art:
        assert art.artifact_id == AID.hex() and len(art.artifact_id) == 32
        assert [o.id for o in art.objects] == ["w.a", "w.b", "r.t"]
        assert art.object("w.b").offset == 256 and art.object("w.b").kind == "tensor"
        assert art.object("r.t").encoding == "raw_bytes_v1" and art.object("r.t").shape is None
        assert art.resource("r.t") == b"tokenizer-bytes!"
        assert art.components["text"].resources["tokenizer.json"] == "r.t"
        assert art.uses[0].activation_policy == "A16Only"
        assert art.metadata == {} and art.provenance == {}
        assert art.files[0].path is None and art.files[0].location == path


# ---- framing and JSON text (§1, §3.1) ------------------------------------------------------------


def _raw_cases():
    payload = base_payload()
    root = base_root([len(payload)])
    good = entry_file(root, payload)
    text = entry_file(root, payload)[32:]
    jb = struct.unpack_from("<Q", good, 8)[0]
    return [
        ("empty_file", b"", FramingError, "entry_too_short"),
        ("short_header", good[:20], FramingError, "entry_too_short"),
        ("bad_magic", b"NINFER\x00\x02" + good[8:], FramingError, "entry_magic"),
        ("part_magic_as_entry", PART_MAGIC + good[8:], FramingError, "entry_magic"),
        ("json_bytes_zero", good[:8] + struct.pack("<Q", 0) + good[16:], FramingError, "json_bytes_range"),
        ("json_bytes_past_eof", good[:8] + struct.pack("<Q", len(good)) + good[16:], FramingError,
         "json_bytes_range"),
        ("json_bytes_huge", good[:8] + struct.pack("<Q", 2**64 - 1) + good[16:], FramingError, "json_too_large"),
        ("json_not_utf8", entry_file(b'{"a": "\xff"}', payload), SchemaError, "json_utf8"),
        ("json_bom", entry_file(b"\xef\xbb\xbf" + text[:jb], payload), SchemaError, "json_syntax"),
        ("json_syntax", entry_file(b'{"components": ', payload), SchemaError, "json_syntax"),
        ("json_nan", entry_file(b'{"x": NaN}', payload), SchemaError, "json_syntax"),
        ("json_deep", entry_file(b"[" * 100000 + b"]" * 100000, payload), SchemaError, "json_syntax"),
        ("json_trailing_garbage", entry_file(json_dump(root) + b" x", payload), SchemaError, "json_syntax"),
        ("json_root_array", entry_file(b"[]", payload), SchemaError, "field_type"),
        ("entry_too_long", good + b"\x00", FramingError, "entry_length"),
        ("entry_truncated", good[:-1], FramingError, "entry_length"),
    ]


def json_dump(root) -> bytes:
    import json

    return json.dumps(root).encode()


RAW_CASES = _raw_cases()


@pytest.mark.parametrize("case", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_framing_rule(tmp_path, case):
    _, data, error, rule = case
    path = tmp_path / "a.ninfer"
    path.write_bytes(data)
    with pytest.raises(error) as info:
        open_artifact(path)
    assert info.value.rule == rule and info.value.file == str(path)
    assert [f.rule for f in validate(path) if f.severity == "ERROR"][0] == rule


def test_missing_entry_is_a_read_error(tmp_path):
    with pytest.raises(ReadError) as info:
        open_artifact(tmp_path / "none.ninfer")
    assert info.value.rule == "entry_missing"
    with pytest.raises(ReadError) as info:
        open_artifact(tmp_path)  # a directory is not an entry file
    assert info.value.rule == "entry_unreadable"


def test_file_truncated_after_open_is_a_read_error(tmp_path):
    path = write_single(tmp_path)
    with open_artifact(path) as art:
        os.truncate(path, os.path.getsize(path) - 100)
        with pytest.raises(ReadError) as info:
            art.read_range(0, 64)  # would be mapped: checked first instead of a SIGBUS
        assert info.value.rule == "short_read"
        with pytest.raises(ReadError) as info:
            art.readinto(200, bytearray(100))  # pread: EOF inside the declared range
        assert info.value.rule == "short_read"


@pytest.mark.parametrize("where", ["root", "object", "config", "metadata"])
def test_duplicate_member_names_rejected_anywhere(tmp_path, where):
    payload = base_payload()
    text = json_dump(base_root([len(payload)]))
    needle = {"root": (b'{"components"', b'{"uses": [], "components"', "$.uses"),
              "object": (b'"id": "w.b",', b'"id": "w.b", "id": "w.c",', "$.objects[1].id"),
              "config": (b'"hidden_size": 4', b'"hidden_size": 4, "hidden_size": 5',
                         "$.components.text.config.hidden_size"),
              "metadata": (b'{"components"', b'{"metadata": {"n": 1, "n": 1}, "components"', "$.metadata.n")}[where]
    assert needle[0] in text
    path = tmp_path / "a.ninfer"
    path.write_bytes(entry_file(text.replace(needle[0], needle[1], 1), payload))
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert info.value.rule == "json_duplicate_key" and info.value.json_path == needle[2]


def test_open_fields_stay_open(tmp_path):
    root = base_root([len(base_payload())])
    root["components"]["text"]["config"]["anything"] = {"nested": [1, 2.5, None]}
    root["metadata"] = {"name": "x", "custom": True}
    root["provenance"] = {"source": {"sha256": "00"}, "free": [1]}
    path = write_single(tmp_path, root)
    with open_artifact(path) as art:
        assert art.components["text"].config["anything"] == {"nested": [1, 2.5, None]}
        assert art.metadata["custom"] is True and art.provenance["free"] == [1]


def test_validate_reports_every_problem(tmp_path):
    def change(root):
        root["extra"] = 1
        root["objects"][1]["id"] = "w.a"
        root["bindings"]["text/b"] = {"object": "w.none"}
        root["uses"][0]["activation_policy"] = "Sometimes"
        root["objects"][2]["offset"] = 280
    path = write_single(tmp_path, mutated(change))
    findings = validate(path)
    rules = {(f.rule, f.json_path) for f in findings}
    assert {("unknown_field", "$.extra"), ("object_id_duplicate", "$.objects[1].id"),
            ("reference_missing", '$.bindings["text/b"].object'),
            ("enum_value", "$.uses[0].activation_policy"), ("object_overlap", "$.objects[2]")} <= rules
    assert all(f.severity == "ERROR" and f.file == str(path) for f in findings)
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert "more problem" in str(info.value)


def test_unknown_resource_encoding_reported_on_interpretation(tmp_path):
    path = write_single(tmp_path, mutated(_set(["objects", 2, "encoding"], "zstd_v9")))
    with open_artifact(path) as art:  # §11.1: the generic reader keeps the name
        assert art.object("r.t").encoding == "zstd_v9"
        with pytest.raises(EncodingError) as info:
            art.resource("r.t")
        assert info.value.rule == "unknown_encoding" and info.value.json_path == "$.objects[2].encoding"
        assert bytes(art.read_range(288, 16)) == b"tokenizer-bytes!"
    assert [f.rule for f in validate(path)] == ["unknown_encoding"]


def test_unknown_format_reported_on_interpretation(tmp_path):
    path = write_single(tmp_path, mutated(_do(_set(["objects", 1, "format"], "fp64x"))))
    with open_artifact(path) as art:
        assert art.object("w.b").format == "fp64x"
        assert art.binding_array("text/a").tolist() == np.arange(16, dtype=np.float32).reshape(4, 4).tolist()
        with pytest.raises(EncodingError) as info:
            art.object_bytes("w.b")
        assert info.value.json_path == "$.objects[1]" and info.value.rule == "unknown_format"
        with pytest.raises(EncodingError):
            art.binding_array("text/b")
    assert [(f.rule, f.json_path) for f in validate(path)] == [("unknown_format", "$.objects[1]")]


def test_encoded_size_checked_on_interpretation(tmp_path):
    root = mutated(_do(_set(["objects", 1, "bytes"], 28), _set(["objects", 1, "shape"], [8])))
    path = write_single(tmp_path, root)
    with open_artifact(path) as art:
        with pytest.raises(EncodingError) as info:
            art.object_bytes("w.b")
        assert info.value.rule == "object_encoded_size" and info.value.json_path == "$.objects[1].bytes"
    assert "object_encoded_size" in [f.rule for f in validate(path)]


def test_codec_findings_in_validate(tmp_path):
    payload = bytearray(base_payload())
    payload[256:260] = np.array([np.nan], dtype="<f4").tobytes()  # fp32 NaN is a value, not a finding
    path = write_single(tmp_path, payload=bytes(payload))
    assert [f for f in validate(path) if f.severity == "ERROR"] == []


def test_alignment_zone_nonzero_is_a_warning(tmp_path):
    path = write_single(tmp_path, zone=b"junk")
    with open_artifact(path):
        pass  # the reader does not fail on it
    findings = validate(path)
    assert [(f.rule, f.severity) for f in findings] == [("alignment_zone_nonzero", "WARNING")]


def test_read_range_rules(tmp_path):
    path = write_single(tmp_path)
    with open_artifact(path) as art:
        assert art.payload_bytes == 304
        assert bytes(art.read_range(304, 0)) == b""
        assert bytes(art.read_range(0, 0)) == b""
        for off, n in [(300, 5), (305, 0), (-1, 1), (0, 305)]:
            with pytest.raises(RangeError) as info:
                art.read_range(off, n)
            assert info.value.rule == "read_range"
        view = art.read_range(4, 8)
        assert view.readonly and np.frombuffer(view, "<f4").tolist() == [1.0, 2.0]


def test_object_bytes_is_zero_copy_in_one_file(tmp_path):
    path = write_single(tmp_path)
    with open_artifact(path) as art:
        view = art.object_bytes("w.a")
        assert isinstance(view, memoryview) and view.readonly and len(view) == 64
        assert np.frombuffer(view, "<f4").tolist() == list(range(16))
    assert bytes(view[:4]) == np.float32(0).tobytes()  # the mapping outlives close()


def test_binding_array_shapes(tmp_path):
    path = write_single(tmp_path)
    with open_artifact(path) as art:
        assert art.binding_array("text/a").shape == (4, 4)
        rows = art.binding_array("text/a_rows")
        assert rows.dtype == np.float32 and rows.tolist() == list(range(4, 12))
        assert art.binding_array("text/a_rows", shape=(2, 4)).tolist() == [[4, 5, 6, 7], [8, 9, 10, 11]]
        assert art.binding_array("text/a", shape=[2, 2, 4])[1, 1].tolist() == [12, 13, 14, 15]
        with pytest.raises(RangeError) as info:
            art.binding_array("text/a_rows", shape=(3, 4))
        assert info.value.rule == "binding_coverage" and info.value.json_path == '$.bindings["text/a_rows"]'
        with pytest.raises(DirectoryReferenceError) as info:
            art.binding_array("text/none")
        assert info.value.rule == "reference_missing"
        with pytest.raises(DirectoryReferenceError):
            art.resource("w.a")
        with pytest.raises(DirectoryReferenceError):
            art.object("nope")


def test_parsed_records_follow_the_json(tmp_path):
    root = base_root([len(base_payload())])
    root["components"]["text"]["proposal"] = {"domain": "indexed", "rows": 7}
    root["components"]["mtp"] = {"config": {"architectures": ["Qwen3_5MTP"]}, "target": "text"}
    root["uses"][0]["auxiliaries"] = {"activation_input_divisor": {"parts": [{"object": "w.b", "range": [2, 3]}]}}
    path = write_single(tmp_path, root)
    with open_artifact(path) as art:
        assert art.components["text"].proposal.rows == 7 and art.components["mtp"].target == "text"
        aux = art.uses[0].auxiliaries["activation_input_divisor"]
        assert aux.parts[0].range == (2, 3)
        assert art.binding_array(aux, shape=()).tolist() == 102.0
        assert art.directory.to_json()["uses"] == root["uses"]
        assert art.directory.to_json()["components"] == root["components"]
