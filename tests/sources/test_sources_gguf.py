"""The strict GGUF reader: accepted files (LE v2/v3 via GGUFWriter and by hand, BE v3), decoded values,
exact header reads, and one rejection per rule (docs/inspect.md; GGUF spec)."""

from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

from converters.errors import SourceError, SourceFormatError
from converters.sources import open_gguf, open_source
from converters.sources.fileio import OpenFile
from converters.sources.gguf_header import parse_gguf
from tests.support.sources import RawGGUF, q8_0_blocks, writer_gguf


def _rule(path, **kw):
    with pytest.raises(SourceFormatError) as ei:
        open_gguf(path, **kw).close()
    assert ei.value.code == "target_unavailable" and ei.value.category in ("file_format_rejected", "limit_exceeded")
    return ei.value


@pytest.fixture
def llama_style(tmp_path):
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((16, 64)).astype(np.float32)
    norm = (rng.standard_normal(64) + 1).astype(np.float32)
    q = rng.standard_normal((8, 64)).astype(np.float32)
    h = rng.standard_normal((3, 32)).astype(np.float16)

    def kv(w):
        w.add_block_count(1)
        w.add_uint64("qwen3.big", 2**63 + 5)
        w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(20)])
        w.add_array("tokenizer.ggml.scores", [float(-i) for i in range(20)])
        w.add_chat_template("{{ x }}")

    path = tmp_path / "m.gguf"
    writer_gguf(path, tensors={"token_embd.weight": emb, "output_norm.weight": norm,
                               "blk.0.attn_q.weight": (q8_0_blocks(q), Q.Q8_0), "h": h}, kv=kv)
    return path, emb, norm, q, h


def test_gguf_writer_file_reads_back_exactly(llama_style):
    path, emb, norm, q, h = llama_style
    with open_source(path) as s:
        assert s.kind == "gguf" and list(s.tensors) == ["token_embd.weight", "output_norm.weight",
                                                         "blk.0.attn_q.weight", "h"]
        t = s.tensors["token_embd.weight"]
        assert (t.dtype, t.type_id, t.shape, t.dims, t.byte_length) == ("F32", 0, (16, 64), (64, 16), 16 * 64 * 4)
        np.testing.assert_array_equal(s.array("token_embd.weight"), emb)
        np.testing.assert_array_equal(s.array("output_norm.weight"), norm)
        np.testing.assert_array_equal(s.array("h"), h.astype(np.float32))
        # Q8_0 against a reference decoded here from the bytes: fp16 d times int8 codes
        blocks = q8_0_blocks(q).reshape(-1, 34)
        ref = blocks[:, 2:].view(np.int8).astype(np.float32) * blocks[:, :2].copy().view("<f2").astype(np.float32)
        np.testing.assert_array_equal(s.array("blk.0.attn_q.weight"), ref.reshape(8, 64))
        raw = s.raw("blk.0.attn_q.weight")
        assert raw.dtype == np.uint8 and raw.size == 8 * 2 * 34 and not raw.flags.writeable
        assert s.metadata["tokenizer.ggml.tokens"] == [f"t{i}" for i in range(20)]
        assert s.metadata["tokenizer.ggml.scores"][:3] == [0.0, -1.0, -2.0]
        assert s.metadata["qwen3.big"] == 2**63 + 5 and s.metadata.type_of("qwen3.big") == "UINT64"
        assert s.metadata["tokenizer.chat_template"] == "{{ x }}"
        ident = s.identity()
        assert ident["size"] == path.stat().st_size and ident["header_length"] == s.header.header_length


