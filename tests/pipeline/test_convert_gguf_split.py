"""gguf-split inputs end to end (docs/inspect.md §Split GGUF files): ``gguf2ninfer``, ``verify --source``,
``check``, ``inspect`` and ``--mmproj`` accept any shard of a set; the conversion of the set writes what the
conversion of the unsplit file writes (every object's bytes, bindings, uses, components and metadata —
:func:`converters.regress.digest.artifact_digest` — and the provenance but for the source's paths); a
damaged set is one line naming the shard, exit 1, nothing written.

The sets are made by gguf-py's ``GGUFWriter`` split writer (:mod:`tests.support.gguf_split`)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from converters import ROOT
from converters.cli import main
from converters.pipeline.convert import convert
from converters.regress.digest import artifact_digest
from ninfer_core import open_artifact
from tests.support.gguf_split import split_gguf
from tinymodels import qwen3, qwen35, vision

AID = "0123456789abcdef0123456789abcdef"
TEXT = qwen35.config()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("split")
    qwen3.write_gguf(d / "m.gguf", qwen3.config(), matrix_type="Q8_0")
    sets = {"tensors": split_gguf(d / "m.gguf", d / "t" / "m.gguf", max_tensors=12),
            "size": split_gguf(d / "m.gguf", d / "z" / "m.gguf", max_size=200_000)}
    return d, sets


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def provenance_but_paths(path, replace: dict[str, str]) -> dict:
    with open_artifact(path) as art:
        prov = {k: v for k, v in art.provenance.items() if k != "source"}
    text = json.dumps(prov, sort_keys=True)
    for old, new in replace.items():
        text = text.replace(old, new)
    return json.loads(text)


@pytest.mark.parametrize("recipe", ["exact", "groupwise-int"])
@pytest.mark.parametrize("limit", ["tensors", "size"])
def test_the_set_converts_to_the_unsplit_files_bytes(made, tmp_path, recipe, limit):
    d, sets = made
    shards = sets[limit]
    convert(d / "m.gguf", tmp_path / "u.ninfer", recipe=recipe, artifact_id=AID, workers=1)
    convert(shards[2], tmp_path / "s.ninfer", recipe=recipe, artifact_id=AID, workers=1)
    assert artifact_digest(tmp_path / "s.ninfer") == artifact_digest(tmp_path / "u.ninfer")
    assert provenance_but_paths(tmp_path / "s.ninfer", {str(shards[0]): str(d / "m.gguf")}) == \
        provenance_but_paths(tmp_path / "u.ninfer", {})
    with open_artifact(tmp_path / "s.ninfer") as art:
        source = art.provenance["source"]
    assert source["kind"] == "gguf" and source["path"] == str(shards[0].resolve())
    assert [(f["name"], f["size"]) for f in source["files"]] == [(p.name, p.stat().st_size) for p in shards]


def test_every_command_reads_the_set(made, tmp_path, capsys):
    jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")
    d, sets = made
    shards = sets["tensors"]
    out = tmp_path / "m.ninfer"
    rc, stdout, err = run(capsys, "gguf2ninfer", shards[1], out, "--recipe", "exact", "--json")
    assert rc == 0, err
    assert json.loads(stdout)["verdict"] == "pass"  # acceptance read the set as its source
    rc, stdout, err = run(capsys, "verify", out, "--source", shards[3], "--json")
    assert rc == 0 and json.loads(stdout)["verdict"] == "pass", err
    rc, stdout, err = run(capsys, "check", shards[0], "--recipe", "exact", "--json")
    assert rc == 0 and json.loads(stdout)["result"] == "OK", err
    rc, stdout, err = run(capsys, "inspect", shards[2], "--hash", "full", "--json")
    assert rc == 0, err
    rec = json.loads(stdout)
    schema = json.loads((ROOT / "docs" / "schemas" / "evidence.schema.json").read_text())
    jsonschema.validate(rec, schema, cls=jsonschema.Draft202012Validator)
    rc, stdout, _ = run(capsys, "inspect", d / "m.gguf", "--json")
    single = json.loads(stdout)
    assert rec["format"] == "gguf-split" and rec["artifact"]["kind"] == "file-set"
    assert rec["details"]["split"] == {"count": 4, "tensors_count": 46, "prefix": "m"}
    assert [f["name"] for f in rec["artifact"]["files"]] == [p.name for p in shards]
    assert [f["sha256"] for f in rec["body"]["files"]] == [hashlib.sha256(p.read_bytes()).hexdigest() for p in shards]
    same = ("name", "type", "type_id", "shape", "byte_length", "parameter_count")
    assert [{k: r[k] for k in same} for r in rec["tensors"]] == [{k: r[k] for k in same} for r in single["tensors"]]
    assert [r["index"] for r in rec["tensors"]] == list(range(46))
    assert {r["file"] for r in rec["tensors"]} == {p.name for p in shards}
    assert rec["metadata"][:-3] == single["metadata"]  # the first shard's, with its split keys last
    assert rec["totals"] == single["totals"]


def test_a_damaged_set_is_one_line_and_nothing_written(made, tmp_path, capsys):
    d, sets = made
    for p in sets["tensors"]:
        shutil.copy(p, tmp_path / p.name)
    shards = [tmp_path / p.name for p in sets["tensors"]]
    shards[2].unlink()
    out = tmp_path / "out" / "m.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", shards[0], out, "--recipe", "exact")
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert str(shards[2]) in err and "gguf_split_missing" in err
    assert not out.exists()
    rc, stdout, _ = run(capsys, "gguf2ninfer", shards[0], out, "--recipe", "exact", "--json")
    doc = json.loads(stdout)
    assert rc == 1 and doc["schema"] == "ninfer-error/v1"
    assert (doc["error"]["rule"], doc["error"]["file"]) == ("gguf_split_missing", str(shards[2]))
    assert not out.exists()


def test_a_shard_of_another_model_with_the_same_tensors(made, tmp_path, capsys):
    """Same architecture, layer count and split, another FFN width: the split keys agree, the shapes do
    not, and the refusal names the shard that holds the tensor."""
    d, sets = made
    qwen3.write_gguf(tmp_path / "wide.gguf", qwen3.config(intermediate_size=384), seed=5, matrix_type="Q8_0")
    wide = split_gguf(tmp_path / "wide.gguf", tmp_path / "w" / "x.gguf", max_tensors=12)
    for p in sets["tensors"]:
        shutil.copy(p, tmp_path / p.name)
    shutil.copy(wide[2], tmp_path / sets["tensors"][2].name)
    out = tmp_path / "m.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", tmp_path / sets["tensors"][0].name, out, "--recipe", "exact")
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert f"(in {sets['tensors'][2].name})" in err and "shape_mismatch" in err
    assert not out.exists()


def test_a_split_mmproj(tmp_path, capsys):
    vision.write_mmproj(tmp_path / "mmproj.gguf", vision.config(), TEXT)
    qwen35.write_gguf(tmp_path / "m.gguf", TEXT, matrix_type="Q8_0")
    shards = split_gguf(tmp_path / "mmproj.gguf", tmp_path / "s" / "mmproj.gguf", max_tensors=10)
    kw = dict(recipe="exact", components=("text", "vision"), artifact_id=AID, workers=1)
    convert(tmp_path / "m.gguf", tmp_path / "u.ninfer", inputs={"mmproj": tmp_path / "mmproj.gguf"}, **kw)
    convert(tmp_path / "m.gguf", tmp_path / "s.ninfer", inputs={"mmproj": shards[-1]}, **kw)
    assert artifact_digest(tmp_path / "s.ninfer") == artifact_digest(tmp_path / "u.ninfer")
    with open_artifact(tmp_path / "s.ninfer") as art:
        assert "vision" in art.components
    rc, stdout, err = run(capsys, "verify", tmp_path / "s.ninfer", "--source", tmp_path / "m.gguf",
                          "--mmproj", shards[1], "--json")
    assert rc == 0 and json.loads(stdout)["verdict"] == "pass", err
