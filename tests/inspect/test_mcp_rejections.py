"""Every rejection class of the inspection tools (docs/inspect.md §Rejections): public code, category,
constraint and diagnostics, through the MCP server's tool calls (in process: the stdio transport is
covered by test_mcp_server), and the same codes in the CLI's ninfer-error/v1 document."""

from __future__ import annotations

import errno
import json
import struct

import anyio
import pytest

from converters.cli import main
from converters.inspect.mcp_server import Provider, build_server
from converters.inspect.retained import EvidenceStore
from converters.sources.fileio import OpenFile, os_error
from tests.support.inspect_models import tiny_gguf


def call(tool: str, args: dict, provider: Provider | None = None) -> tuple[bool, dict]:
    server = build_server(provider)
    r = anyio.run(server.call_tool, tool, args)
    return bool(r.is_error), r.structured_content


def rejected(tool: str, args: dict, code: str, category: str, provider: Provider | None = None) -> dict:
    err, doc = call(tool, args, provider)
    assert err, doc
    e = doc["error"]
    assert (e["code"], e["category"]) == (code, category), e
    assert e["message"] and set(e) >= {"constraint", "rule", "file", "field", "section", "details"}
    return e


@pytest.fixture(autouse=True)
def _cwd_is_the_root(tmp_path, monkeypatch):
    """The server's default root is the working directory: the test's own directory here."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def model(tmp_path):
    return tiny_gguf(tmp_path / "m.gguf")


def test_file_format_rejected(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x07\x00\x00\x00" + b"\0" * 16)
    e = rejected("inspect_model_artifact", {"path": str(bad)}, "target_unavailable", "unsupported_target")
    assert e["constraint"] == "file_format_rejected" and e["rule"] == "gguf_version" and e["file"] == str(bad)


def test_header_cap_is_a_typed_resource_rejection(tmp_path):
    big = tmp_path / "big.safetensors"
    big.write_bytes(struct.pack("<Q", 100_000_001) + b"{}")
    e = rejected("inspect_model_artifact", {"path": str(big)}, "target_unavailable", "unsupported_target")
    assert e["constraint"] == "limit_exceeded"


def test_missing_path(tmp_path):
    e = rejected("inspect_model_artifact", {"path": str(tmp_path / "nope.gguf")}, "target_unavailable",
                 "unavailable_target")
    assert e["constraint"] == "missing"


def test_host_io_failure_has_diagnostics(model, monkeypatch):
    def failing(self, length, offset):
        raise os_error(OSError(errno.EIO, "Input/output error"), self.path, f"read {length} bytes at {offset}")

    monkeypatch.setattr(OpenFile, "pread", failing)
    e = rejected("inspect_model_artifact", {"path": str(model)}, "execution_failure", "execution_failure")
    diag = e["details"]["diagnostics"]
    assert diag["errno_name"] == "EIO" and diag["path"] == str(model) and diag["reason"]


@pytest.mark.parametrize("args, rule", [
    ({"path": "relative.gguf"}, "path_valid"),
    ({"path": "/x.gguf", "hash": "sha1"}, "arguments_valid"),
    ({"path": "/x.gguf", "detail": "full", "view": {"collection": "tensors"}}, "options_conflict"),
    ({"path": "/x.gguf", "view": {"collection": "tensors", "names": "token_embd.weight"}}, "view_valid"),
    ({"path": "/x.gguf", "view": {"collection": "objects"}}, "view_valid"),
])
def test_invalid_arguments(args, rule):
    e = rejected("inspect_model_artifact", args, "invalid_input", "invalid_request")
    assert e["rule"] == rule and e["field"]


def test_invalid_queries_and_records(model, tmp_path):
    prov = Provider()
    _, s = call("inspect_model_artifact", {"path": str(model)}, prov)
    eid = s["parent_evidence_id"]
    view = {"kind": "model-artifact", "collection": "tensors"}
    e = rejected("inspect_analysis_view", {"source": {"kind": "cache"}, "view": view}, "invalid_input",
                 "invalid_request", prov)
    assert e["rule"] == "query_valid"
    e = rejected("inspect_analysis_view", {"source": {"kind": "retained-evidence", "evidence_id": eid},
                                           "view": {"kind": "model-artifact", "collection": "tensors",
                                                    "fields": ["nope"]}},
                 "invalid_input", "invalid_request", prov)
    assert e["rule"] == "view_valid"
    # kind is optional in a query's view; when given it is "model-artifact"
    e = rejected("inspect_analysis_view", {"source": {"kind": "retained-evidence", "evidence_id": eid},
                                           "view": {"kind": "objects", "collection": "tensors"}},
                 "invalid_input", "invalid_request", prov)
    assert e["rule"] == "query_valid" and e["field"] == "view.kind"
    # a bundle is not a single record
    bundle = tmp_path / "b.json"
    assert main(["inspect", str(model), "--evidence-output", str(bundle), "--json"]) == 0
    e = rejected("inspect_analysis_view", {"source": {"kind": "evidence-file", "path": str(bundle)}, "view": view},
                 "invalid_input", "invalid_request", prov)
    assert e["rule"] == "evidence_single_record"
    # a tampered inline record; a malformed bundle is rejected before anything is indexed
    rec = json.loads(bundle.read_text())["records"][0]
    rec["metadata"][0]["value"] = "llama"
    e = rejected("inspect_analysis_view", {"source": {"kind": "evidence-file", "record": rec}, "view": view},
                 "invalid_input", "invalid_request", prov)
    assert e["rule"] == "evidence_id"
    assert "integrity digest" in e["message"] and "not a signature" in e["message"]
    # an integrity digest, not authentication (docs/inspect.md §Bundles): the same edit with the digest
    # recomputed is accepted — the documented limit, pinned here
    from converters.inspect.evidence import seal

    forged = seal(dict(rec))
    err, page = call("inspect_analysis_view", {"source": {"kind": "evidence-file", "record": forged}, "view": view},
                     prov)
    assert not err and page["parent_evidence_id"] == forged["evidence_id"]
    held = list(prov.store.ids())
    good = json.loads(bundle.read_text())["records"][0]
    for bad, rule in (({"records": "x"}, "bundle_valid"), ({"records": []}, "bundle_valid"),
                      ({"records": [good, good]}, "bundle_valid"), ({"records": [good, rec]}, "evidence_id")):
        e = rejected("import_evidence_bundle", {"bundle": bad}, "invalid_input", "invalid_request", prov)
        assert e["rule"] == rule
        assert prov.store.ids() == held  # nothing indexed


def test_unknown_evidence_busy_and_budget(model):
    e = rejected("inspect_analysis_view", {"source": {"kind": "retained-evidence", "evidence_id": "sha256:00"},
                                           "view": {"kind": "model-artifact", "collection": "types"}},
                 "evidence_not_found", "invalid_request")
    assert e["field"] == "source.evidence_id"
    busy = Provider()
    busy.active = True
    e = rejected("inspect_model_artifact", {"path": str(model)}, "provider_busy", "busy", busy)
    assert e["rule"] == "one_active_inspection"
    small = Provider()
    small.store = EvidenceStore(budget=1000)
    e = rejected("inspect_model_artifact", {"path": str(model)}, "resource_exhausted", "execution_failure", small)
    assert e["details"]["diagnostics"]["budget_bytes"] == 1000 and small.store.ids() == []


def test_cli_error_document_uses_the_same_codes(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x07\x00\x00\x00" + b"\0" * 16)
    _, mcp_doc = call("inspect_model_artifact", {"path": str(bad)})
    assert main(["inspect", str(bad), "--json"]) == 1
    cli = json.loads(capsys.readouterr().out)["error"]
    for key in ("code", "category", "constraint", "rule", "file"):
        assert cli[key] == mcp_doc["error"][key]
