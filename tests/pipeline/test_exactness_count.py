"""One exactness count everywhere (docs/recipes.md §Exactness): the dry run, the conversion summary, the
provenance, ``convert inspect`` and the report show the same labels and counts, for several models and
recipes; the plan predicts value-exact re-encodings as value-exact."""

from __future__ import annotations

import json

import pytest

from converters.cli import main
from converters.inspect.composition import composition
from converters.pipeline.exactness import FLOAT_FORMATS, provenance_counts
from converters.report.facts import gather
from ninfer_core import open_artifact
from tinymodels import qwen35

CASES = [  # (source maker, recipe)
    ("gguf-q8", "groupwise-int"), ("gguf-q8", "bf16"), ("gguf-q8", "exact"), ("gguf-f32", "bf16"),
    ("gguf-f32", "nvfp4"), ("hf-f32", "bf16"), ("hf-bf16", "groupwise-int"),
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("exactness")
    cfg = qwen35.config()
    qwen35.write_gguf(d / "q8.gguf", cfg, matrix_type="Q8_0")
    qwen35.write_gguf(d / "f32.gguf", cfg, matrix_type="F32")
    qwen35.write_hf_dir(d / "hf-f32", cfg, dtype="f32")
    qwen35.write_hf_dir(d / "hf-bf16", cfg, dtype="bf16")
    return {"gguf-q8": ("gguf2ninfer", d / "q8.gguf"), "gguf-f32": ("gguf2ninfer", d / "f32.gguf"),
            "hf-f32": ("st2ninfer", d / "hf-f32"), "hf-bf16": ("st2ninfer", d / "hf-bf16")}


def run_json(capsys, *argv) -> dict:
    assert main([str(a) for a in argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("source, recipe", CASES)
def test_the_five_counts_agree(sources, source, recipe, tmp_path, capsys):
    command, src = sources[source]
    out = tmp_path / "o.ninfer"
    dry = run_json(capsys, command, src, out, "--recipe", recipe, "--dry-run", "--json")
    done = run_json(capsys, command, src, out, "--recipe", recipe, "--json", "--no-verify")
    with open_artifact(out) as art:
        per = art.provenance["objects"]
    report = gather(out)
    assert dry["exactness"] == done["exactness"] == provenance_counts(per) == composition(out)["exactness"] \
        == report.exactness
    assert sum(dry["exactness"].values()) == sum(r["kind"] == "tensor" for r in dry["objects_detail"]
                                                 if r["origin"] == "produced")
    planned = {r["id"]: r["exactness"] for r in dry["objects_detail"]}
    assert {k: e["exactness"] for k, e in per.items() if "exactness" in e} == \
        {k: v for k, v in planned.items() if k in per and "exactness" in per[k]}  # object by object
    assert {o.id: o.exactness for o in report.objects} == {k: planned[k] for k in (o.id for o in report.objects)}
    for oid, e in per.items():  # a float re-encoding is labelled as measured: value-exact iff nothing changed
        if "measured_error" in e and done_format(dry, oid) in FLOAT_FORMATS:
            assert (e["measured_error"]["max_abs"] == 0) == (e["exactness"] == "value-exact"), oid
    rc = main(["inspect", str(out)])
    line = next(x for x in capsys.readouterr().out.splitlines() if "exactness (provenance)" in x)
    assert rc == 0 and line.endswith(", ".join(f"{k} {v:,}" for k, v in done["exactness"].items()))


def done_format(dry: dict, oid: str) -> str | None:
    return next((r.get("format") for r in dry["objects_detail"] if r["id"] == oid), None)


def test_value_exact_reencodings_are_predicted(sources, capsys, tmp_path):
    """Q8_0 → groupwise-int: the float32 norms shifted back by −1 fit bf16, the plan says so before writing."""
    command, src = sources["gguf-q8"]
    dry = run_json(capsys, command, src, tmp_path / "d.ninfer", "--dry-run", "--json")
    rows = {r["id"]: r for r in dry["objects_detail"]}
    norm = rows["text/layers/0/input_norm"]
    assert norm["method"] == ["encode"] and norm["format"] == "bf16" and norm["exactness"] == "value-exact"
    q4 = [r for r in rows.values() if r.get("format") == "q4_g64_fp16"]
    assert q4 and all(r["exactness"] == "requantized" for r in q4)  # Q8_0 into 4 bits: not probed, requantized
    assert dry["exactness"]["value-exact"] > 0