def test_header_read_is_exactly_the_header(llama_style):
    path = llama_style[0]
    with OpenFile(path) as f:
        hdr = parse_gguf(f)
    data = path.read_bytes()
    assert hdr.bytes_read == hdr.header_length and hdr.ranges_read == [[0, hdr.header_length]]
    import hashlib

    assert hdr.header_sha256 == hashlib.sha256(data[:hdr.header_length]).hexdigest()
    assert hdr.data_offset == -(-hdr.header_length // 32) * 32 and hdr.data_offset < len(data)
    # gguf-py's reader agrees on every tensor's absolute data offset
    r = gguf.GGUFReader(path)
    assert [t.file_offset for t in hdr.tensors] == [t.data_offset for t in r.tensors]


@pytest.mark.parametrize("order,version", [("<", 2), ("<", 3), (">", 3)])
def test_hand_built_versions_and_byte_orders(tmp_path, order, version):
    vals = np.arange(6, dtype=np.float32) - 2.5
    raw = RawGGUF(order=order, version=version).kv("general.architecture", V.STRING, "x")
    raw.kv("x.i64", V.INT64, -(2**62)).kv("x.f", V.FLOAT32, 0.5).kv("x.arr", V.ARRAY, [1, 2, 3], V.UINT16)
    raw.tensor("t", [3, 2], Q.F32, vals.astype(order + "f4").tobytes())
    raw.tensor("b", [4], Q.BF16, (vals[:4].view(np.uint32) >> 16).astype(order + "u2").tobytes())
    with open_gguf(raw.write(tmp_path / "x.gguf")) as s:
        assert s.header.byte_order == ("big" if order == ">" else "little") and s.header.version == version
        np.testing.assert_array_equal(s.array("t"), vals.reshape(2, 3))
        np.testing.assert_array_equal(s.array("b"), vals[:4])
        assert s.metadata["x.i64"] == -(2**62) and s.metadata["x.f"] == 0.5 and s.metadata["x.arr"] == [1, 2, 3]


def test_big_endian_file_from_gguf_writer(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "be.gguf"), "x", endianess=gguf.GGUFEndian.BIG)
    w.add_uint32("x.n", 9)
    w.add_tensor("t", np.arange(4, dtype=np.float32))  # the writer byteswaps it for a big-endian file
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()
    with open_gguf(tmp_path / "be.gguf") as s:
        assert s.header.byte_order == "big" and s.metadata["x.n"] == 9
        np.testing.assert_array_equal(s.array("t"), np.arange(4, dtype=np.float32))


def test_big_endian_v2_rejected(tmp_path):
    e = _rule(RawGGUF(order=">", version=2).write(tmp_path / "be2.gguf"))
    assert e.rule == "gguf_big_endian_v2"


@pytest.mark.parametrize("version_bytes", [b"\x07\x00\x00\x00", b"\x01\x00\x00\x00", b"\x00\x00\x00\x01",
                                           b"\x12\x34\x56\x78"])
def test_unsupported_version_keeps_bytes_and_both_readings(tmp_path, version_bytes):
    data = bytearray(RawGGUF().build())
    data[4:8] = version_bytes
    (tmp_path / "v.gguf").write_bytes(data)
    e = _rule(tmp_path / "v.gguf")
    le, be = struct.unpack("<I", version_bytes)[0], struct.unpack(">I", version_bytes)[0]
    assert e.rule == "gguf_version" and version_bytes.hex(" ") in e.message
    assert f"little-endian {le}" in e.message and f"big-endian {be}" in e.message
    assert "byte order unknown" in e.message


def _f32(n):
    return np.zeros(n, dtype="<f4").tobytes()


def _base():
    return RawGGUF().kv("general.architecture", V.STRING, "x")


