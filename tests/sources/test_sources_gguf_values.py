"""Metadata values ggml loads are reported, not refused (docs/inspect.md §Non-canonical metadata values):
non-UTF-8 strings keep their bytes, BOOL bytes other than 0/1 read true; identifiers stay strict; the
converters get text or a typed error. Also alignment 1/2/4 and metadata-only files
(docs/inspect.md §Metadata-only files)."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

from converters.errors import SourceFormatError
from converters.inspect import inspect_model_artifact
from converters.sources import open_gguf
from converters.sources.gguf_values import NonUTF8String
from tests.support.sources import RawGGUF


def _f32(n):
    return np.arange(n, dtype="<f4").tobytes()


@pytest.fixture
def odd_values(tmp_path):
    """Every place a non-canonical value can sit: scalar, preview element, element past the preview,
    nested array element."""
    raw = (RawGGUF().kv("general.architecture", V.STRING, "x")
           .kv("a.s", V.STRING, b"ok\xc3\x28")
           .kv("a.b", V.BOOL, 186)
           .kv("a.strs", V.ARRAY, [b"t0", b"\xff"] + [b"t"] * 10 + [b"\xfe\x41", b"\x80"], V.STRING)
           .kv("a.bools", V.ARRAY, [1, 0, 2] + [0] * 10 + [7, 9], V.BOOL)
           .kv("a.nested", V.ARRAY, [([b"x"], V.STRING), ([b"y", b"\xc0"], V.STRING)], V.ARRAY)
           .tensor("t", [4], Q.F32, _f32(4)))
    return raw.write(tmp_path / "odd.gguf")


def test_inspect_reports_exact_bytes_and_ggml_truth(odd_values):
    record = inspect_model_artifact(odd_values)
    rows = {r["key"]: r for r in record["metadata"]}
    assert rows["a.s"]["value"] == {"bytes_hex": "6f6bc328", "utf8_error_at": 2}
    assert rows["a.s"]["limitations"] == [{"code": "string_not_utf8", "count": 1,
                                           "first": {"element": "", "byte": 2}}]
    assert rows["a.b"]["value"] is True
    assert rows["a.b"]["limitations"] == [{"code": "bool_not_canonical", "count": 1,
                                           "first": {"element": "", "raw_byte": 186}}]
    strs = rows["a.strs"]
    assert strs["preview"][:2] == ["t0", {"bytes_hex": "ff", "utf8_error_at": 0}] and len(strs["preview"]) == 8
    assert strs["limitations"] == [{"code": "string_not_utf8", "count": 3, "first": {"element": "[1]", "byte": 0}}]
    bools = rows["a.bools"]
    assert bools["preview"][:3] == [True, False, True]
    assert bools["limitations"] == [{"code": "bool_not_canonical", "count": 3,
                                     "first": {"element": "[2]", "raw_byte": 2}}]
    assert rows["a.nested"]["limitations"] == [{"code": "string_not_utf8", "count": 1,
                                                "first": {"element": "[1][1]", "byte": 0}}]
    by_code = {lim["code"]: lim for lim in record["limitations"]}
    assert by_code["string_not_utf8"]["metadata"] == [rows[k]["index"] for k in ("a.s", "a.strs", "a.nested")]
    assert by_code["bool_not_canonical"]["metadata"] == [rows[k]["index"] for k in ("a.b", "a.bools")]
    assert "limitations" not in rows["general.architecture"]


def test_bool_elements_past_the_preview_are_counted_from_the_first(tmp_path):
    path = RawGGUF().kv("a.bools", V.ARRAY, [0] * 9 + [0, 3, 1, 4], V.BOOL).write(tmp_path / "b.gguf")
    (row,) = inspect_model_artifact(path)["metadata"]
    assert row["limitations"] == [{"code": "bool_not_canonical", "count": 2,
                                   "first": {"element": "[10]", "raw_byte": 3}}]


def test_converters_get_text_or_a_typed_error_naming_the_value(odd_values):
    with open_gguf(odd_values) as src:
        meta = src.metadata
        assert meta["general.architecture"] == "x"
        assert meta["a.b"] is True and meta["a.bools"][:3] == [True, False, True]
        with pytest.raises(SourceFormatError) as ei:
            meta["a.strs"]
        assert ei.value.rule == "gguf_string_utf8" and ei.value.json_path == "a.strs[1]"
        assert "byte 0" in str(ei.value) and str(odd_values) in str(ei.value)
        exact = meta.exact("a.strs")
        assert exact[0] == "t0" and exact[1] == NonUTF8String(b"\xff", 0, "invalid start byte")
        assert meta.exact("a.s").raw == b"ok\xc3\x28"
        assert src.array("t").tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("name", [b"t\xff", b"\xc3"])
def test_tensor_names_stay_strict_utf8(tmp_path, name):
    path = RawGGUF().tensor(name, [1], Q.F32, _f32(1)).write(tmp_path / "n.gguf")
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(path)
    assert ei.value.rule == "gguf_string_utf8" and ei.value.json_path == "tensor_infos[0].name"


@pytest.mark.parametrize("alignment", [1, 2, 4])
def test_powers_of_two_below_8_are_accepted_and_noted(tmp_path, alignment):
    raw = RawGGUF(alignment=alignment).kv("general.alignment", V.UINT32, alignment)
    raw.tensor("a", [3], Q.F16, b"\1" * 6).tensor("b", [1], Q.F32, _f32(1))
    record = inspect_model_artifact(raw.write(tmp_path / "a.gguf"))
    assert record["details"]["alignment"] == alignment
    assert [r["relative_offset"] for r in record["tensors"]] == [0, -(-6 // alignment) * alignment]
    assert "alignment_below_spec" in {lim["code"] for lim in record["limitations"]}
    with open_gguf(tmp_path / "a.gguf") as src:
        assert src.array("b").tolist() == [0.0]


def _meta_only(tmp_path, *tensors):
    raw = RawGGUF().kv("general.architecture", V.STRING, "x")
    for name, dims, qtype, nbytes, offset in tensors:
        raw.tensor(name, dims, qtype, b"\0" * nbytes, offset=offset)
    raw.data = bytearray()
    return raw.write(tmp_path / "meta.gguf")


def test_metadata_only_file_is_inspected_and_refused_by_the_converters(tmp_path):
    path = _meta_only(tmp_path, ("a", [64], Q.F32, 256, 0), ("b", [32], Q.Q8_0, 34, 256))
    record = inspect_model_artifact(path, hash="full")
    assert record["details"]["data_present"] is False
    assert record["details"]["data_offset"] == path.stat().st_size
    (lim,) = [lim for lim in record["limitations"] if lim["code"] == "tensor_data_absent"]
    assert lim["tensors"] == [0, 1]
    with pytest.raises(SourceFormatError) as ei:
        open_gguf(path)
    assert ei.value.rule == "gguf_tensor_range"


def test_metadata_only_directory_is_still_checked(tmp_path):
    path = _meta_only(tmp_path, ("a", [64], Q.F32, 256, 0), ("b", [8], Q.F32, 32, 128))
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(path)
    assert ei.value.rule == "gguf_tensor_overlap" and "a: 256 bytes" in str(ei.value)


def test_a_file_cut_inside_the_last_padding_is_refused_as_truncated(tmp_path):
    raw = RawGGUF().tensor("a", [3], Q.F32, _f32(3))
    data = raw.build()
    path = tmp_path / "u.gguf"
    path.write_bytes(data[:-20])  # 12 tensor bytes stay; 20 of the 32-byte padding unit go
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(path)
    assert ei.value.rule == "gguf_data_padding" and "20 byte(s)" in str(ei.value)
    path.write_bytes(data)  # whole: accepted
    assert inspect_model_artifact(path)["tensors"][0]["name"] == "a"


def test_summary_counts_the_metadata_rows_of_a_value_limitation(odd_values, tmp_path):
    s = inspect_model_artifact(odd_values, detail="summary")
    shown = {w["code"]: w for w in s["warnings"]["shown"]}
    assert shown["string_not_utf8"]["metadata_count"] == 3 and shown["bool_not_canonical"]["metadata_count"] == 2
    meta_only = _meta_only(tmp_path, ("a", [64], Q.F32, 256, 0))
    assert any(u.startswith("tensor data: a metadata-only file") for u in inspect_model_artifact(meta_only)["unknowns"])
