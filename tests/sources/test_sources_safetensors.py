"""The strict safetensors reader: files written by ``safetensors.numpy``, values, and one hand-built
variant per rejection rule (docs/inspect.md §Boundaries: typed ``file_format_rejected`` constraints)."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from converters.errors import SourceFormatError
from converters.sources import open_safetensors, open_source
from converters.sources.safetensors import SafetensorsSource
from tests.support.sources import raw_safetensors


def _reject(path):
    with pytest.raises(SourceFormatError) as ei:
        open_safetensors(path).close()
    e = ei.value
    assert e.code == "target_unavailable" and e.category in ("file_format_rejected", "limit_exceeded")
    assert str(path) in str(e)
    return e


def test_safetensors_numpy_file_reads_back(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float16)
    c = rng.integers(-9, 9, size=(2, 2)).astype(np.int64)
    bf = rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16)
    save_file({"b": b, "a": a, "c": c}, tmp_path / "m.safetensors", metadata={"format": "np", "k": "v"})
    with open_source(tmp_path / "m.safetensors") as s:
        assert isinstance(s, SafetensorsSource) and s.kind == "safetensors"
        assert s.metadata == {"format": "np", "k": "v"}
        assert {n: (t.dtype, t.shape) for n, t in s.tensors.items()} == {
            "a": ("F32", (3, 5)), "b": ("F16", (7,)), "c": ("I64", (2, 2))}
        np.testing.assert_array_equal(s.array("a"), a)
        np.testing.assert_array_equal(s.array("b"), b.astype(np.float32))
        np.testing.assert_array_equal(s.array("c"), c.astype(np.float32))
        assert s.raw("a").tobytes() == a.tobytes() and not s.raw("a").flags.writeable
        # tensors listed in file (data-offset) order; every range tiles the buffer
        offs = [t.file_offset for t in s.tensors.values()]
        assert offs == sorted(offs)
        assert s.header.bytes_read == s.header.header_length == 8 + s.header.json_length
    hdr = {"x": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}
    (tmp_path / "bf.safetensors").write_bytes(raw_safetensors(hdr, bf.tobytes()))
    with open_safetensors(tmp_path / "bf.safetensors") as s:
        np.testing.assert_array_equal(s.array("x"), bf.astype(np.float32))


def test_bf16_widening_is_ml_dtypes_cast_for_every_bit_pattern(tmp_path):
    # the one-pass widening (docs/imatrix.md §Requantization speed) gives ml_dtypes' float32 bits for all
    # 65536 patterns: signed zeros, subnormals, infinities and NaN payloads
    bits = np.arange(1 << 16, dtype="<u2").reshape(256, 256)
    hdr = {"x": {"dtype": "BF16", "shape": [256, 256], "data_offsets": [0, bits.nbytes]}}
    (tmp_path / "all.safetensors").write_bytes(raw_safetensors(hdr, bits.tobytes()))
    want = bits.view(ml_dtypes.bfloat16).astype(np.float32)
    with open_safetensors(tmp_path / "all.safetensors") as s:
        got = s.array("x")
    assert got.dtype == np.float32 and got.shape == (256, 256)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _hdr(**tensors):
    return {k: {"dtype": d, "shape": s, "data_offsets": o} for k, (d, s, o) in tensors.items()}


BAD = {
    "header_too_small": (b"\x01\x00\x00", "st_header_too_small"),
    "header_cap": (struct.pack("<Q", 100_000_001) + b"{}", "header_cap"),
    "header_past_eof": (struct.pack("<Q", 64) + b"{}      ", "st_header_length"),
    "header_start": (raw_safetensors(' {"a": 1}'), "st_header_start"),
    "invalid_utf8": (raw_safetensors(b'{"a\xff": {}}'), "st_json_utf8"),
    "duplicate_key": (raw_safetensors('{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
                                      '"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"x"),
                      "st_json_duplicate_key"),
    "duplicate_nested_key": (raw_safetensors('{"a": {"dtype": "U8", "dtype": "U8", "shape": [1], '
                                             '"data_offsets": [0, 1]}}', b"x"), "st_json_duplicate_key"),
    "duplicate_metadata_key": (raw_safetensors('{"__metadata__": {"k": "1", "k": "2"}}'), "st_json_duplicate_key"),
    "nan_constant": (raw_safetensors('{"__metadata__": {"k": NaN}}'), "st_json_syntax"),
    "syntax": (raw_safetensors('{"a": }'), "st_json_syntax"),
    "nesting_33": (raw_safetensors('{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": '
                                   + "[" * 31 + "]" * 31 + "}}", b"x"), "st_json_nesting"),
    "lone_surrogate": (raw_safetensors('{"__metadata__": {"k": "\\ud800"}}'), "st_json_utf8"),
    "tensor_not_object": (raw_safetensors('{"a": 5}'), "st_tensor_entry"),
    "offsets_not_pair": (raw_safetensors(_hdr(a=("U8", [1], [0, 1, 2])), b"x"), "st_tensor_entry"),
    "metadata_not_string": (raw_safetensors('{"__metadata__": {"k": 1}}'), "st_metadata_type"),
    "missing_dtype": (raw_safetensors({"a": {"shape": [1], "data_offsets": [0, 1]}}, b"x"), "st_tensor_entry"),
    "shape_negative": (raw_safetensors(_hdr(a=("U8", [-1], [0, 1])), b"x"), "st_u64"),
    "shape_float": (raw_safetensors(_hdr(a=("U8", [1.0], [0, 1])), b"x"), "st_u64"),
    "shape_bool": (raw_safetensors(_hdr(a=("U8", [True], [0, 1])), b"x"), "st_u64"),
    "shape_over_u64": (raw_safetensors(_hdr(a=("U8", [2**64], [0, 0]))), "st_u64"),
    "offsets_order": (raw_safetensors(_hdr(a=("U8", [0], [1, 0])), b"x"), "st_offsets_order"),
    "overflow_in_declared_order": (raw_safetensors(_hdr(a=("U8", [2**40, 2**40, 0], [0, 0]))),
                                   "st_shape_overflow"),
    "byte_length": (raw_safetensors(_hdr(a=("F32", [2], [0, 4])), b"1234"), "st_byte_length"),
    "packed_partial_byte": (raw_safetensors(_hdr(a=("F4", [3], [0, 2])), b"12"), "st_packed_bytes"),
    "range_outside_file": (raw_safetensors(_hdr(a=("U8", [8], [0, 8])), b"1234"), "st_range_outside_file"),
    "gap": (raw_safetensors(_hdr(a=("U8", [2], [0, 2]), b=("U8", [2], [3, 5])), b"12345"), "st_gap"),
    "overlap": (raw_safetensors(_hdr(a=("U8", [3], [0, 3]), b=("U8", [2], [2, 4])), b"1234"), "st_overlap"),
    "trailing_data": (raw_safetensors(_hdr(a=("U8", [2], [0, 2])), b"1234"), "st_trailing_data"),
    "first_tensor_not_at_zero": (raw_safetensors(_hdr(a=("U8", [2], [2, 4])), b"1234"), "st_gap"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_rejection_rules(tmp_path, case):
    data, rule = BAD[case]
    path = tmp_path / f"{case}.st"
    path.write_bytes(data)
    assert _reject(path).rule == rule, case


def test_header_cap_counts_json_bytes_apart_from_the_prefix(tmp_path):
    # exactly 100,000,000 JSON bytes is allowed by the cap (then the budget applies separately)
    path = tmp_path / "cap.st"
    path.write_bytes(struct.pack("<Q", 100_000_000) + b"{}")
    assert _reject(path).rule == "st_header_length"  # not header_cap: the file is short, the cap holds


def test_unknown_dtype_kept_with_unknown_storage_validation(tmp_path):
    hdr = _hdr(a=("U8", [2], [0, 2]), z=("Q7_WEIRD", [3, 3], [2, 7]))
    (tmp_path / "u.st").write_bytes(raw_safetensors(hdr, b"1234567"))
    with open_safetensors(tmp_path / "u.st") as s:
        z = s.tensors["z"]
        assert (z.dtype, z.shape, z.byte_length, z.storage_validation) == ("Q7_WEIRD", (3, 3), 5, "unknown")
        assert s.tensors["a"].storage_validation == "consistent"


def test_unknown_fields_ignored_empty_metadata_scalars_empty_and_huge_dims(tmp_path):
    (tmp_path / "n.st").write_bytes(raw_safetensors({"__metadata__": None}))
    with open_safetensors(tmp_path / "n.st") as s:
        assert s.metadata == {} and s.tensors == {}
    hdr = {"__metadata__": {},
           "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4], "extra": {"nested": [1, 2]}},
           "e": {"dtype": "F16", "shape": [0, 2**60], "data_offsets": [4, 4]},
           "p": {"dtype": "F4", "shape": [4], "data_offsets": [4, 6]}}
    (tmp_path / "x.st").write_bytes(raw_safetensors(hdr, np.float32(2.5).tobytes() + b"\x12\x34"))
    with open_safetensors(tmp_path / "x.st") as s:
        assert s.metadata == {}
        assert s.tensors["s"].shape == () and float(s.array("s")) == 2.5
        assert s.tensors["e"].shape == (0, 2**60) and s.tensors["e"].byte_length == 0
        assert s.tensors["p"].byte_length == 2


def test_retained_budget_checked_before_parsing(tmp_path, monkeypatch):
    import converters.sources.limits as limits

    monkeypatch.setattr(limits, "RETAINED_BUDGET", 4096)
    hdr = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(64)}
    (tmp_path / "b.st").write_bytes(raw_safetensors(hdr, bytes(64)))
    e = _reject(tmp_path / "b.st")
    assert e.rule == "retained_budget" and e.category == "limit_exceeded"


def test_content_detection_ignores_extensions(tmp_path):
    save_file({"a": np.zeros(2, np.float32)}, tmp_path / "really_safetensors.gguf")
    with open_source(tmp_path / "really_safetensors.gguf") as s:
        assert s.kind == "safetensors"
    (tmp_path / "junk.safetensors").write_bytes(b"hello world, not a model")
    from converters.errors import SourceError

    with pytest.raises(SourceError) as ei:
        open_source(tmp_path / "junk.safetensors")
    assert ei.value.category == "unsupported_target"


def test_index_json_roundtrip_of_strict_loader(tmp_path):
    # the strict JSON loader keeps exact big integers (uint64 dims) and key order
    from converters.sources import strict_json

    v = strict_json.loads(json.dumps({"b": [2**64 - 1], "a": 1}).encode(), file="x", what="t")
    assert list(v) == ["b", "a"] and v["b"][0] == 2**64 - 1