# one malformed variant per rejection rule: (builder, expected rule)
BAD = {
    "magic": (lambda: RawGGUF(magic=b"GGUX"), "gguf_magic"),
    "counts_bound": (lambda: _base(), "gguf_count_bound"),
    "truncated_kv": (lambda: _base().kv_raw(RawGGUF().string("a.s") + struct.pack("<IQ", 8, 1000) + b"abc"),
                     "truncated"),
    "duplicate_key": (lambda: _base().kv("a.b", V.UINT8, 1).kv("a.b", V.UINT8, 2), "gguf_duplicate_key"),
    "key_uppercase": (lambda: _base().kv("general.Name", V.UINT8, 1), "gguf_key_spelling"),
    "key_empty_component": (lambda: _base().kv("general..name", V.UINT8, 1), "gguf_key_spelling"),
    "key_not_utf8": (lambda: _base().kv(b"a.\xff", V.UINT8, 1), "gguf_string_utf8"),
    "tensor_name_not_utf8": (lambda: _base().tensor(b"t\xff", [1], Q.F32, _f32(1)), "gguf_string_utf8"),
    "tensor_name_length": (lambda: _base().tensor("t" * 64, [1], Q.F32, _f32(1)), "gguf_tensor_name_length"),
    "byte_length_overflow": (lambda: _base().tensor("t", [2**31, 2**31], Q.F64), "gguf_byte_length_overflow"),
    "alignment_not_power_of_two_below_8": (lambda: _base().kv("general.alignment", V.UINT32, 3), "gguf_alignment"),
    "value_type": (lambda: _base().kv_raw(RawGGUF().string("a.b") + struct.pack("<I", 13) + b"\0" * 8),
                   "gguf_value_type"),
    "nesting": (lambda: _base().kv("a.n", V.ARRAY, _nested(33), V.ARRAY), "gguf_array_nesting"),
    "string_over_cap": (lambda: _base().kv_raw(RawGGUF().string("a.s") + struct.pack("<IQ", 8, 10**9)),
                        "header_cap"),
    "alignment_type": (lambda: _base().kv("general.alignment", V.UINT64, 32), "gguf_alignment_type"),
    "alignment_not_multiple_of_8": (lambda: _base().kv("general.alignment", V.UINT32, 12), "gguf_alignment"),
    "alignment_zero": (lambda: _base().kv("general.alignment", V.UINT32, 0), "gguf_alignment"),
    "n_dims": (lambda: _base().tensor("t", [1, 1, 1, 1, 1], Q.F32, _f32(1)), "gguf_n_dims"),
    "duplicate_tensor": (lambda: _base().tensor("t", [1], Q.F32, _f32(1)).tensor("t", [1], Q.F32, _f32(1)),
                         "gguf_duplicate_tensor"),
    "empty_name": (lambda: _base().tensor("", [1], Q.F32, _f32(1)), "gguf_tensor_name"),
    "element_overflow": (lambda: _base().tensor("t", [2**32, 2**32], Q.F32), "gguf_element_overflow"),
    "row_blocks": (lambda: _base().tensor("t", [33, 1], Q.Q8_0, b"\0" * 68), "gguf_row_blocks"),
    "offset_alignment": (lambda: _base().tensor("t", [1], Q.F32, _f32(1), offset=4), "gguf_tensor_alignment"),
    "range_past_eof": (lambda: _base().tensor("t", [1000], Q.F32, _f32(4)), "gguf_tensor_range"),
    "start_past_eof": (lambda: _without_data(_base().tensor("t", [0], Q.F32, offset=4096)), "gguf_tensor_range"),
    "overlap": (lambda: _base().tensor("a", [16], Q.F32, _f32(16)).tensor("b", [8], Q.F32, _f32(8), offset=32),
                "gguf_tensor_overlap"),
    "same_start": (lambda: _base().tensor("a", [8], Q.F32, _f32(8)).tensor("b", [8], Q.F32, _f32(8), offset=0),
                   "gguf_tensor_overlap"),
    "q2_0_fits_no_layout": (lambda: _base().tensor("t", [128, 4], 42, b"\1" * 100), "gguf_q2_0_range"),
}


def _without_data(raw):
    raw.data = bytearray()
    return raw


def _nested(depth):
    v = ([1], V.UINT8)
    for _ in range(depth - 2):
        v = ([v], V.ARRAY)
    return [v]


@pytest.mark.parametrize("case", sorted(BAD))
def test_rejection_rules(tmp_path, case):
    build, rule = BAD[case]
    raw = build()
    kw = {"n_kv": 10**15} if case == "counts_bound" else {}
    e = _rule(raw.write(tmp_path / f"{case}.gguf", **kw))
    assert e.rule == rule, (case, e)
    assert str(tmp_path / f"{case}.gguf") in str(e)


@pytest.mark.parametrize("cut", [3, 7, 15, 23, 30, 45])
def test_truncated_directory_rejected_with_field(tmp_path, cut):
    data = _base().kv("a.b", V.UINT32, 1).tensor("t", [2], Q.F32, _f32(2)).build()
    (tmp_path / "t.gguf").write_bytes(data[:cut])
    e = _rule(tmp_path / "t.gguf")
    assert e.rule in ("truncated", "gguf_count_bound") and e.json_path


def test_partial_alignment_gap_rejected_and_zero_tensor_offsets(tmp_path):
    raw = _base()
    head = raw.directory()
    (tmp_path / "end.gguf").write_bytes(head)  # ends at the directory: data offset = directory end
    with open_gguf(tmp_path / "end.gguf") as s:
        assert s.header.data_offset == s.header.header_length == len(head)
    padded = head + b"\0" * (-len(head) % 32)
    (tmp_path / "pad.gguf").write_bytes(padded)
    with open_gguf(tmp_path / "pad.gguf") as s:
        assert s.header.data_offset == len(padded) and s.header.header_length == len(head)
    if len(padded) - len(head) > 1:
        (tmp_path / "gap.gguf").write_bytes(head + b"\0")
        assert _rule(tmp_path / "gap.gguf").rule == "gguf_partial_alignment_gap"


