"""``convert inspect`` and bundles: ``--evidence-output`` (and ``--evidence_output``) writes ``{"records":
[...]}``, ``--import-bundle`` pages one with a selection or a history query object, and
``inspect-model-artifact`` is the same command (docs/inspect.md §Bundles, §Retained evidence)."""

from __future__ import annotations

import json
import sys

import pytest

from converters.cli import inspect_model_artifact_main, main
from tests.support.inspect_models import tiny_gguf, tiny_safetensors


@pytest.fixture
def bundle(tmp_path, capsys):
    out = tmp_path / "ev.json"
    assert main(["inspect", str(tiny_gguf(tmp_path / "m.gguf")), "--detail", "summary", "--evidence_output",
                 str(out), "--json"]) == 0
    eid = json.loads(capsys.readouterr().out)["parent_evidence_id"]
    return out, eid


def run(capsys, *args) -> tuple[int, dict]:
    rc = main(["inspect", *map(str, args), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_import_bundle_pages_with_a_selection_or_a_query(bundle, capsys):
    path, eid = bundle
    doc = json.loads(path.read_text())
    assert doc["schema"] == "ninfer-convert.evidence-bundle/1" and [r["evidence_id"] for r in doc["records"]] == [eid]
    assert run(capsys, "--import-bundle", path)[1]["evidence_ids"] == [eid]
    rc, page = run(capsys, "--import-bundle", path, "--view", '{"collection": "tensors", "types": ["F16"], '
                   '"fields": ["name"]}')
    assert rc == 0 and page["rows"] == [{"index": 1, "name": "blk.0.attn_norm.weight"}]
    query = {"source": {"kind": "retained-evidence", "evidence_id": eid},
             "view": {"kind": "model-artifact", "collection": "metadata", "keys": ["general.name"]}}
    rc, page = run(capsys, "--import-bundle", path, "--view", json.dumps(query))
    assert rc == 0 and page["rows"][0]["value"] == "tiny" and page["parent_evidence_id"] == eid
    # the seed's query object on a stored bundle given as the path is no longer "unknown view members"
    rc, page = run(capsys, path, "--view", json.dumps(query))
    assert rc == 0 and page["matches"] == 1
    assert main(["inspect", "--import-bundle", str(path), "--view", json.dumps(query)]) == 0  # a table
    assert "general.name" in capsys.readouterr().out
    assert main(["inspect", "--import-bundle", str(path)]) == 0
    assert eid in capsys.readouterr().out


def test_two_records_need_a_query_naming_one(bundle, tmp_path, capsys):
    path, eid = bundle
    rc, page = run(capsys, tiny_safetensors(tmp_path / "m.safetensors"), "--import-bundle", path, "--view",
                   '{"collection": "types"}')
    assert rc == 1 and page["error"]["code"] == "invalid_input" and page["error"]["rule"] == "query_valid"


def test_tampered_bundle_rejected(bundle, tmp_path, capsys):
    path, _ = bundle
    doc = json.loads(path.read_text())
    doc["records"][0]["tensors"][0]["byte_length"] = 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    rc, err = run(capsys, "--import-bundle", bad)
    assert rc == 1 and (err["error"]["code"], err["error"]["category"]) == ("invalid_input", "invalid_request")
    assert err["error"]["constraint"] == "evidence_id" and err["error"]["field"] == "$.records[0].evidence_id"


def test_inspect_model_artifact_is_convert_inspect(tmp_path, monkeypatch, capsys):
    model = tiny_gguf(tmp_path / "m.gguf")
    monkeypatch.setattr(sys, "argv", ["inspect-model-artifact", str(model), "--json"])
    assert inspect_model_artifact_main() == 0
    assert json.loads(capsys.readouterr().out)["format"] == "gguf"
