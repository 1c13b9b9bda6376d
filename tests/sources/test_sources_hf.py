"""HF checkpoint directories: sharded index ↔ shard agreement, merged tensors, resource files, errors."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from converters.errors import SourceError, SourceFormatError
from converters.sources import open_hf_dir, open_source
from tests.support.hf import SHARD1, SHARD2, make_sharded


def test_sharded_directory_merges_and_reads_each_shard(tmp_path):
    a, b, c = make_sharded(tmp_path / "m")
    with open_source(tmp_path / "m") as s:
        assert s.kind == "hf" and s.config["model_type"] == "qwen3"
        assert list(s.tensors) == ["a", "b", "c"]
        assert s.tensors["c"].file.name == SHARD2
        np.testing.assert_array_equal(s.array("a"), a)
        np.testing.assert_array_equal(s.array("c"), c.astype(np.float32))
        assert set(s.resource_files) == {"tokenizer.json", "chat_template.jinja"}
        assert s.index_total_size == 48 and s.tensor_bytes == 48
        ident = s.identity()
        assert [f["name"] for f in ident["files"]] == ["config.json", "model.safetensors.index.json", SHARD1, SHARD2]


def test_single_file_directory_without_index(tmp_path):
    d = tmp_path / "one"
    d.mkdir()
    save_file({"w": np.ones(3, np.float32)}, d / "model.safetensors")
    (d / "config.json").write_text('{"model_type": "qwen3"}')
    with open_hf_dir(d) as s:
        assert list(s.tensors) == ["w"] and s.index is None


@pytest.mark.parametrize("case,rule", [
    ("duplicate_across_shards", "hf_duplicate_tensor"),
    ("index_names_missing_tensor", "hf_index_mismatch"),
    ("shard_tensor_not_indexed", "hf_index_mismatch"),
    ("index_points_to_wrong_shard", "hf_index_mismatch"),
    ("shard_name_with_slash", "hf_index_shard_name"),
    ("empty_weight_map", "hf_index_weight_map"),
    ("duplicate_key_in_index", "json_duplicate_key"),
])
def test_index_shard_consistency_rules(tmp_path, case, rule):
    d = tmp_path / case
    wm = {"a": SHARD1, "b": SHARD1, "c": SHARD2}
    shard2 = None
    if case == "duplicate_across_shards":
        shard2 = {"c": np.zeros(2, np.int32), "a": np.zeros(1, np.float32)}
    elif case == "index_names_missing_tensor":
        wm["zz"] = SHARD2
    elif case == "shard_tensor_not_indexed":
        del wm["b"]
    elif case == "index_points_to_wrong_shard":
        wm["b"] = SHARD2
    elif case == "shard_name_with_slash":
        wm["c"] = "../" + SHARD2
    elif case == "empty_weight_map":
        wm = {}
    make_sharded(d, weight_map=wm, shard2=shard2)
    if case == "duplicate_key_in_index":
        (d / "model.safetensors.index.json").write_text('{"weight_map": {"a": "x", "a": "y"}}')
    with pytest.raises(SourceFormatError) as ei:
        open_hf_dir(d)
    assert ei.value.rule == rule and ei.value.category == "file_format_rejected"


def test_missing_shard_and_missing_config(tmp_path):
    d = tmp_path / "m"
    make_sharded(d)
    (d / SHARD2).unlink()
    with pytest.raises(SourceError) as ei:
        open_hf_dir(d)
    assert ei.value.code == "target_unavailable" and ei.value.category == "missing"
    d2 = tmp_path / "nocfg"
    make_sharded(d2, config=False)
    with pytest.raises(SourceError, match="config.json is missing"):
        open_hf_dir(d2)
    with open_hf_dir(d2, require_config=False) as s:
        assert s.config is None and len(s.tensors) == 3


def test_a_bad_shard_is_rejected_naming_it(tmp_path):
    d = tmp_path / "m"
    make_sharded(d)
    data = bytearray((d / SHARD2).read_bytes())
    (d / SHARD2).write_bytes(data + b"trailing")
    with pytest.raises(SourceFormatError) as ei:
        open_hf_dir(d)
    assert ei.value.rule == "st_trailing_data" and SHARD2 in str(ei.value)