def test_non_power_of_two_alignment_and_hyphenated_keys(tmp_path):
    raw = RawGGUF(alignment=24).kv("general.alignment", V.UINT32, 24).kv("gpt-oss.context_length", V.UINT32, 8)
    raw.kv("wavtokenizer-dec.context_length", V.UINT32, 9).kv("general.base_model.0.name", V.STRING, "b")
    raw.tensor("a", [3], Q.F32, _f32(3)).tensor("b", [5], Q.F32, np.arange(5, dtype="<f4").tobytes())
    with open_gguf(raw.write(tmp_path / "a24.gguf")) as s:
        assert s.header.alignment == 24 and s.header.alignment_source == "metadata"
        assert s.header.data_offset % 24 == 0
        assert s.tensors["b"].file_offset == s.header.data_offset + 24
        np.testing.assert_array_equal(s.array("b"), np.arange(5, dtype=np.float32))
        assert s.metadata["gpt-oss.context_length"] == 8


def test_historically_ambiguous_types(tmp_path):
    raw = _base()
    raw.tensor("q81", [32, 2], 9, b"\0" * 80)
    raw.tensor("q81_empty", [32, 0], 9)
    raw.tensor("k", [64, 1], Q.Q4_K, b"\0" * 144)  # 64 elements: valid under QKK_64, so accepted
    raw.tensor("amb", [256], 23, b"\0" * 136)
    raw.tensor("amb_empty", [0], 17)
    raw.tensor("i32", [4], 26, b"\0" * 16)
    raw.tensor("unk", [4], 99, b"\0" * 16)
    raw.tensor("unk_empty", [0], 99)
    with open_gguf(raw.write(tmp_path / "amb.gguf"), assume_modern_layouts=False) as s:
        t = s.tensors
        assert (t["q81"].dtype, t["q81"].byte_length, t["q81"].storage_validation) == ("Q8_1", None, "unknown")
        assert (t["q81_empty"].byte_length, t["q81_empty"].storage_validation) == (0, "consistent")
        assert (t["k"].dtype, t["k"].byte_length) == ("Q4_K", None)
        assert (t["amb"].dtype, t["amb"].type_id, t["amb"].byte_length) == ("AMBIGUOUS_23", 23, None)
        assert (t["amb_empty"].dtype, t["amb_empty"].byte_length) == ("AMBIGUOUS_17", 0)
        assert (t["i32"].dtype, t["i32"].byte_length) == ("I32", 16)
        assert (t["unk"].dtype, t["unk"].byte_length) == ("UNKNOWN_99", None)
        assert t["unk_empty"].byte_length is None
        with pytest.raises(SourceError, match="not fixed by the declaration"):
            s.raw("k")


@pytest.mark.parametrize("ne0,rule", [(16, "gguf_row_blocks"), (0, None)])
def test_q8_1_keeps_its_32_element_row_block(tmp_path, ne0, rule):
    raw = _base().tensor("q", [ne0, 0], 9)
    if rule is None:
        with open_gguf(raw.write(tmp_path / "q.gguf")) as s:
            assert s.tensors["q"].byte_length == 0
    else:
        assert _rule(raw.write(tmp_path / "q.gguf")).rule == rule


def test_k_quant_row_multiple_is_64(tmp_path):
    assert _rule(_base().tensor("k", [32, 1], Q.Q6_K, b"\0" * 210).write(tmp_path / "k.gguf")).rule == "gguf_row_blocks"


