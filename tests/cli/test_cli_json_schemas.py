"""Every command's ``--json`` document validates against its JSON Schema in docs/schemas/ (docs/cli.md
§JSON contract), checked with the ``jsonschema`` library on real outputs of the tiny models."""

from __future__ import annotations

import json

import pytest

from converters import ROOT
from converters.cli import main
from tinymodels import qwen35
from tinymodels.calbin import write_calbin_package

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
    assert names == ["acceptance-record", "calbin-evidence", "check", "convert", "encode", "error", "evidence",
                     "evidence-summary", "formats", "inspect", "recipes", "regress", "repack", "report", "seal", "staged",
                     "validate", "verify", "version"]
    for n in names:
        schema(n)


def test_conversion_verify_validate_repack_documents(made, tmp_path, capsys):
    out = tmp_path / "m.ninfer"
    rc, doc = run_json(capsys, "gguf2ninfer", made / "m.gguf", out, "--json")
    assert rc == 0 and valid(doc, "convert")["verdict"] == "pass"
    rc, doc = run_json(capsys, "gguf2ninfer", made / "m.gguf", tmp_path / "d.ninfer", "--json", "--dry-run")
    assert rc == 0 and valid(doc, "convert")["objects_detail"]
    assert valid(json.loads((tmp_path / "m.ninfer.acceptance.json").read_text()), "acceptance-record")["accepted"]
    rc, doc = run_json(capsys, "verify", out, "--source", made / "m.gguf", "--json")
    assert rc == 0 and valid(doc, "verify")["verdict"] == doc["result"] == "pass"
    assert doc["acceptance_record"]["state"] == "judged" and doc["acceptance_record"]["accepted"] is True
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


def test_inspect_documents_of_every_kind(made, tmp_path, capsys):
    hf, shard = tmp_path / "hf", tmp_path / "one"
    qwen35.write_hf_dir(hf, qwen35.config(), shards=2)
    qwen35.write_hf_dir(shard, qwen35.config(), shards=1)
    art = tmp_path / "m.ninfer"
    assert main(["gguf2ninfer", str(made / "m.gguf"), str(art), "--no-verify"]) == 0
    capsys.readouterr()
    for path, fmt in ((made / "m.gguf", "gguf"), (shard / "model.safetensors", "safetensors"),
                      (hf, "safetensors-sharded"), (art, "ninfer")):
        rc, doc = run_json(capsys, "inspect", path, "--json")
        assert rc == 0 and valid(doc, "evidence")["format"] == fmt
        assert isinstance(doc["totals"]["parameter_count"], int) and doc["totals"]["parameter_count"] > 0
    rc, doc = run_json(capsys, "inspect", made / "m.gguf", "--json", "--detail", "summary")
    assert rc == 0 and "page" not in valid(doc, "evidence-summary")
    rc, doc = run_json(capsys, "inspect", made / "m.gguf", "--json", "--detail", "summary", "--view",
                       '{"collection": "tensors", "names": ["output.weight"]}')
    assert rc == 0 and valid(doc, "evidence-summary")["page"]["rows"][0]["name"] == "output.weight"
    rc, doc = run_json(capsys, "inspect", write_calbin_package(tmp_path / "cb").root, "--json")
    assert rc == 0 and valid(doc, "calbin-evidence")["verdict"] == "pass"


def test_evidence_schema_holds_counts_to_integers_and_the_interpretation_to_evidence_false(made, capsys):
    rc, doc = run_json(capsys, "inspect", made / "m.gguf", "--json")
    for broken in ({**doc, "totals": {**doc["totals"], "parameter_count": str(doc["totals"]["parameter_count"])}},
                   {**doc, "interpretations": {"modern_ggml": {"evidence": True}}}):
        with pytest.raises(jsonschema.ValidationError):
            valid(broken, "evidence")


def test_staged_encode_seal_and_regress_documents(made, tmp_path, capsys):
    plan = tmp_path / "p.json"
    rc, doc = run_json(capsys, "gguf2ninfer", made / "m.gguf", tmp_path / "s.ninfer", "--json", "--plan-only", plan)
    assert rc == 0 and valid(doc, "staged")["plan"] == str(plan.resolve())
    rc, doc = run_json(capsys, "encode", plan, "--json")
    assert rc == 0 and valid(doc, "encode")["pending"] == 0
    rc, doc = run_json(capsys, "seal", plan, "--json")
    assert rc == 0 and valid(doc, "seal")["objects"] == doc["produced"]["objects"]
    (tmp_path / "cases.yaml").write_text(
        "fixtures:\n  q3: {model: qwen3, config: {num_hidden_layers: 2}, gguf: {matrix_type: Q8_0}}\n"
        "cases:\n  - {name: q3-exact, fixture: q3, recipe: exact}\n")
    rc, doc = run_json(capsys, "regress", "--cases", tmp_path / "cases.yaml", "--json", "--update")
    assert rc == 0 and valid(doc, "regress")["update"] is True
    rc, doc = run_json(capsys, "regress", "--cases", tmp_path / "cases.yaml", "--json")
    assert rc == 0 and valid(doc, "regress")["verdict"] == doc["result"] == "pass", doc
