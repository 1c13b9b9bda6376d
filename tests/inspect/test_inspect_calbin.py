"""`convert inspect` on a calbin package: detected by content, summarised from its static acceptance."""

import json

import pytest

from converters.cli import main
from converters.inspect import ViewError, inspect_model_artifact
from tinymodels.calbin import write_calbin_package


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    return write_calbin_package(tmp_path_factory.mktemp("calbin")).root


def test_summary_reports_declarations_and_verdict(package):
    rec = inspect_model_artifact(package)
    assert rec["format"] == "calbin" and rec["status"] == "complete"
    assert rec["model"]["chips"] == 2 and rec["model"]["layers"] == 4
    assert {s["kind"] for s in rec["submodels"]} == {"prefill", "decode"}
    assert set(rec["memory"]["parameter_bytes"]["by_chip"]) == {"chip0", "chip1"}
    assert [g["name"] for g in rec["gates"]] == list("ABCDEF")
    assert rec["verdict"] == "pass"
    assert rec["finding_counts"].get("ERROR", 0) == 0


def test_header_mode_skips_hashing_and_full_mode_hashes(package):
    header = inspect_model_artifact(package, hash="header")
    unhashed = [f["file"] for f in header["package"]["files"] if not f.get("sha256")]
    assert sorted(unhashed) == ["param_blk0.bin", "param_blk1.bin"]
    full = inspect_model_artifact(package, hash="full")
    assert all(f.get("sha256") for f in full["package"]["files"])


def test_defect_changes_the_verdict(tmp_path):
    root = write_calbin_package(tmp_path).root
    (root / "model_memory_reserved_info.txt").write_text("garbage without a grammar\n")
    assert inspect_model_artifact(root)["verdict"] == "fail"


def test_views_are_refused_for_a_package(package):
    with pytest.raises(ViewError):
        inspect_model_artifact(package, detail="summary", view={"collection": "tensors"})


def test_cli_json_and_table(package, capsys):
    assert main(["inspect", str(package), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "calbin"
    assert main(["inspect", str(package)]) == 0
    out = capsys.readouterr().out
    assert "calbin package" in out and "verdict" in out