def test_modern_layout_assumption_is_explicit_and_recorded(tmp_path):
    rng = np.random.default_rng(1)
    blocks = rng.integers(0, 256, size=(2, 144), dtype=np.uint8)
    blocks[:, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    blocks[:, 2:4] = np.frombuffer(np.float16(0.001).tobytes(), np.uint8)
    raw = _base().tensor("k", [256, 2], Q.Q4_K, blocks.tobytes()).tensor("f", [2], Q.F32, _f32(2))
    with open_gguf(raw.write(tmp_path / "k.gguf")) as s:
        t = s.tensors["k"]
        assert (t.dtype, t.byte_length, t.read_type, t.read_length, t.basis) == (
            "Q4_K", None, "Q4_K", 288, "modern_ggml_assumption")
        assert s.layout_assumptions == [{"tensor": "k", "type_id": 12, "declared_type": "Q4_K",
                                         "assumed_type": "Q4_K", "block": [256, 144], "byte_length": 288,
                                         "data_range": 288, "reason": s.layout_assumptions[0]["reason"]}]
        np.testing.assert_array_equal(s.raw("k"), blocks.reshape(-1))
        ref = gguf.quants.dequantize(blocks, Q.Q4_K)
        np.testing.assert_array_equal(s.array("k"), ref)


def test_modern_assumption_refused_when_it_does_not_fit(tmp_path):
    raw = _base().tensor("k", [256, 2], Q.Q4_K, b"\0" * 200)  # 200 (+pad 24) < 288 bytes
    with open_gguf(raw.write(tmp_path / "k.gguf")) as s:
        assert s.tensors["k"].basis == "modern_layout_does_not_fit" and s.tensors["k"].read_length is None


def _pq2_blocks(codes: np.ndarray, d: float, block: int) -> bytes:
    """Q2_0/PQ2_0 blocks by hand: fp16 d, then element j at bits 2*(j%4) of byte j/4."""
    out = b""
    for b in codes.reshape(-1, block):
        packed = np.zeros(block // 4, dtype=np.uint8)
        for j, q in enumerate(b):
            packed[j // 4] |= int(q) << (2 * (j % 4))
        out += np.float16(d).tobytes() + packed.tobytes()
    return out


@pytest.mark.parametrize("layout", ["legacy", "official"])
def test_type_42_resolved_from_the_data_range(tmp_path, layout):
    rng = np.random.default_rng(2)
    codes = rng.integers(0, 3, size=4096)  # 32 blocks of 128: the layouts differ by 64 bytes > alignment
    block = 128 if layout == "legacy" else 64
    data = _pq2_blocks(codes, 0.5, block)
    raw = _base().tensor("q", [4096], 42, data).tensor("z", [1], Q.F32, _f32(1))
    with open_gguf(raw.write(tmp_path / "q.gguf")) as s:
        t = s.tensors["q"]
        assert t.dtype == "Q2_0" and t.block == ((128, 34) if layout == "legacy" else (64, 18))
        assert t.byte_length == len(data)
        np.testing.assert_array_equal(s.array("q"), (codes - 1).astype(np.float32) * 0.5)


def test_type_42_stays_ambiguous_when_both_layouts_fit(tmp_path):
    raw = _base().tensor("q", [128], 42, b"\0" * 34)  # 34 and 36 bytes both pad to 64
    with open_gguf(raw.write(tmp_path / "q.gguf")) as s:
        t = s.tensors["q"]
        assert (t.dtype, t.byte_length, t.storage_validation) == ("AMBIGUOUS_42", None, "unknown")


def test_fork_types_142_143_known_and_decoded(tmp_path):
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 3, size=256)
    pq2 = _pq2_blocks(codes, 0.25, 128)
    raw = _base().tensor("p", [256], 142, pq2).tensor("t", [128, 2], 143, b"\0" * 56)
    with open_gguf(raw.write(tmp_path / "f.gguf")) as s:
        assert (s.tensors["p"].dtype, s.tensors["p"].byte_length) == ("PQ2_0", 68)
        assert (s.tensors["t"].dtype, s.tensors["t"].byte_length) == ("PTQ1_0", 56)
        np.testing.assert_array_equal(s.array("p"), (codes - 1).astype(np.float32) * 0.25)


def test_q1_0_decoded_by_hand_reference(tmp_path):
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2, size=256)
    packed = np.packbits(bits.reshape(-1, 8)[:, ::-1], axis=1).reshape(2, 16)  # element j = bit j%8
    d = np.float16(0.75)
    data = b"".join(d.tobytes() + p.tobytes() for p in packed)
    with open_gguf(_base().tensor("b", [128, 2], 41, data).write(tmp_path / "q1.gguf")) as s:
        np.testing.assert_array_equal(s.array("b").reshape(-1), np.where(bits == 1, 0.75, -0.75).astype(np.float32))


def test_scalar_and_empty_tensors(tmp_path):
    raw = _base().tensor("s", [], Q.F32, np.float32(3.5).tobytes()).tensor("e", [0, 7], Q.F32)
    with open_gguf(raw.write(tmp_path / "s.gguf")) as s:
        assert s.tensors["s"].shape == () and float(s.array("s")) == 3.5
        assert s.tensors["e"].shape == (7, 0) and s.array("e").shape == (7, 0)
