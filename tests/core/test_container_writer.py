"""The writer (container spec §2.1, §2.3, §3, §5.3, §11.4): placement, splitting, values, determinism.

References are computed independently of the writer and the codecs under test where possible:
bf16 through ``ml_dtypes``, fp32/int32 through ``numpy`` byte views, file framing through ``struct``.
"""

from __future__ import annotations

import json
import os
import struct
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest

from ninfer_core import ArtifactWriter, Binding, Component, Part, Use, codecs, open_artifact, validate
from ninfer_core.errors import DirectoryReferenceError, EncodingError, SchemaError, WriterError

AID = "0123456789abcdef0123456789abcdef"
RNG = np.random.default_rng(7)
EMBED = RNG.standard_normal((300, 16)).astype(np.float32)
NORM = RNG.standard_normal(16).astype(np.float32)
PERM = RNG.permutation(64).astype(np.int32)
TOKENIZER = b'{"model": "tiny"}' * 50


def bf16_bytes(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).astype(ml_dtypes.bfloat16).tobytes()


def bf16_values(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


OBJECTS = {  # id -> (shape, format, raw bytes made without the codecs)
    "w.embed": (EMBED.shape, "bf16", bf16_bytes(EMBED)),
    "w.norm": (NORM.shape, "fp32", NORM.astype("<f4").tobytes()),
    "w.perm": (PERM.shape, "int32", PERM.astype("<i4").tobytes()),
}


def declare(w: ArtifactWriter) -> None:
    for oid, (shape, fmt, _) in OBJECTS.items():
        w.add_tensor(oid, shape, fmt, "contiguous_le_v1")
    w.add_resource("r.tok", len(TOKENIZER))


def new_writer(path, **kw) -> ArtifactWriter:
    kw.setdefault("artifact_id", AID)
    kw.setdefault("bindings", {"text/token_embedding": Binding.whole("w.embed"),
                               "text/output_head": Binding.whole("w.embed"),
                               "text/final_norm": {"object": "w.norm"},
                               "text/first_rows": Binding.of_parts([("w.embed", (16, 48))]),
                               "text/perm": Binding.whole("w.perm")})
    # an auxiliary the container accepts on a bf16 matrix (input_columns is for gguf_* only, container §8)
    kw.setdefault("uses", [Use("text/output_head", "text/final_hidden", "AllowA8",
                               {"activation_input_divisor": Binding.of_parts([("w.norm", (0, 1))])})])
    return ArtifactWriter(path, components={"text": Component({"architectures": ["Test"]},
                                                              resources={"tokenizer.json": "r.tok"})},
                          metadata={"name": "t"}, provenance={"by": "test"}, **kw)


def write_all(path, order=None, threads=1, **kw):
    with new_writer(path, **kw) as w:
        declare(w)
        w.plan()
        items = [(k, v[2]) for k, v in OBJECTS.items()] + [("r.tok", TOKENIZER)]
        if order:
            items = [items[i] for i in order]
        if threads > 1:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(lambda kv: w.write_object(*kv), items))
        else:
            for k, v in items:
                w.write_object(k, v)
    return path


def artifact_files(directory) -> dict[str, bytes]:
    return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory))}


def test_round_trip_values(tmp_path):
    path = write_all(tmp_path / "m.ninfer", max_file_bytes=3 * 4096)
    assert validate(path) == []
    with open_artifact(path) as art:
        assert len(art.files) > 1 and art.artifact_id == AID
        assert np.array_equal(art.binding_array("text/token_embedding"), bf16_values(EMBED))
        assert np.array_equal(art.binding_array("text/first_rows", shape=(2, 16)), bf16_values(EMBED)[1:3])
        assert np.array_equal(art.binding_array("text/final_norm"), NORM)
        assert np.array_equal(np.frombuffer(art.object_bytes("w.perm"), "<i4"), PERM)
        assert art.resource("r.tok") == TOKENIZER
        assert art.metadata["name"] == "t" and art.provenance == {"by": "test"}
        assert art.uses[0].auxiliaries["activation_input_divisor"].parts[0].object == "w.norm"
        assert art.bindings["text/first_rows"].object_ids == ("w.embed",)
        offsets = [o.offset for o in art.objects]
        assert offsets[0] == 0 and all(o.offset % 256 == 0 for o in art.objects if o.kind == "tensor")
        assert art.object("r.tok").offset == art.object("w.perm").end  # resources are 1-aligned
        assert art.payload_bytes == art.object("r.tok").end  # truncated after the last object (§5.3)


