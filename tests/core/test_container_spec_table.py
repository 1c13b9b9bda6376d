"""The container spec's §12.6 table, one case per row.

| row | input | result | owner (§11.3) |
| 1 | the same object ID twice | directory error | reader: ``SchemaError`` ``object_id_duplicate`` |
| 2 | two objects' byte ranges overlap | range error | reader: ``RangeError`` ``object_overlap`` |
| 3 | part end beyond the parent's elements | reference error | reader: ``DirectoryReferenceError`` ``part_range`` |
| 4 | parts' total length ≠ the parameter's | binder coverage error | binder; the container's part is
  ``binding_array(name, shape)`` raising ``RangeError`` ``binding_coverage`` |
| 5 | object with an unimplemented format/layout | fails when interpreted | object reading: opens, then
  ``EncodingError`` from ``object_bytes``/``binding_array``/``validate`` |
| 6 | scalar activation divisor bound to a non-scalar | that use's binding error | use contract; the container
  resolves the auxiliary binding and ``binding_array(aux, shape=())`` raises ``binding_coverage`` |
| 7 | a parent spanning into a missing second part | range read fails | reader: ``ReadError`` ``part_missing`` |
| 8 | a same-numbered part of another artifact | artifact_id mismatch | reader: ``ReadError`` ``part_artifact_id`` |
| 9 | enabling a Vision/spec component the file lacks | selected component missing | binder/launch; the
  container exposes exactly the declared components and rejects a ``target`` naming an absent one |
| 10 | valid metadata, but no native Op grouping/shape | Op preparation fails | Op; the container accepts it |
"""

from __future__ import annotations

import numpy as np
import pytest

from ninfer_core import codecs, open_artifact, validate
from ninfer_core.errors import DirectoryReferenceError, EncodingError, RangeError, ReadError, SchemaError
from tests.support.container import (
    OTHER_AID,
    base_root,
    entry_file,
    mutated,
    write_single,
    write_split,
)


def row01_duplicate_object_id(tmp_path):
    path = write_single(tmp_path, mutated(lambda r: r["objects"][1].__setitem__("id", "w.a")))
    with pytest.raises(SchemaError) as info:
        open_artifact(path)
    assert info.value.rule == "object_id_duplicate" and info.value.json_path == "$.objects[1].id"


def row02_overlap(tmp_path):
    path = write_single(tmp_path, mutated(lambda r: r["objects"][2].__setitem__("offset", 256 + 31)))
    with pytest.raises(RangeError) as info:
        open_artifact(path)
    assert info.value.rule == "object_overlap" and "'w.b'" in info.value.message


def row03_part_end_beyond_parent(tmp_path):
    path = write_single(tmp_path, mutated(
        lambda r: r["bindings"]["text/a_rows"]["parts"][0].__setitem__("range", [8, 17])))
    with pytest.raises(DirectoryReferenceError) as info:
        open_artifact(path)
    assert info.value.rule == "part_range" and "16 logical elements" in info.value.message


def row04_part_total_differs_from_parameter(tmp_path):
    path = write_single(tmp_path)  # text/a_rows holds 8 elements
    with open_artifact(path) as art:
        assert art.binding_array("text/a_rows", shape=(2, 4)).shape == (2, 4)
        with pytest.raises(RangeError) as info:
            art.binding_array("text/a_rows", shape=(3, 4))
    assert info.value.rule == "binding_coverage"


def row05_unimplemented_format(tmp_path):
    path = write_single(tmp_path, mutated(lambda r: r["objects"][0].update(format="q3_g64_fp16",
                                                                          layout="row_split_k256_v2")))
    with open_artifact(path) as art:  # the generic reader keeps the names (§11.1)
        assert art.object("w.a").format == "q3_g64_fp16"
        assert art.binding_array("text/b").size == 8  # other objects are unaffected
        for request in (lambda: art.object_bytes("w.a"), lambda: art.binding_array("text/a")):
            with pytest.raises(EncodingError) as info:
                request()
            assert info.value.json_path == "$.objects[0]"
    assert [f.json_path for f in validate(path)] == ["$.objects[0]"]


