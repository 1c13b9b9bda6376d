"""``convert validate`` on calbin packages: exit codes, --json, -o, --sanitized, kind detection."""

from __future__ import annotations

import json
import re
import sys

import pytest

from converters.cli import main
from tinymodels.calbin import CalbinSpec, write_calbin_package


@pytest.fixture
def clean(tmp_path):
    return write_calbin_package(tmp_path / "pkgs")


def _run(capsys, *argv):
    code = main(["validate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_on_stdout_and_exit_0(capsys, clean):
    code, out, err = _run(capsys, clean.root, "--json")
    doc = json.loads(out)
    assert code == 0 and err == ""
    assert doc["schema"] == "calculet-package-validation/v1" and doc["verdict"] == "pass"
    assert [g["name"] for g in doc["gates"]] == list("ABCDEF")


def test_pass_with_warnings_exits_0_and_renders_tables(capsys, tmp_path):
    fx = write_calbin_package(tmp_path, CalbinSpec(vendor_quirks=True))
    code, out, _ = _run(capsys, fx.root)
    assert code == 0
    assert "pass_with_warnings" in out and "META_SMODEL_TYPE" in out and "Gates" in out


def test_fail_exits_1_and_writes_the_report(capsys, clean, tmp_path):
    meta = clean.root / "model_memory_reserved_info.txt"
    meta.write_text(meta.read_text().replace("n_batch 1", "n_batch 2"))
    target = tmp_path / "validation.json"
    code, out, _ = _run(capsys, clean.root, "-o", target, "--sanitized")
    assert code == 1 and "XREF_BATCH" in out
    doc = json.loads(target.read_text())
    assert doc["verdict"] == "fail" and any(f["code"] == "XREF_BATCH" for f in doc["findings"])
    assert str(tmp_path) not in target.read_text() and '"vaddr' not in target.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")], "no temporary file left"


def test_output_is_never_overwritten(capsys, clean, tmp_path):
    target = tmp_path / "validation.json"
    target.write_text("keep")
    code, _, err = _run(capsys, clean.root, "-o", target)
    assert code == 1 and "output file exists" in err
    assert target.read_text() == "keep"


def test_context_option(capsys, clean):
    code, out, _ = _run(capsys, clean.root, "--json", "--context", 32, "--batch", 1)
    assert code == 0 and json.loads(out)["memory"]["kv_bytes"] == 16384
    code, out, _ = _run(capsys, clean.root, "--json", "--context", 4096)
    assert code == 1 and {f["code"] for f in json.loads(out)["findings"]} >= {"CAP_CONTEXT_EXCEEDED"}
    code, _, err = _run(capsys, clean.root, "--context", 0)
    assert code == 2


def test_internal_json_keeps_addresses_sanitized_drops_them(capsys, clean):
    _, internal, _ = _run(capsys, clean.root, "--json")
    _, shared, _ = _run(capsys, clean.root, "--json", "--sanitized")
    assert "vaddr_ping" in internal and str(clean.root) in internal
    assert '"vaddr' not in shared and '"srcAddr' not in shared and not re.search(r'"/', shared)


def test_missing_path_is_a_one_line_error(capsys, tmp_path):
    code, out, err = _run(capsys, tmp_path / "nope")
    assert code == 1 and out == "" and "No such file or directory" in err


def test_non_calbin_goes_to_the_ninfer_validator(capsys, tmp_path, monkeypatch):
    target = tmp_path / "model.ninfer"
    target.write_bytes(b"not really")
    monkeypatch.setitem(sys.modules, "converters.acceptance.validate_ninfer", None)  # as if not built yet
    code, _, err = _run(capsys, target)
    assert code == 1 and ".ninfer validation is not available" in err
    code, _, err = _run(capsys, target, "--fast")
    assert code == 1 and "--fast applies to calbin packages only" in err


def test_non_calbin_uses_validate_ninfer_when_present(capsys, tmp_path, monkeypatch):
    import types

    from converters.acceptance.report import SCHEMA_NINFER, Finding, Report

    calls = []

    def validate_ninfer(path, *, context=None, batch=None):
        calls.append((path, context, batch))
        r = Report(SCHEMA_NINFER, {"name": path.name})
        r.add(Finding("WARNING_FORMAT", "SOME_WARNING", "B", "x"))
        return r

    monkeypatch.setitem(sys.modules, "converters.acceptance.validate_ninfer",
                        types.SimpleNamespace(validate_ninfer=validate_ninfer))
    target = tmp_path / "model.ninfer"
    target.write_bytes(b"x")
    code, out, _ = _run(capsys, target, "--json", "--context", 8)
    assert code == 0 and json.loads(out)["verdict"] == "pass_with_warnings"
    assert calls == [(target, 8, None)]