def test_deterministic_and_order_invariant(tmp_path):
    runs = []
    for i, (order, threads) in enumerate([(None, 1), ([3, 1, 0, 2], 1), ([2, 0, 3, 1], 4)]):
        d = tmp_path / str(i)
        d.mkdir()
        write_all(d / "m.ninfer", order=order, threads=threads, max_file_bytes=3 * 4096)
        runs.append(artifact_files(d))
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) > 1


def test_new_artifact_id_each_time(tmp_path):
    ids = []
    for name in ("a.ninfer", "b.ninfer"):
        with ArtifactWriter(tmp_path / name, components={"t": Component({})}) as w:
            w.add_resource("r.x", 3)
            w.write_object("r.x", b"abc")
        with open_artifact(tmp_path / name) as art:
            ids.append(art.artifact_id)
    assert ids[0] != ids[1] and all(len(i) == 32 for i in ids)


def test_header_and_json_framing(tmp_path):
    path = write_all(tmp_path / "m.ninfer", reserve_json_bytes=65504)
    raw = path.read_bytes()
    assert raw[:8] == b"NINFER\x00\x03"
    (json_bytes,) = struct.unpack_from("<Q", raw, 8)
    assert json_bytes == 65504 and raw[16:32] == bytes.fromhex(AID)
    text = raw[32:32 + json_bytes]
    root = json.loads(text)
    assert text.rstrip(b" ") != text and set(text[len(text.rstrip(b" ")):]) == {0x20}
    assert list(root) == ["components", "objects", "bindings", "uses", "files", "metadata", "provenance"]
    assert root["files"] == [{"path": None, "payload_bytes": len(raw) - 65536}]
    with open_artifact(path) as art:
        assert art.entry_payload_start == 65536


def test_default_reservation_ends_on_a_page(tmp_path):
    path = write_all(tmp_path / "m.ninfer", max_file_bytes=2 * 4096)
    raw = path.read_bytes()
    (json_bytes,) = struct.unpack_from("<Q", raw, 8)
    assert (32 + json_bytes) % 4096 == 0


def test_split_files_respect_the_limit(tmp_path):
    limit = 2 * 4096 + 100
    path = write_all(tmp_path / "m.ninfer", max_file_bytes=limit)
    with open_artifact(path) as art:
        names = [f.location.name for f in art.files]
        assert names[1:] == [f"m.ninfer.part-{i:04d}" for i in range(1, len(names))]
        for f in art.files:
            assert os.path.getsize(f.location) == f.file_bytes <= limit
            if f.index < len(art.files) - 1:
                assert f.payload_bytes % 4096 == 0 and f.payload_offset % 4096 == 0
        for f in art.files[1:]:
            raw = f.location.read_bytes()
            assert raw[:8] == b"NINPRT\x00\x03" and struct.unpack_from("<Q", raw, 8)[0] == f.index
            assert raw[16:32] == bytes.fromhex(AID) and raw[32:4096] == bytes(4064)


def test_no_split_when_it_fits(tmp_path):
    path = write_all(tmp_path / "m.ninfer", max_file_bytes=10**9)
    assert os.listdir(tmp_path) == ["m.ninfer"]
    with open_artifact(path) as art:
        assert len(art.files) == 1


def test_limit_too_small_refused_before_writing(tmp_path):
    with pytest.raises(WriterError) as info:
        with new_writer(tmp_path / "m.ninfer", max_file_bytes=8191) as w:
            declare(w)
            w.plan()
    assert info.value.rule == "limit_too_small"
    assert os.listdir(tmp_path) == []