def row06_scalar_divisor_not_scalar(tmp_path):
    def change(root):
        root["uses"][0]["auxiliaries"] = {"activation_input_divisor": {"object": "w.b"}}  # w.b is [8]
        root["uses"].append({"parameter": "text/b", "input": "text/y", "activation_policy": "AllowA4",
                             "auxiliaries": {"activation_input_divisor": {"parts": [{"object": "w.b",
                                                                                     "range": [3, 4]}]}}})
    path = write_single(tmp_path, mutated(change))
    with open_artifact(path) as art:
        good = art.uses[1].auxiliaries["activation_input_divisor"]
        assert art.binding_array(good, shape=()) == np.float32(103)  # a Part to one element is a scalar
        with pytest.raises(RangeError) as info:
            art.binding_array(art.uses[0].auxiliaries["activation_input_divisor"], shape=())
    assert info.value.rule == "binding_coverage"


def row07_second_part_of_parent_missing(tmp_path):
    path = write_split(tmp_path, [100, 200, 4], skip=(2,))  # r.t spans parts 1 and 2
    with open_artifact(path) as art:
        assert art.binding_array("text/b").tolist() == list(range(100, 108))  # part 1 alone is fine
        with pytest.raises(ReadError) as info:
            art.resource("r.t")
    assert info.value.rule == "part_missing" and "a.ninfer.part-0002" in str(info.value)


def row08_part_from_another_artifact(tmp_path):
    path = write_split(tmp_path, [100, 200, 4], part_aids={2: OTHER_AID})
    with open_artifact(path) as art:
        with pytest.raises(ReadError) as info:
            art.resource("r.t")
    assert info.value.rule == "part_artifact_id" and "a.ninfer.part-0002" in str(info.value)


def row09_selected_component_missing(tmp_path):
    with open_artifact(write_single(tmp_path)) as art:
        assert set(art.components) == {"text"}  # what a launcher checks its selection against
    path = write_single(tmp_path, mutated(lambda r: r["components"].__setitem__(
        "mtp", {"config": {"architectures": ["Qwen3_5MTP"]}, "target": "vision"})))
    with pytest.raises(DirectoryReferenceError) as info:
        open_artifact(path)
    assert info.value.rule == "reference_missing" and info.value.json_path == "$.components.mtp.target"


def row10_op_concern_container_accepts(tmp_path):
    """A q4 parent bound as one odd-shaped Part ([3, 5, 8]): legal metadata, so no container finding."""
    x = np.linspace(-1, 1, 2 * 128, dtype=np.float32).reshape(2, 128)
    data = codecs.encode("q4_g64_fp16", "row_split_k128_v1", x)
    root = base_root([len(data)])
    root["objects"] = [{"id": "w.q4", "kind": "tensor", "shape": [2, 128], "format": "q4_g64_fp16",
                        "layout": "row_split_k128_v1", "offset": 0, "bytes": len(data)}]
    root["components"]["text"].pop("resources")
    root["bindings"] = {"text/odd": {"parts": [{"object": "w.q4", "range": [8, 128]}]}}
    root["uses"] = [{"parameter": "text/odd", "input": "text/x", "activation_policy": "AllowA4"}]
    path = tmp_path / "a.ninfer"
    path.write_bytes(entry_file(root, data))
    assert validate(path) == []
    with open_artifact(path) as art:
        expected = codecs.decode("q4_g64_fp16", "row_split_k128_v1", (2, 128), data).reshape(-1)[8:128]
        assert np.array_equal(art.binding_array("text/odd", shape=(3, 5, 8)).reshape(-1), expected)


ROWS = [row01_duplicate_object_id, row02_overlap, row03_part_end_beyond_parent,
        row04_part_total_differs_from_parameter, row05_unimplemented_format, row06_scalar_divisor_not_scalar,
        row07_second_part_of_parent_missing, row08_part_from_another_artifact, row09_selected_component_missing,
        row10_op_concern_container_accepts]


@pytest.mark.parametrize("row", ROWS, ids=[r.__name__ for r in ROWS])
def test_section_12_6(tmp_path, row):
    row(tmp_path)
