"""gguf-split sets (docs/inspect.md §Split GGUF files): any shard opens the whole set, read as the unsplit
file reads; a missing, extra or mismatched shard is a typed error naming that shard, the field and the rule.

The sets are written by gguf-py's ``GGUFWriter(split_max_tensors=…, split_max_size=…)`` from a tiny Qwen3
GGUF (:mod:`tests.support.gguf_split`), and damaged the way gguf-py's own scripts edit files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFEndian, GGUFReader, GGUFValueType

from converters.errors import SourceError
from converters.sources import GGUFSource, GGUFSplitSource, open_source
from tests.support.gguf_split import set_key, split_gguf, write_shard
from tinymodels import qwen3

SPLIT_KEYS = {"split.no", "split.count", "split.tensors.count"}
U16, I32 = GGUFValueType.UINT16, GGUFValueType.INT32


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    qwen3.write_gguf(d / "m.gguf", qwen3.config(), matrix_type="Q8_0")
    qwen3.write_gguf(d / "three.gguf", qwen3.config(num_hidden_layers=3, max_window_layers=3), seed=7,
                     matrix_type="Q8_0")
    return d


@pytest.fixture
def shards(models, tmp_path) -> list[Path]:
    """A fresh 4-shard set of m.gguf (46 tensors, at most 12 a shard) to damage."""
    paths = split_gguf(models / "m.gguf", tmp_path / "s.gguf", max_tensors=12)
    assert [p.name for p in paths] == [f"s-0000{i}-of-00004.gguf" for i in range(1, 5)]
    return paths


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else 0


@pytest.mark.parametrize("limits", [{"max_tensors": 12}, {"max_size": 200_000}], ids=["tensors", "size"])
@pytest.mark.parametrize("named", [0, 1, -1])
def test_any_shard_reads_the_whole_set_as_the_unsplit_file(models, tmp_path, limits, named):
    paths = split_gguf(models / "m.gguf", tmp_path / "s.gguf", **limits)
    held = {t.name: p for p in paths for t in GGUFReader(p).tensors}  # gguf-py's own reading of each shard
    with open_source(paths[named]) as s, open_source(models / "m.gguf") as ref:
        assert isinstance(s, GGUFSplitSource) and isinstance(ref, GGUFSource)
        assert s.kind == "gguf" and s.path == paths[0] and (s.split.no, s.split.count, s.split.tensors) == (0, len(paths), 46)
        assert list(s.tensors) == list(ref.tensors)
        for name, t in s.tensors.items():
            r = ref.tensors[name]
            assert (t.dtype, t.shape, t.index, t.read_length) == (r.dtype, r.shape, r.index, r.read_length)
            assert t.file == held[name]
            assert np.array_equal(s.raw(name), ref.raw(name))
        assert set(s.metadata) == set(ref.metadata) | SPLIT_KEYS
        assert all(s.metadata[k] == ref.metadata[k] for k in ref.metadata)
        ident = s.identity()
    assert [f["name"] for f in ident["files"]] == [p.name for p in paths]
    lines = b""
    for f, p in zip(ident["files"], paths, strict=True):
        assert f["size"] == p.stat().st_size and f["path"] == str(p.resolve())
        assert f["header_sha256"] == hashlib.sha256(p.read_bytes()[: f["header_length"]]).hexdigest()
        lines += f"{p.name}\0{f['header_sha256']}\n".encode()
    assert ident["header_sha256"] == hashlib.sha256(lines).hexdigest()
    assert ident["size"] == sum(p.stat().st_size for p in paths) and ident["path"] == str(paths[0].resolve())


def test_count_0_or_1_is_one_file(tmp_path):
    """``llama-gguf-split --merge`` leaves split.count 0 in the merged file; a count of 1 is one file too."""
    for count in (0, 1):
        p = write_shard(tmp_path / f"merged{count}.gguf", "qwen3",
                        {"split.no": (U16, 0), "split.count": (U16, count), "split.tensors.count": (I32, 1)},
                        {"x": np.ones(4)})
        with open_source(p) as s:
            assert isinstance(s, GGUFSource) and list(s.tensors) == ["x"]


def _copy(src: Path, name: str) -> Path:
    return Path(shutil.copy(src, src.with_name(name)))


def _truncate(p: Path) -> Path:
    os.truncate(p, p.stat().st_size // 2)
    return p


def _tensors_count(paths, which) -> Path:
    for p in which(paths):
        set_key(p, "split.tensors.count", 47)
    return which(paths)[-1 if len(which(paths)) > 1 else 0]


# (damage(paths, models) -> the file the error names, rule, field)
DAMAGE = {
    "missing": (lambda ps, m: (ps[2].unlink(), ps[2])[1], "gguf_split_missing", None),
    "extra past the count": (lambda ps, m: _copy(ps[1], "s-00005-of-00004.gguf"), "gguf_split_extra", None),
    "extra of another count": (lambda ps, m: _copy(ps[1], "s-00001-of-00003.gguf"), "gguf_split_extra", None),
    "truncated": (lambda ps, m: _truncate(ps[2]), "gguf_tensor_range", None),
    "wrong split.count": (lambda ps, m: (set_key(ps[3], "split.count", 5), ps[3])[1], "gguf_split_count",
                          "split.count"),
    "wrong split.no": (lambda ps, m: (set_key(ps[2], "split.no", 1), ps[2])[1], "gguf_split_no", "split.no"),
    "single file as a shard": (lambda ps, m: Path(shutil.copy(m / "m.gguf", ps[1])), "gguf_split_count",
                               "split.count"),
    "tensor count in every shard": (lambda ps, m: (_tensors_count(ps, lambda x: x), ps[0])[1],
                                    "gguf_split_tensors_count", "split.tensors.count"),
    "tensor count in the first shard": (lambda ps, m: (_tensors_count(ps, lambda x: x[:1]), ps[1])[1],
                                        "gguf_split_metadata", "split.tensors.count"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
@pytest.mark.parametrize("named", [0, 3])
def test_a_damaged_set_is_a_typed_error_naming_the_shard(shards, models, case, named):
    damage, rule, field = DAMAGE[case]
    culprit = damage(shards, models)
    if culprit == shards[named] and case in ("truncated", "single file as a shard", "wrong split.no",
                                            "wrong split.count"):
        named = 1  # the damaged shard named itself says something else about the set: name another one
    before = open_fds()
    with pytest.raises(SourceError) as e:
        open_source(shards[named])
    assert (e.value.rule, e.value.file, e.value.json_path if field else None) == (rule, str(culprit), field)
    assert open_fds() == before  # the shards opened before the refusal are closed again


def test_a_shard_of_another_model(models, shards, tmp_path):
    """A shard of a 3-layer model (35 tensors) in the 4-layer set: its split.count differs, or — split
    into as many shards — its split.tensors.count."""
    three_of_3 = split_gguf(models / "three.gguf", tmp_path / "o3" / "t.gguf", max_tensors=12)
    assert len(three_of_3) == 3
    shutil.copy(three_of_3[1], shards[1])
    with pytest.raises(SourceError) as e:
        open_source(shards[0])
    assert (e.value.rule, e.value.file, e.value.json_path) == ("gguf_split_count", str(shards[1]), "split.count")
    three_of_4 = split_gguf(models / "three.gguf", tmp_path / "o4" / "t.gguf", max_tensors=9)
    assert len(three_of_4) == 4
    shutil.copy(three_of_4[1], shards[1])
    with pytest.raises(SourceError) as e:
        open_source(shards[3])
    assert (e.value.rule, e.value.file, e.value.json_path) == ("gguf_split_metadata", str(shards[1]),
                                                               "split.tensors.count")
    assert "split.tensors.count differs from the first shard s-00001-of-00004.gguf's" in e.value.message


def test_a_shard_not_named_as_llama_cpp_names_it(shards):
    renamed = _copy(shards[0], "model.gguf")
    with pytest.raises(SourceError) as e:
        open_source(renamed)
    assert (e.value.rule, e.value.file, e.value.json_path) == ("gguf_split_name", str(renamed), "split.no")
    assert "'-00001-of-00004.gguf'" in e.value.message


def _hand_set(d: Path, first: dict, second: dict, tensors, endian) -> list[Path]:
    d.mkdir()
    return [write_shard(d / f"h-0000{i + 1}-of-00002.gguf", "qwen3", keys, t, endianess=e)
            for i, (keys, t, e) in enumerate(zip((first, second), tensors, endian, strict=True))]


def _keys(no: int, count=(U16, 2), tensors=(I32, 2)) -> dict:
    return {"split.no": (U16, no), "split.count": count, **({"split.tensors.count": tensors} if tensors else {})}


@pytest.mark.parametrize("case, rule, culprit, field", [
    ("duplicate tensor", "gguf_split_duplicate_tensor", 1, "a"),
    ("split.count of another type", "gguf_split_key_type", 1, "split.count"),
    ("split.no missing", "gguf_split_key", 1, "split.no"),
    ("split.tensors.count missing", "gguf_split_key", 0, "split.tensors.count"),
    ("another byte order", "gguf_split_format", 1, "version"),
])
def test_sets_the_writer_refuses_to_make(tmp_path, case, rule, culprit, field):
    first, second, tensors, endian = _keys(0), _keys(1), ({"a": np.ones(4)}, {"b": np.ones(4)}), (GGUFEndian.LITTLE,) * 2
    if case == "duplicate tensor":
        tensors = ({"a": np.ones(4)}, {"a": np.ones(4)})
    elif case == "split.count of another type":
        second = _keys(1, count=(GGUFValueType.UINT32, 2))
    elif case == "split.no missing":
        del second["split.no"]
    elif case == "split.tensors.count missing":
        first, second = _keys(0, tensors=None), _keys(1, tensors=None)
    else:
        endian = (GGUFEndian.LITTLE, GGUFEndian.BIG)
    paths = _hand_set(tmp_path / "h", first, second, tensors, endian)
    with pytest.raises(SourceError) as e:
        open_source(paths[0])
    assert (e.value.rule, e.value.file, e.value.json_path) == (rule, str(paths[culprit]), field)
