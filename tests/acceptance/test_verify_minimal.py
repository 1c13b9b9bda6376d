"""A minimal artifact (``--only-layer L``) is judged on its scope: layer L's parameters are required and
compared, the reference forward is skipped with its reason, whole artifacts are judged as before
(docs/acceptance.md §Minimal artifacts). Build-then-accept runs for it (docs/cli.md §Build then accept)."""

from __future__ import annotations

import json

import pytest

from converters.acceptance.gates.coverage import check_coverage
from converters.acceptance.gates.required import expected_from_artifact
from converters.acceptance.gates.verify import verify
from converters.acceptance.validate_ninfer import validate_ninfer
from converters.cli import main
from ninfer_core import open_artifact
from tinymodels import qwen35

CFG = qwen35.config()


@pytest.fixture(scope="module")
def minimal(tmp_path_factory):
    """A GGUF and a second GGUF of other values (same shapes)."""
    d = tmp_path_factory.mktemp("minimal")
    qwen35.write_gguf(d / "m.gguf", CFG, matrix_type="Q8_0")
    qwen35.write_gguf(d / "other.gguf", CFG, seed=7, matrix_type="Q8_0")
    return d


def test_only_layer_conversion_is_accepted_on_its_layer(minimal, tmp_path, capsys):
    out = tmp_path / "l1.ninfer"
    assert main(["gguf2ninfer", str(minimal / "m.gguf"), str(out), "--only-layer", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    acc = doc["acceptance"]
    assert doc["verdict"] == acc["verdict"] == "incomplete" and acc["failures"] == []
    status = {g["gate"]: g["status"] for g in acc["gates"]}
    assert status == {1: "pass", 2: "pass", 3: "pass", 4: "pass", 5: "pass", 6: "pass", 7: "skipped"}
    assert main(["gguf2ninfer", str(minimal / "m.gguf"), str(tmp_path / "l1b.ninfer"), "--only-layer", "1"]) == 0
    text = capsys.readouterr().out
    assert "ACCEPT: INCOMPLETE" in text and "minimal artifact of layer 1" in text and "not run" not in text


def test_values_are_compared_on_that_layer(minimal, tmp_path, capsys):
    out = tmp_path / "l1.ninfer"
    assert main(["gguf2ninfer", str(minimal / "m.gguf"), str(out), "--only-layer", "1", "--no-verify"]) == 0
    capsys.readouterr()
    report = verify(out, minimal / "m.gguf")
    assert report.layers == [1] and report.gate(4).evidence["parameters"] > 0
    assert report.gate(7).status == "skipped" and "minimal artifact of layer 1" in report.gate(7).skipped
    wrong = verify(out, minimal / "other.gguf")  # same shapes, other values: layer 1 differs
    assert wrong.result == "fail" and wrong.gate(4).status == "fail"
    assert wrong.gate(2).status == "pass"


def test_scope_is_the_recorded_layer_and_whole_artifacts_are_unchanged(minimal, tmp_path, capsys):
    out = tmp_path / "l1.ninfer"
    assert main(["gguf2ninfer", str(minimal / "m.gguf"), str(out), "--only-layer", "1", "--no-verify"]) == 0
    capsys.readouterr()
    assert "NINFER_BINDING_MISSING" not in {f.code for f in validate_ninfer(out).findings}  # gate C: same scope
    with open_artifact(out) as art:
        expected = expected_from_artifact(art).expected
        assert "NINFER_BINDING_MISSING" not in {f.code for f in check_coverage(art, expected, only_layer=1)}
        # judged as a whole artifact, or on another layer, the same bindings miss parameters
        whole = [f.path for f in check_coverage(art, expected) if f.code == "NINFER_BINDING_MISSING"]
        assert "$.bindings.text/token_embedding" in whole
        other = [f.path for f in check_coverage(art, expected, only_layer=2) if f.code == "NINFER_BINDING_MISSING"]
        assert other and all("/layers/2/" in p for p in other)


def test_a_sweep_of_a_minimal_artifact_fails_with_the_count(minimal, tmp_path, capsys):
    out = tmp_path / "l3.ninfer"
    assert main(["gguf2ninfer", str(minimal / "m.gguf"), str(out), "--only-layer", "3", "--no-verify"]) == 0
    capsys.readouterr()
    n = CFG["num_hidden_layers"]
    assert main(["verify", str(out), "--source", str(minimal / "m.gguf"), "--sweep"]) == 1  # a script sees it
    text = capsys.readouterr().out
    assert "VERIFY_SWEEP_PARTIAL" in text and f"VERIFY: FAIL (--sweep: 1/{n} text layers bound)" in text
    report = verify(out, minimal / "m.gguf", sweep=True)
    partial = [f for f in report.gate(4).findings if f.code == "VERIFY_SWEEP_PARTIAL"]
    assert report.result == "fail" and partial and f"1/{n}" in partial[0].evidence
    assert partial[0].detail == {"layers_bound": 1, "layers": n}
    assert verify(out, minimal / "m.gguf").result == "incomplete"  # on its scope, as built


def test_build_then_accept_of_a_minimal_artifact_refuses_a_sweep(minimal, tmp_path, capsys):
    out = tmp_path / "l3.ninfer"
    assert main(["gguf2ninfer", str(minimal / "m.gguf"), str(out), "--only-layer", "3", "--verify-sweep"]) == 2
    assert not out.exists()