def test_section_12_3_sizes_through_the_writer(tmp_path):
    w = ArtifactWriter(tmp_path / "m.ninfer", components={"text": Component({})})
    sizes = [w.add_tensor("A", (7168, 5120), "q4_g64_fp16", "row_split_k128_v1"),
             w.add_tensor("B", (7168, 5120), "q5_g64_fp16", "row_split_k128_v1"),
             w.add_tensor("P8", (14336, 5120), "fp8_e4m3fn_row_bf16", "row_scale_v1"),
             w.add_tensor("P4", (14336, 5120), "nvfp4", "block_scale_k16_m128x4_v1")]
    assert sizes == [19_496_960, 24_084_480, 73_428_992, 41_287_684]
    w.add_binding("text/q", Binding.of_parts([Part("A", (0, 31457280))]))
    w.add_binding("text/k", Binding.of_parts([Part("A", (31457280, 36700160))]))
    w.add_binding("text/gate", Binding.of_parts([Part("P4", (36700160, 68157440))]))
    w.add_binding("text/value", Binding.of_parts([Part("P8", (68157440, 73400320))]))
    plan = w.plan()
    objs = {o.id: o for o in w.objects}
    assert [objs[k].bytes for k in ("A", "B", "P8", "P4")] == sizes
    assert all(o.offset % 256 == 0 for o in objs.values())
    assert objs["B"].offset == 19_496_960 and objs["P8"].offset == 19_496_960 + 24_084_480  # both 256-multiples
    assert objs["P4"].offset == -(-(objs["P8"].offset + 73_428_992) // 256) * 256
    assert plan.payload_bytes == objs["P4"].end
    w.abort()
    assert os.listdir(tmp_path) == []


def test_section_12_4_interleaved_parts(tmp_path):
    """[8,4] bf16 parent holding Q0, gate0, Q1, gate1 (two rows each); query/gate as two Parts each."""
    parent = np.arange(32, dtype=np.float32).reshape(8, 4) - 15.5
    bindings = {"query": {"parts": [{"object": "interleaved", "range": [0, 8]},
                                    {"object": "interleaved", "range": [16, 24]}]},
                "gate": {"parts": [{"object": "interleaved", "range": [8, 16]},
                                   {"object": "interleaved", "range": [24, 32]}]},
                "reshaped": {"parts": [{"object": "square", "range": [0, 16]}]}}
    square = np.arange(16, dtype=np.float32).reshape(4, 4)
    with ArtifactWriter(tmp_path / "m.ninfer", components={"text": Component({})}, bindings=bindings) as w:
        w.add_tensor("interleaved", (8, 4), "bf16", "contiguous_le_v1")
        w.add_tensor("square", (4, 4), "bf16", "contiguous_le_v1")
        w.write_object("interleaved", bf16_bytes(parent))
        w.write_object("square", bf16_bytes(square))
    with open_artifact(tmp_path / "m.ninfer") as art:
        query = art.binding_array("query", shape=(4, 4))
        gate = art.binding_array("gate", shape=(4, 4))
        assert np.array_equal(query, np.concatenate([parent[0:2], parent[4:6]]))
        assert np.array_equal(gate, np.concatenate([parent[2:4], parent[6:8]]))
        assert np.array_equal(art.binding_array("reshaped", shape=(2, 2, 4)), square.reshape(2, 2, 4))


def test_object_crossing_two_boundaries_inside_a_plane(tmp_path):
    """A q4 [64, 256] object (low plane 8192 B, scale plane 512 B) at payload 256 with 4096-byte file
    capacities: boundaries at 4096 and 8192 both fall inside the low plane."""
    x = (RNG.standard_normal((64, 256)) * np.linspace(0.1, 3, 256)).astype(np.float32)
    data = codecs.encode("q4_g64_fp16", "row_split_k128_v1", x)
    planes = codecs.planes("q4_g64_fp16", "row_split_k128_v1", (64, 256))
    path = tmp_path / "m.ninfer"
    with ArtifactWriter(path, components={"text": Component({})}, max_file_bytes=2 * 4096,
                        bindings={"w": {"object": "q4"}, "rows": {"parts": [{"object": "q4",
                                                                             "range": [256 * 10, 256 * 50]}]}},
                        artifact_id=AID) as w:
        w.add_resource("r.head", 100)
        w.add_tensor("q4", (64, 256), "q4_g64_fp16", "row_split_k128_v1")
        # stream the object in uneven chunks, from the end backwards is not allowed, but any chunking is
        w.write_object("q4", (data[i:i + 1000] for i in range(0, len(data), 1000)))
        w.write_object("r.head", bytes(range(100)))
    with open_artifact(path) as art:
        obj = art.object("q4")
        low = planes[0]
        assert len(art.files) == 3 and obj.offset == 256
        boundaries = [f.payload_offset for f in art.files[1:]]
        assert boundaries == [4096, 8192]
        for b in boundaries:
            assert obj.offset + low.offset < b < obj.offset + low.offset + low.size
        assert bytes(art.object_bytes("q4")) == data
        expected = codecs.decode("q4_g64_fp16", "row_split_k128_v1", (64, 256), data)
        assert np.array_equal(art.binding_array("w"), expected)
        assert np.array_equal(art.binding_array("rows", shape=(40, 256)), expected[10:50])
        assert np.abs(expected - x).max() < np.abs(x).max() / 7  # the q4 values are near the input
    assert validate(path) == []


def test_stream_forms(tmp_path):
    big = np.arange(40 * 16, dtype=np.float32).reshape(16, 40).T  # not C-contiguous
    with ArtifactWriter(tmp_path / "m.ninfer", components={"text": Component({})},
                        bindings={"b": {"object": "b"}, "c": {"object": "c"}}) as w:
        w.add_tensor("b", (40, 16), "fp32", "contiguous_le_v1")
        w.add_tensor("c", (4,), "fp32", "contiguous_le_v1")
        w.add_resource("r", 6)
        w.write_object("b", big)
        w.write_object("c", lambda: [np.float32([1, 2]), memoryview(np.float32([3, 4]))])
        w.write_object("r", [b"ab", bytearray(b"cd"), memoryview(b"ef")])
    with open_artifact(tmp_path / "m.ninfer") as art:
        assert np.array_equal(art.binding_array("b"), big)
        assert art.binding_array("c").tolist() == [1, 2, 3, 4]
        assert art.resource("r") == b"abcdef"


@pytest.mark.parametrize("problem, rule", [
    ("unknown", "object_unknown"), ("twice", "object_written_twice"), ("long", "object_length"),
    ("short", "object_length"), ("str", "object_data"), ("missing", "coverage_incomplete"),
])
def test_write_errors(tmp_path, problem, rule):
    w = new_writer(tmp_path / "m.ninfer")
    declare(w)
    w.plan()
    data = dict((k, v[2]) for k, v in OBJECTS.items())
    with pytest.raises(WriterError) as info:
        if problem == "unknown":
            w.write_object("w.none", b"x")
        elif problem == "twice":
            w.write_object("w.norm", data["w.norm"])
            w.write_object("w.norm", data["w.norm"])
        elif problem == "long":
            w.write_object("w.norm", data["w.norm"] + b"\x00")
        elif problem == "short":
            w.write_object("w.norm", [data["w.norm"][:10]])
        elif problem == "str":
            w.write_object("r.tok", "text")
        else:
            w.write_object("w.norm", data["w.norm"])
            w.commit()
    assert info.value.rule == rule
    if problem == "missing":
        assert "3 object(s)" in info.value.message
    # the writer stays usable after a refused write: finish and publish
    for k, v in data.items():
        if not (problem in ("twice", "missing") and k == "w.norm"):
            w.write_object(k, v)
    w.write_object("r.tok", TOKENIZER)
    w.commit()
    assert validate(tmp_path / "m.ninfer") == []


def test_plan_rejects_a_directory_the_reader_would_reject(tmp_path):
    w = new_writer(tmp_path / "m.ninfer", bindings={"x": Binding.whole("w.none")})
    declare(w)
    with pytest.raises(DirectoryReferenceError) as info:
        w.plan()
    assert info.value.rule == "reference_missing"
    assert os.listdir(tmp_path) == []
    w2 = new_writer(tmp_path / "m.ninfer", uses=[{"parameter": "text/perm", "input": "x",
                                                  "activation_policy": "A4"}])
    declare(w2)
    with pytest.raises(SchemaError) as info:
        w2.plan()
    assert info.value.rule == "enum_value"


def test_declaration_errors(tmp_path):
    w = new_writer(tmp_path / "m.ninfer", bindings={}, uses=[])
    w.add_resource("r.tok", 4)
    with pytest.raises(SchemaError) as info:
        w.add_tensor("r.tok", (1,), "fp32", "contiguous_le_v1")
    assert info.value.rule == "object_id_duplicate"
    with pytest.raises(SchemaError):
        w.add_resource("", 4)
    with pytest.raises(SchemaError):
        w.add_resource("r.zero", 0)
    with pytest.raises(EncodingError):
        w.add_tensor("w.x", (4,), "fp64", "contiguous_le_v1")
    with pytest.raises(EncodingError):
        w.add_tensor("w.y", (3, 100), "nvfp4", "block_scale_k16_m128x4_v1")
    with pytest.raises(WriterError) as info:
        ArtifactWriter(tmp_path / "m.ninfer", components={"t": Component({})}, artifact_id="abc")
    assert info.value.rule == "artifact_id"
    with pytest.raises(WriterError) as info:
        ArtifactWriter(tmp_path / "nodir" / "m.ninfer", components={"t": Component({})})
    assert info.value.rule == "target_path"
    w.plan()
    with pytest.raises(WriterError) as info:
        w.add_resource("r.late", 4)
    assert info.value.rule == "writer_state"
    w.abort()
    assert os.listdir(tmp_path) == []
