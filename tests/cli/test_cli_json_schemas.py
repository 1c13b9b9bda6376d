"""Every command's ``--json`` document validates against its JSON Schema in docs/schemas/ (docs/cli.md
§JSON contract), checked with the ``jsonschema`` library on real outputs of the tiny models."""

from __future__ import annotations

import json

import pytest

from converters import ROOT
from converters.cli import main
from tinymodels import qwen35

jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")
SCHEMAS = ROOT / "docs" / "schemas"


def schema(name: str) -> dict:
    doc = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def run_json(capsys, *argv) -> tuple[int, dict]:
    rc = main([str(a) for a in argv])
    return rc, json.loads(capsys.readouterr().out)


def valid(doc: dict, name: str) -> dict:
    jsonschema.validate(doc, schema(name), cls=jsonschema.Draft202012Validator)
    return doc


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("schemas")
    qwen35.write_gguf(d / "m.gguf", qwen35.config(), matrix_type="Q8_0")
    return d


def test_every_schema_is_a_valid_json_schema():
    names = sorted(p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json"))
    assert names == ["check", "convert", "error", "formats", "recipes", "repack", "validate", "verify", "version"]
    for n in names:
        schema(n)


def test_conversion_verify_validate_repack_documents(made, tmp_path, capsys):
    out = tmp_path / "m.ninfer"
    rc, doc = run_json(capsys, "gguf2ninfer", made / "m.gguf", out, "--json")
    assert rc == 0 and valid(doc, "convert")["verdict"] == "pass"
    rc, doc = run_json(capsys, "gguf2ninfer", made / "m.gguf", tmp_path / "d.ninfer", "--json", "--dry-run")
    assert rc == 0 and valid(doc, "convert")["objects_detail"]
    rc, doc = run_json(capsys, "verify", out, "--source", made / "m.gguf", "--json")
    assert rc == 0 and valid(doc, "verify")["verdict"] == doc["result"] == "pass"
    rc, doc = run_json(capsys, "verify", out, "--json")  # no source: gates skipped
    assert valid(doc, "verify")["verdict"] == "incomplete"
    rc, doc = run_json(capsys, "validate", out, "--json")
    assert rc == 0 and valid(doc, "validate")["verdict"] == "pass"
    rc, doc = run_json(capsys, "repack", out, tmp_path / "s.ninfer", "--max-file-bytes", "300KiB", "--json")
    assert rc == 0 and len(valid(doc, "repack")["files"]) > 1


def test_check_recipes_formats_version_error_documents(made, tmp_path, capsys):
    rc, doc = run_json(capsys, "check", made / "m.gguf", "--json")
    assert rc == 0 and valid(doc, "check")["verdict"] == "pass" and doc["result"] == "OK"
    assert valid(run_json(capsys, "recipes", "--json")[1], "recipes")
    assert valid(run_json(capsys, "formats", "--json")[1], "formats")
    assert valid(run_json(capsys, "version", "--json")[1], "version")
    rc, doc = run_json(capsys, "inspect", tmp_path / "absent.gguf", "--json")
    assert rc == 1 and valid(doc, "error")["error"]["code"] == "target_unavailable"
    rc, doc = run_json(capsys, "gguf2ninfer", "--json")
    assert rc == 2 and valid(doc, "error")["error"]["category"] == "usage"
