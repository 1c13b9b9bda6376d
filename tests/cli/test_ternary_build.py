"""The ternary build as designed (docs/ternary.md §1, README.md §Ternary packing): a ternary source (found by
its GGML types, not its name) with a template builds the ternary recipe without ``--recipe``; a template
that is not groupwise-int is refused with the design's reason; ``NINFER_TERNARY_GGUF`` and
``NINFER_TERNARY_TEMPLATE`` stand in for the source and the template in every mode (build, layer 3,
check); a missing ``--template`` of a plain model is not told about ternary packing."""

from __future__ import annotations

import json

import pytest

from converters.pipeline.convert import convert
from converters.sources import open_source
from converters.sources.ternary import ternary_tensors
from ninfer_core import open_artifact
from tests.support.cli import run
from tinymodels import bonsai, qwen35


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A Bonsai GGUF (PTQ1_0), a groupwise-int and an nvfp4 template of it."""
    d = tmp_path_factory.mktemp("ternary-build")
    bonsai.write_gguf(d / "b.gguf", bonsai.config(linear_value_head_dim=128))  # ssm_out moves whole groups
    convert(d / "b.gguf", d / "tpl.ninfer", recipe="groupwise-int", workers=1)
    convert(d / "b.gguf", d / "nvfp4.ninfer", recipe="nvfp4", workers=1)
    qwen35.write_gguf(d / "plain.gguf", qwen35.config(), matrix_type="Q8_0")
    return d


def test_ternary_is_found_by_content(pair):
    with open_source(pair / "b.gguf") as src:
        assert ternary_tensors(src) and all(src.tensors[n].dtype == "PTQ1_0" for n in ternary_tensors(src))
    with open_source(pair / "plain.gguf") as src:
        assert ternary_tensors(src) == []


def test_a_ternary_source_with_a_template_builds_the_ternary_recipe(pair, tmp_path, capsys):
    out = tmp_path / "b.ninfer"
    rc, stdout, err = run(capsys, "gguf2ninfer", pair / "b.gguf", out, "--template", pair / "tpl.ninfer", "--json")
    doc = json.loads(stdout)
    assert rc == 0, err
    assert doc["recipe"] == "ternary" and doc["verdict"] == "pass"
    with open_artifact(out) as art:
        mats = [o for o in art.objects if o.id.endswith(("query_key", "gate_up", "mlp/down"))]
        assert mats and all(o.format == "t2_g128_fp16" for o in mats)
        assert art.metadata["identity"]["weights_id"] == "ternary"


def test_a_template_of_another_kind_is_refused(pair, tmp_path, capsys):
    out = tmp_path / "x.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", pair / "b.gguf", out, "--template", pair / "nvfp4.ninfer")
    assert rc == 1 and not out.exists()
    assert "the template is a nvfp4 artifact; the ternary recipe packs a ternary source onto a groupwise-int " \
           "template of the same model, whose grouping it keeps (docs/ternary.md §1)" in err
    assert "template_kind" in err
    # a recipe the user names is the user's: an nvfp4 build onto the nvfp4 template goes on
    assert run(capsys, "gguf2ninfer", pair / "b.gguf", out, "--template", pair / "nvfp4.ninfer", "--recipe",
               "nvfp4", "--no-verify")[0] == 0


MODES = {"check": ["check", "--json"], "layer3": ["gguf2ninfer", "{out}", "--only-layer", "3", "--json"],
         "build": ["gguf2ninfer", "{out}", "--json", "--no-verify"]}


@pytest.mark.parametrize("mode", MODES)
def test_the_variables_stand_in_for_source_and_template_in_every_mode(pair, tmp_path, capsys, monkeypatch, mode):
    argv = [a.format(out=tmp_path / "o.ninfer") for a in MODES[mode]]
    monkeypatch.setenv("NINFER_TERNARY_GGUF", str(pair / "b.gguf"))
    monkeypatch.setenv("NINFER_TERNARY_TEMPLATE", str(pair / "nvfp4.ninfer"))  # the template is read: refused
    rc, _, err = run(capsys, *argv)
    assert rc == 1 and "the template is a nvfp4 artifact" in err and not (tmp_path / "o.ninfer").exists()
    monkeypatch.setenv("NINFER_TERNARY_TEMPLATE", str(pair / "tpl.ninfer"))
    rc, stdout, err = run(capsys, *argv)
    assert rc == 0, err
    doc = json.loads(stdout)
    assert doc["recipe"] == "ternary"
    if mode == "check":
        assert doc["template"] == str(pair / "tpl.ninfer") and doc["source"] == str(pair / "b.gguf")
    else:
        assert doc["only_layer"] == (3 if mode == "layer3" else None)
        assert doc.get("verdict") == ("incomplete" if mode == "layer3" else None)
        with open_artifact(tmp_path / "o.ninfer") as art, open_artifact(pair / "tpl.ninfer") as tpl:
            with open_source(pair / "b.gguf") as src:  # the source came from the variable
                assert art.provenance["source"]["header_sha256"] == src.identity()["header_sha256"]
            if mode == "build":  # the template is the skeleton: its order
                ids = [o.id for o in art.objects]
                assert ids[:len(tpl.objects)] == [o.id for o in tpl.objects]


def test_a_plain_model_does_not_take_the_ternary_template(pair, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NINFER_TERNARY_TEMPLATE", str(pair / "nvfp4.ninfer"))
    rc, stdout, err = run(capsys, "gguf2ninfer", pair / "plain.gguf", tmp_path / "p.ninfer", "--no-verify", "--json")
    assert rc == 0, err
    assert json.loads(stdout)["recipe"] == "groupwise-int"


def test_without_the_source_variable_one_argument_is_refused_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("NINFER_TERNARY_GGUF", raising=False)
    rc, stdout, err = run(capsys, "gguf2ninfer", tmp_path / "o.ninfer", "--json")
    assert rc == 2 and "NINFER_TERNARY_GGUF" in err and "missing SOURCE" in err
    assert json.loads(stdout)["error"]["category"] == "usage"


def test_a_missing_template_of_a_plain_model_is_not_about_ternary(pair, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("NINFER_TERNARY_TEMPLATE", raising=False)
    rc, _, err = run(capsys, "gguf2ninfer", pair / "plain.gguf", tmp_path / "o.ninfer", "--template",
                     tmp_path / "absent.ninfer")
    assert rc == 1 and "template given by --template does not exist" in err
    assert "ternary" not in err.lower() and "groupwise-int" not in err
    rc, _, err = run(capsys, "gguf2ninfer", pair / "b.gguf", tmp_path / "o.ninfer", "--recipe", "ternary",
                     "--template", tmp_path / "absent.ninfer")
    assert rc == 1 and "a ternary conversion needs a groupwise-int artifact" in err
