"""``convert gguf2ninfer`` / ``st2ninfer`` from the command line: refusals, dry run, only-layer, JSON, splitting."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.cli import main
from converters.model.engine import logical_array
from ninfer_core import open_artifact, validate
from tinymodels import qwen35

CFG = qwen35.config()


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    qwen35.write_gguf(d / "m.gguf", CFG, matrix_type="Q8_0")
    qwen35.write_hf_dir(d / "hf", CFG)
    return d


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_convert_json_summary(src, tmp_path, capsys):
    out = tmp_path / "a.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--recipe", "groupwise-int", "--json")
    assert rc == 0
    s = json.loads(stdout)
    assert s["objects"] == 103 and s["recipe"] == "groupwise-int" and s["borrowed"]["objects"] == 0
    assert s["produced"]["bytes"] == s["total_bytes"]
    assert set(s["exactness"]) == {"bit-exact", "value-exact", "requantized"}
    with open_artifact(out) as art:  # every produced tensor counted once (docs/recipes.md §Exactness)
        assert sum(s["exactness"].values()) == sum(o.kind == "tensor" for o in art.objects) == s["objects"] - 4
    with open_artifact(out) as art:
        assert art.artifact_id == s["artifact_id"] and art.payload_bytes >= s["total_bytes"]


def test_human_summary_table(src, tmp_path, capsys):
    rc, stdout, _ = run(capsys, "st2ninfer", src / "hf", tmp_path / "b.ninfer", "--recipe", "bf16")
    assert rc == 0
    for word in ("conversion summary", "produced", "borrowed", "exactness bit-exact", "artifact_id"):
        assert word in stdout


def test_refuses_to_overwrite_before_reading_the_input(src, tmp_path, capsys):
    out = tmp_path / "exists.ninfer"
    out.write_bytes(b"precious")
    rc, _, err = run(capsys, "gguf2ninfer", tmp_path / "no-such.gguf", out)
    assert rc == 1 and "already exists" in err and "never overwritten" in err
    assert out.read_bytes() == b"precious"


def test_wrong_command_for_the_source_kind(src, tmp_path, capsys):
    rc, _, err = run(capsys, "st2ninfer", src / "m.gguf", tmp_path / "c.ninfer")
    assert rc == 1 and "use gguf2ninfer" in err
    assert not (tmp_path / "c.ninfer").exists()


def test_dry_run_writes_nothing(src, tmp_path, capsys):
    out = tmp_path / "d.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--dry-run", "--json", "--recipe", "nvfp4")
    assert rc == 0 and not out.exists() and list(tmp_path.iterdir()) == []
    s = json.loads(stdout)
    assert s["dry_run"] and "artifact_id" not in s
    rows = {r["id"]: r for r in s["objects_detail"]}
    assert rows["text/layers/3/attention/query_key_gate_value"]["format"] == "nvfp4"
    assert rows["text/token_embedding"]["exactness"] == "bit-exact"
    rc, stdout, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--dry-run")
    assert rc == 0 and "nothing written" in stdout and not out.exists()


def test_only_layer_is_minimal(src, tmp_path, capsys):
    out = tmp_path / "l3.ninfer"
    rc, _, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--only-layer", "3", "--recipe", "groupwise-int")
    assert rc == 0
    assert not [f for f in validate(out) if f.severity == "ERROR"]
    ref = qwen35.logical_parameters(CFG)
    with open_artifact(out) as art:
        tensors = {o.id for o in art.objects if o.kind == "tensor"}
        assert tensors and all(t.startswith("text/layers/3/") for t in tensors)
        assert {o.id for o in art.objects if o.kind == "resource"} == {f"frontend/{r}" for r in (
            "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")}
        assert set(art.bindings) == {n for n in ref if n.startswith("text/layers/3/")}
        got = logical_array(art, "text/layers/3/attention/gate", ref["text/layers/3/attention/gate"].shape)
        assert np.corrcoef(got.reshape(-1), ref["text/layers/3/attention/gate"].reshape(-1))[0, 1] > 0.99
    rc, _, err = run(capsys, "gguf2ninfer", src / "m.gguf", tmp_path / "l9.ninfer", "--only-layer", "9")
    assert rc == 1 and "layers 0..7" in err


def test_max_file_bytes_splits(src, tmp_path, capsys):
    out = tmp_path / "s.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--max-file-bytes", "256KiB", "--json",
                        "--recipe", "exact", "--no-verify")  # about files, not acceptance
    assert rc == 0
    s = json.loads(stdout)
    assert len(s["files"]) > 2
    assert all(p.stat().st_size <= 256 * 1024 for p in tmp_path.iterdir())
    assert not [f for f in validate(out) if f.severity == "ERROR"]


def test_bad_recipe_is_refused_before_reading(src, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: d\nroles:\n  mlp.*: {format: q7}\n")
    rc, _, err = run(capsys, "gguf2ninfer", tmp_path / "missing.gguf", tmp_path / "x.ninfer", "--recipe", bad)
    assert rc == 1 and "bad.yaml:4" in err and "unknown format 'q7'" in err


def test_a_source_truncated_after_opening_is_a_typed_error(src, tmp_path):
    import shutil

    from converters.errors import SourceError
    from converters.mapping.recipes import load_recipe
    from converters.model.engine import open_model
    from converters.pipeline.convert import plan_conversion
    from converters.pipeline.produce import Producer

    path = tmp_path / "t.gguf"
    shutil.copy(src / "m.gguf", path)
    with open_model(path) as model:
        plan = plan_conversion(model, load_recipe("exact"))
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
        last = [o for o in plan.objects if o.kind == "tensor"][-1]
        with pytest.raises(SourceError, match="cannot map rows"):
            Producer(model.sources).produce(last)
