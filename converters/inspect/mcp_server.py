"""``convert mcp``: inspection as an MCP server over stdio, on the official ``mcp`` SDK (docs/inspect.md §MCP).

Four tools: ``inspect_model_artifact`` (the compact summary, or a selected page, with ``parent_evidence_id``),
``inspect_analysis_view`` (a history query object over retained or stored Evidence),
``import_evidence_bundle`` (check and index every record of a bundle) and ``release_evidence``
(drop a retained record). One provider per server process: one active inspection at a time (a second
concurrent call gets ``provider_busy``), the session's retained evidence (:mod:`converters.inspect.retained`),
the roots every path must lie inside (:mod:`converters.inspect.roots`), and the MCP cancel notification
ending a running ``hash: full`` with partial Evidence retained. Every
rejection is a tool error whose structured content is ``{"error": <public rejection>}``
(:mod:`converters.inspect.rejections`).
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from converters import __version__
from converters.inspect.mcp_schemas import (
    BUNDLE_SCHEMA,
    EVIDENCE_ID,
    PATH,
    SOURCE_SCHEMA,
    VIEW_SCHEMA,
    output_schemas,
)
from converters.inspect.rejections import InspectionRejected, invalid_input, public_rejection
from converters.inspect.retained import EvidenceStore, page, run_query
from converters.inspect.roots import Roots, client_root_dirs, confined, path_argument, within
from ninfer_core.errors import NinferError

NAME = "ninfer-inspect"
#: a progress notification at most every this many hashed bytes (the first buffer always reports)
PROGRESS_EVERY = 64 * 1024 * 1024
#: every tool: reads local files only, writes none, reaches nothing outside (docs/inspect.md §MCP)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

def _schema(schema: dict, description: str) -> Any:
    return Field(description=description, json_schema_extra=schema)


def _result(doc: dict, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(doc, ensure_ascii=False))],
                          structured_content=doc, is_error=error)


def _rejected(exc: BaseException) -> CallToolResult:
    return _result({"error": public_rejection(exc)}, error=True)


class Provider:
    """One inspection provider: at most one active inspection, the session's retained evidence, and the
    roots it reads inside (default: the working directory)."""

    def __init__(self, roots: Roots | None = None) -> None:
        self.store = EvidenceStore()
        self.active = False
        self.roots = roots or Roots([os.getcwd()])

    async def allowed(self, ctx: Context | None) -> tuple[tuple[str, ...], ...]:
        """The root sets a path must lie inside: the server's, and the client's MCP roots when it declares
        them and answers ``roots/list`` (docs/inspect.md §MCP roots)."""
        try:
            declared = ctx is not None and ctx.client_capabilities is not None and \
                ctx.client_capabilities.roots is not None
        except ValueError:  # no request (an in-process call)
            declared = False
        if not declared:
            return self.roots.allowed(None)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # roots are deprecated from protocol 2026-07-28, still honoured
                listed = await ctx.session.list_roots()
        except Exception:  # noqa: BLE001 - a client that cannot answer: the server's roots still bound every path
            return self.roots.allowed(None)
        return self.roots.allowed(client_root_dirs(r.uri for r in listed.roots))

    def run_confined(self, allowed, fn: Callable, *args):
        """``fn(*args)`` with every file it opens or lists inside ``allowed`` (run in a worker thread)."""
        with confined(allowed):
            return fn(*args)

    def _work(self, path: str, hash_mode: str, detail: str, view, cancel: threading.Event,
              report: Callable[[int, int | None], None], outcome: dict, allowed) -> None:
        """Runs in a worker thread; leaves ``("done" | "cancelled" | "rejected", value)`` in ``outcome``."""
        from converters.inspect import InspectionCancelled, inspect_model_artifact, summarize

        done = {"bytes": 0, "reported": -1}

        def progress(n: int) -> None:
            if cancel.is_set():
                raise KeyboardInterrupt  # finish() turns it into partial Evidence (docs/inspect.md §MCP)
            done["bytes"] += n
            if done["reported"] < 0 or done["bytes"] - done["reported"] >= PROGRESS_EVERY:
                done["reported"] = done["bytes"]
                report(done["bytes"], None)

        try:
            with confined(allowed):
                record = inspect_model_artifact(path, hash=hash_mode, detail="full", progress=progress)
        except InspectionCancelled as exc:
            outcome["value"] = ("cancelled", exc.evidence)
            return
        except NinferError as exc:
            outcome["value"] = ("rejected", exc)
            return
        if record.get("format") == "calbin":
            outcome["value"] = ("done", record)
            return
        try:
            self.store.retain(record)
            chosen = page(record, view) if view is not None and detail == "summary" else None
        except NinferError as exc:
            outcome["value"] = ("rejected", exc)
            return
        outcome["value"] = ("done", record if detail == "full" else summarize(record, page=chosen))

    async def inspect(self, ctx: Context | None, path, hash_mode, detail, view) -> CallToolResult:
        try:
            path_argument(path, "path")
        except NinferError as exc:
            return _rejected(exc)
        if hash_mode not in ("header", "full"):
            return _rejected(invalid_input(f"hash must be 'header' or 'full', not {hash_mode!r}", "hash"))
        if detail not in ("summary", "full"):
            return _rejected(invalid_input(f"detail must be 'summary' or 'full', not {detail!r}", "detail"))
        if view is not None and detail != "summary":
            return _rejected(invalid_input("a view needs detail 'summary' (full detail and a selection conflict)",
                                           "view", "options_conflict"))
        if view is not None:
            from converters.inspect.views import parse_view

            try:
                parse_view(view)
            except NinferError as exc:
                return _rejected(exc)
        try:
            within(path, "path", allowed := await self.allowed(ctx))
        except NinferError as exc:
            return _rejected(exc)
        if self.active:
            return _rejected(InspectionRejected("another inspection is running on this provider; retry when it "
                                                "ends", code="provider_busy", category="busy",
                                                rule="one_active_inspection"))
        self.active = True
        cancel, outcome = threading.Event(), {}

        def report(n: int, total: int | None) -> None:
            if ctx is not None:
                try:
                    anyio.from_thread.run(ctx.report_progress, n, total)
                except Exception:  # noqa: BLE001 - a lost progress notification never fails an inspection
                    pass

        async def watch() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                cancel.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await anyio.to_thread.run_sync(self._work, path, hash_mode, detail, view, cancel, report, outcome,
                                             allowed)
                tg.cancel_scope.cancel()
        finally:
            self.active = False
            state, value = outcome.get("value", ("cancelled", None))
            if state == "cancelled" and value is not None:
                try:
                    self.store.retain(value)
                    retained = True
                except NinferError:  # over the session budget: announced, not held
                    retained = False
                await self._announce_partial(ctx, value, retained)
        if state == "rejected":
            return _rejected(value)
        return _result(value)

    async def _announce_partial(self, ctx: Context | None, record: dict, retained: bool) -> None:
        """The cancelled request gets no answer: a log notification names the retained partial Evidence."""
        if ctx is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await ctx.log("warning", {"event": "inspection_cancelled", "parent_evidence_id": record["evidence_id"],
                                          "status": record["status"], "path": record["artifact"]["path"],
                                          "retained": retained},
                              logger_name=NAME)
            except Exception:  # noqa: BLE001 - the client may be gone
                pass


def build_server(provider: Provider | None = None) -> MCPServer:
    """The MCP server with the inspection tools (docs/inspect.md §MCP)."""
    prov = provider or Provider()
    tools: list[Tool] = []
    outputs = output_schemas()

    def tool(description: str) -> Callable:
        """Register a tool: read-only annotations and its output schema (structured content)."""
        def register(fn: Callable) -> Callable:
            t = Tool.from_function(fn, description=description, annotations=READ_ONLY)
            t.fn_metadata.output_schema = outputs[t.name]
            tools.append(t)
            return fn
        return register

    @tool("Inspect a local GGUF (v2/v3, either byte order), safetensors file or directory, or "
                 ".ninfer artifact, detected by content. Returns the compact summary (counts, short header "
                 "metadata, chat-template presence, derived totals, parent_evidence_id) and retains the full "
                 "Evidence; with view, also the selected page.")
    async def inspect_model_artifact(
        path: Annotated[str, _schema(PATH, "absolute path of the model file or directory, inside the server's "
                                     "roots")],
        hash: Annotated[str, _schema({"enum": ["header", "full"]},
                                     "header: header digest only (default); full: streamed SHA-256 of every "
                                     "byte")] = "header",
        detail: Annotated[str, _schema({"enum": ["summary", "full"]},
                                       "summary (default): compact summary; full: the whole Evidence record "
                                       "(no view)")] = "summary",
        view: Annotated[dict[str, Any] | None, _schema(VIEW_SCHEMA, "a selection: the page to return with the "
                                                       "summary")] = None,
        ctx: Context = None,
    ) -> CallToolResult:
        return await prov.inspect(ctx, path, hash, detail, view)

    @tool("Page retained or stored Evidence without reopening the model: source "
                 "{kind: retained-evidence, evidence_id} or {kind: evidence-file, path | record}; view {collection: "
                 "tensors | metadata | types, names / keys / types, fields, offset, limit} (kind model-artifact "
                 "optional, as in inspect_model_artifact).")
    async def inspect_analysis_view(
        source: Annotated[dict[str, Any], _schema(SOURCE_SCHEMA, "where the Evidence comes from")],
        view: Annotated[dict[str, Any], _schema(VIEW_SCHEMA, "the selection")],
        ctx: Context = None,
    ) -> CallToolResult:
        try:
            allowed = await prov.allowed(ctx)
            if isinstance(source, dict) and source.get("kind") == "evidence-file" and "path" in source:
                within(source["path"], "source.path", allowed)
            return _result(await anyio.to_thread.run_sync(prov.run_confined, allowed, run_query,
                                                          {"source": source, "view": view}, prov.store))
        except NinferError as exc:
            return _rejected(exc)

    @tool("Import an Evidence bundle ({records: [...]}, as convert inspect --evidence-output "
                 "writes): every record's evidence_id (an integrity digest, not a signature) and rows are checked, "
                 "then indexed; returns one evidence_id per record. Give the bundle inline or as an absolute path "
                 "inside the server's roots.")
    async def import_evidence_bundle(
        bundle: Annotated[dict[str, Any] | None, _schema(BUNDLE_SCHEMA, "the bundle inline")] = None,
        path: Annotated[str | None, _schema(PATH, "absolute path of a bundle file, inside the server's "
                                            "roots")] = None,
        ctx: Context = None,
    ) -> CallToolResult:
        if (bundle is None) == (path is None):
            return _rejected(invalid_input("give exactly one of bundle or path", "bundle"))
        try:
            allowed = await prov.allowed(ctx)
            if path is not None:
                within(path, "path", allowed)
            ids = await anyio.to_thread.run_sync(prov.run_confined, allowed, _import, prov.store, bundle, path)
        except NinferError as exc:
            return _rejected(exc)
        return _result({"evidence_ids": ids, "retained_count": len(prov.store.ids()),
                        "retained_bytes": prov.store.used})

    @tool("Release retained Evidence (from inspect_model_artifact or import_evidence_bundle); "
                 "its evidence_id is unknown afterwards.")
    async def release_evidence(
        evidence_id: Annotated[str, _schema(EVIDENCE_ID, "the evidence_id to release")],
    ) -> CallToolResult:
        try:
            return _result(prov.store.release(evidence_id))
        except NinferError as exc:
            return _rejected(exc)

    return MCPServer(NAME, version=__version__, tools=tools,
                     instructions="Static, evidence-grade inspection of GGUF / safetensors / .ninfer model files: "
                     "nothing is loaded or run, and only files inside the server's roots are read. Start with "
                     "inspect_model_artifact, page more with inspect_analysis_view using the returned "
                     "parent_evidence_id.")


def _import(store: EvidenceStore, bundle, path) -> list[str]:
    if path is not None:
        from converters.inspect.bundle import load_bundle

        return store.retain_all(load_bundle(path))
    return store.import_bundle(bundle)


def serve(roots: Roots | None = None) -> None:
    """Run the server on stdin/stdout until the client closes it, reading only inside ``roots``."""
    build_server(Provider(roots)).run("stdio")
