"""``convert mcp`` end to end: the official SDK's stdio client spawns the server, lists the tools, checks
their input schemas and calls each one (docs/inspect.md §MCP)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from converters import __version__
from converters.cli import main
from tests.support.inspect_models import sparse_gguf, tiny_gguf, tiny_safetensors

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"inspect_model_artifact", "inspect_analysis_view", "import_evidence_bundle", "release_evidence"}
#: tool name -> its declared outputSchema, as the server listed it
OUTPUT_SCHEMAS: dict[str, dict] = {}


@pytest.fixture
def models(tmp_path):
    return {"le": tiny_gguf(tmp_path / "le.gguf"), "be": tiny_gguf(tmp_path / "be.gguf", big_endian=True),
            "st": tiny_safetensors(tmp_path / "m.safetensors")}


def _server(*roots: Path) -> StdioServerParameters:
    args = [a for r in roots for a in ("--root", str(r))]
    return StdioServerParameters(command=sys.executable, args=["-m", "converters.cli", "mcp", *args], cwd=str(ROOT))


async def _call(s: ClientSession, tool: str, args: dict) -> tuple[bool, dict]:
    r = await s.call_tool(tool, args)
    doc = r.structured_content if r.structured_content is not None else json.loads(r.content[0].text)
    assert json.loads(r.content[0].text) == doc  # text and structured content say the same
    return r.is_error, doc


async def _ok(s, tool, args) -> dict:
    err, doc = await _call(s, tool, args)
    assert not err, json.dumps(doc)
    # the structured content conforms to the tool's declared outputSchema (the SDK client checks it too)
    if tool not in OUTPUT_SCHEMAS:
        OUTPUT_SCHEMAS.update({t.name: t.output_schema for t in (await s.list_tools()).tools})
    jsonschema.validate(doc, OUTPUT_SCHEMAS[tool], cls=jsonschema.Draft202012Validator)
    return doc


async def _rejected(s, tool, args, code: str) -> dict:
    err, doc = await _call(s, tool, args)
    assert err and doc["error"]["code"] == code, doc
    return doc["error"]


def _view(eid: str, **sel) -> dict:
    return {"source": {"kind": "retained-evidence", "evidence_id": eid}, "view": {"kind": "model-artifact", **sel}}


def test_tools_end_to_end(models, tmp_path, capsys):
    # a bundle exported by the CLI, to import over MCP
    bundle_file = tmp_path / "bundle.json"
    assert main(["inspect", str(models["be"]), "--detail", "summary", "--evidence_output", str(bundle_file),
                 "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)["parent_evidence_id"]
    tampered = json.loads(bundle_file.read_text())
    tampered["records"][0]["tensors"][0]["shape"] = ["9", "4"]

    async def scenario() -> None:
        async with stdio_client(_server(tmp_path)) as (read, write), ClientSession(read, write) as s:
            init = await s.initialize()
            assert (init.server_info.name, init.server_info.version) == ("ninfer-inspect", __version__)
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert set(tools) == TOOLS
            for t in tools.values():
                assert t.annotations.read_only_hint is True and t.annotations.open_world_hint is False, t.name
                assert t.output_schema["type"] == "object", t.name
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
                OUTPUT_SCHEMAS[t.name] = t.output_schema
            schema = tools["inspect_model_artifact"].input_schema
            assert schema["required"] == ["path"] and schema["properties"]["hash"]["enum"] == ["header", "full"]
            assert schema["properties"]["view"]["properties"]["collection"]["enum"] == ["tensors", "metadata",
                                                                                          "types"]
            # one selection schema in both tools: kind optional, collection required
            view_schema = tools["inspect_analysis_view"].input_schema["properties"]["view"]
            assert schema["properties"]["view"]["properties"] == view_schema["properties"]
            assert view_schema["required"] == ["collection"] and "kind" in view_schema["properties"]
            src = tools["inspect_analysis_view"].input_schema["properties"]["source"]["oneOf"]
            assert [o["properties"]["kind"]["const"] for o in src] == ["retained-evidence", "evidence-file"]
            assert tools["release_evidence"].input_schema["required"] == ["evidence_id"]

            # GGUF LE: the compact summary with a view on the first call
            first = await _ok(s, "inspect_model_artifact", {
                "path": str(models["le"]),
                "view": {"collection": "tensors", "names": ["token_embd.weight", "output.weight"],
                         "fields": ["type", "shape", "file_offset"]}})
            assert first["counts"] == {"tensors": 3, "metadata": first["counts"]["metadata"], "types": 2}
            assert first["chat_template"]["present"] and first["chat_template"]["default"]
            assert {"key": "general.name", "type": "STRING", "value": "tiny"} in first["header_metadata"]
            assert int(first["totals"]["parameter_count"]) == 68  # a count (string or integer: docs/inspect.md)
            rows = first["page"]["rows"]
            assert [r["index"] for r in rows] == [0, 2] and rows[0]["shape"] == ["4", "8"] and "name" not in rows[0]
            le = first["parent_evidence_id"]
            assert first["page"]["parent_evidence_id"] == le and first["page"]["source"]["evidence_id"] == le

            # GGUF BE and safetensors
            be = await _ok(s, "inspect_model_artifact", {"path": str(models["be"])})
            assert be["format"] == "gguf" and be["counts"]["tensors"] == 3 and "page" not in be
            st = await _ok(s, "inspect_model_artifact", {"path": str(models["st"]), "hash": "full"})
            assert st["format"] == "safetensors" and st["artifact"]["sha256"] and not st["chat_template"]["present"]
            full = await _ok(s, "inspect_model_artifact", {"path": str(models["le"]), "detail": "full"})
            assert full["schema"] == "ninfer-convert.evidence/1" and full["evidence_id"] == first["parent_evidence_id"]
            # the output schema says something: a summary without its counts does not conform
            broken = {k: v for k, v in first.items() if k != "counts"}
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(broken, OUTPUT_SCHEMAS["inspect_model_artifact"])

            # paging: offset counts filtered matches, indices keep their positions; fields; an empty filter
            p1 = await _ok(s, "inspect_analysis_view", _view(le, collection="tensors", fields=["name"], limit=2))
            assert [r["index"] for r in p1["rows"]] == [0, 1] and p1["next_offset"] == 2
            # view.kind is optional here as in inspect_model_artifact
            no_kind = await _ok(s, "inspect_analysis_view", {"source": {"kind": "retained-evidence",
                                                                        "evidence_id": le},
                                                             "view": {"collection": "tensors", "fields": ["name"],
                                                                      "limit": 2}})
            assert no_kind["rows"] == p1["rows"]
            p2 = await _ok(s, "inspect_analysis_view", _view(le, collection="tensors", types=["F32"], offset=1,
                                                             fields=[]))
            assert p2["rows"] == [{"index": 2}] and p2["matches"] == 2 and p2["next_offset"] is None
            empty = await _ok(s, "inspect_analysis_view", _view(le, collection="tensors", names=[]))
            assert empty["rows"] == [] and empty["matches"] == 0
            for key in ("source", "header_coverage", "array_elisions", "unknowns", "parent_evidence_id",
                        "warnings"):
                assert key in empty
            # a metadata key page and a types page
            tpl = await _ok(s, "inspect_analysis_view", _view(le, collection="metadata",
                                                              keys=["tokenizer.chat_template"]))
            assert tpl["rows"][0]["value"].startswith("{% for m in messages %}")
            toks = await _ok(s, "inspect_analysis_view", _view(le, collection="metadata",
                                                               keys=["tokenizer.ggml.tokens"]))
            assert toks["array_elisions"] and int(toks["array_elisions"][0]["count"]) == 20
            types = await _ok(s, "inspect_analysis_view", _view(le, collection="types", types=["F16"]))
            assert types["rows"][0]["tensor_count"] == 1 and int(types["rows"][0]["parameter_count"]) == 4

            # an evidence-file source: one record inline
            rec = json.loads(bundle_file.read_text())["records"][0]
            inline = await _ok(s, "inspect_analysis_view", {"source": {"kind": "evidence-file", "record": rec},
                                                           "view": {"kind": "model-artifact",
                                                                    "collection": "tensors", "fields": ["name"]}})
            assert inline["parent_evidence_id"] == exported

            # the CLI's bundle imported and queried; a tampered bundle rejected with nothing indexed
            imp = await _ok(s, "import_evidence_bundle", {"path": str(bundle_file)})
            assert imp["evidence_ids"] == [exported]
            q = await _ok(s, "inspect_analysis_view", _view(exported, collection="tensors",
                                                            names=["output.weight"], fields=["type"]))
            assert q["rows"] == [{"index": 2, "type": "F32"}] and q["source"]["format"] == "gguf"
            bad = await _rejected(s, "import_evidence_bundle", {"bundle": tampered}, "invalid_input")
            assert bad["category"] == "invalid_request" and bad["constraint"] == "evidence_id"
            assert bad["field"] == "$.records[0].evidence_id"

            # release: the id is unknown afterwards
            rel = await _ok(s, "release_evidence", {"evidence_id": exported})
            assert rel["released"] == exported
            gone = await _rejected(s, "inspect_analysis_view", _view(exported, collection="types"),
                                   "evidence_not_found")
            assert gone["category"] == "invalid_request"
            await _rejected(s, "release_evidence", {"evidence_id": exported}, "evidence_not_found")

    anyio.run(scenario)


def test_busy_and_cancelled_full_hash(tmp_path):
    big = sparse_gguf(tmp_path / "big.gguf", 4 << 30)  # a hole: hashing it takes seconds, cancelled after 8 MiB
    small = tiny_gguf(tmp_path / "le.gguf")
    logs: list[dict] = []
    logged = anyio.Event()

    async def on_log(params) -> None:
        logs.append(params.data)
        logged.set()

    async def scenario() -> None:
        async with stdio_client(_server(tmp_path)) as (read, write), ClientSession(read, write, logging_callback=on_log) as s:
            await s.initialize()
            hashing = anyio.Event()

            async def on_progress(progress, total, message) -> None:
                hashing.set()

            scope = anyio.CancelScope()

            async def full() -> None:
                with scope:
                    await s.call_tool("inspect_model_artifact", {"path": str(big), "hash": "full"},
                                      progress_callback=on_progress)
                    pytest.fail("the cancelled inspection was answered")

            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(full)
                    await hashing.wait()
                    busy = await _rejected(s, "inspect_model_artifact", {"path": str(small)}, "provider_busy")
                    assert busy["category"] == "busy"
                    scope.cancel()  # the SDK sends notifications/cancelled
                await logged.wait()
            (event,) = logs
            assert event["event"] == "inspection_cancelled" and event["status"] == "partial" and event["retained"]
            partial = await _ok(s, "inspect_analysis_view", _view(event["parent_evidence_id"],
                                                                  collection="tensors", fields=["name"]))
            assert partial["source"]["status"] == "partial" and partial["source"]["sha256"] is None
            assert partial["coverage"]["header"] == "complete" and partial["coverage"]["digest"] == "unknown"
            assert partial["rows"] == [{"index": 0, "name": "token_embd.weight"}]
            # the provider is free again
            again = await _ok(s, "inspect_model_artifact", {"path": str(small)})
            assert again["status"] == "complete"

    anyio.run(scenario)
