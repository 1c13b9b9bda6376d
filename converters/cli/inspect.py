"""``convert inspect PATH``: static inspection of a GGUF, safetensors (file or sharded directory) or
``.ninfer`` artifact, a calbin package (summary, ``docs/calbin.md``), or a page of a stored Evidence record
(``docs/inspect.md``).

Examples::

    convert inspect model.gguf                       # rich tables: summary, metadata, tensors, types
    convert inspect model.gguf --json                # the full Evidence record
    convert inspect model-dir --hash full --json     # plus streamed SHA-256 of every file
    convert inspect model.gguf --detail summary --evidence-output ev.json \\
        --view '{"collection": "tensors", "names": ["token_embd.weight"]}' --json
    convert inspect ev.json --detail summary --view '{"collection": "metadata", "keys": ["general.name"]}'

Exit status: 0 complete; 1 rejected input or partial evidence (printed, with the error on stderr); 130
Ctrl-C after the header was verified (partial evidence printed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from converters.cli.output import (
    byte_progress,
    command,
    console,
    emit_json,
    interrupt_reported,
    report_error,
    table,
)

MAX_CELL = 60


def _cell(v) -> str:
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return s if len(s) <= MAX_CELL else s[:MAX_CELL - 1] + "…"


def _count(value) -> str:
    """A count as every table prints numbers (1,456,624); older stored evidence spells counts as decimal strings."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def _shape(shape) -> str:
    if shape is None:
        return "-"
    return "×".join(shape) or "scalar"


def _metadata_value(r: dict) -> str:
    if "value" in r:
        return _cell(r["value"])
    more = "" if r["preview_complete"] else ", …"
    return _cell(f"[{r['element_type']} × {r['count']}] " + ", ".join(_cell(v) for v in r["preview"]) + more)


def _print_record(rec: dict) -> None:
    art, tot = rec["artifact"], rec["totals"]
    rows = [["status", rec["status"]], ["format", rec["format"]], ["path", art["path"]],
            ["size", f"{art['size']:,}"], ["header length", f"{art['header_length']:,}"],
            ["header sha256", art["header_sha256"]], ["sha256", art["sha256"] or "(not computed)"],
            ["bytes read", f"{art['bytes_read']:,}"], ["identity", art["identity"]],
            ["tensors", tot["tensor_count"]], ["parameters", _count(tot["parameter_count"])],
            ["bytes (declared)", "unknown" if tot["bytes"] is None else f"{tot['bytes']:,}"],
            ["chat template", "present" if rec["chat_template"]["present"] else "absent"]]
    rows += [[k, _cell(v)] for k, v in rec.get("details", {}).items() if not isinstance(v, dict | list)]
    console.print(table("summary", ["field", "value"], rows))
    if art.get("files"):  # a sharded directory or a gguf-split set
        console.print(table("files", ["name", "role", "size", "header sha256"],
                            [[f["name"], f["role"], f"{f['size']:,}", f["header_sha256"]] for f in art["files"]]))
    console.print(table("metadata", ["#", "key", "type", "value"],
                        [[r["index"], r["key"], r["type"], _metadata_value(r)] for r in rec["metadata"]]))
    console.print(table("tensors", ["#", "name", "type", "type_id", "shape", "file_offset", "byte_length",
                                    "storage"],
                        [[r["index"], r["name"], r["type"], r["type_id"], _shape(r["shape"]),
                          r["file_offset"], "unknown" if r["byte_length"] is None else r["byte_length"],
                          r["storage_validation"]] for r in rec["tensors"]]))
    console.print(table("per-type totals", ["type", "type_id", "tensors", "parameters", "bytes"],
                        [[r["type"], r["type_id"], r["tensor_count"], _count(r["parameter_count"]),
                          "unknown" if r["bytes"] is None else f"{r['bytes']:,}"] for r in rec["types"]]))
    for lim in rec["limitations"]:
        console.print(f"[yellow]limitation[/] {lim['code']}: {lim['message']} ({len(lim['tensors'])} tensors)")
    for u in rec["unknowns"]:
        console.print(f"[dim]unknown:[/] {u}")


def _print_composition(path: Path) -> None:
    """A ``.ninfer`` artifact's component × format table, recipe and exactness counts
    (:mod:`converters.inspect.composition`)."""
    from converters.inspect.composition import composition

    c = composition(path)
    rows = [[r["component"], r["format"], r["objects"], f"{r['bytes']:,}", f"{r['elements']:,}",
             "-" if r["bits_per_weight"] is None else f"{r['bits_per_weight']:g}"] for r in c["composition"]]
    console.print(table("components × formats", ["component", "format", "objects", "bytes", "elements",
                                                 "bits/weight"], rows))
    overrides = "".join(f"; {o['rule']}" for o in c["overrides"])
    exact = ", ".join(f"{k} {v:,}" for k, v in c["exactness"].items()) or "not recorded"
    console.print(f"recipe {c['recipe'] or 'not recorded'}{overrides}; exactness (provenance): {exact}",
                  highlight=False, markup=False, soft_wrap=True)


def _print_acceptance(path: Path, rec: dict) -> None:
    """Whether the artifact was accepted, from the record beside it (docs/acceptance.md §Acceptance record)."""
    from converters.acceptance.record import describe

    if isinstance(rec.get("acceptance"), dict):
        console.print(f"acceptance: {describe(path, rec['acceptance'])}", highlight=False, markup=False,
                      soft_wrap=True)


def _print_interpretation(rec: dict) -> None:
    """Beside the evidence of a GGUF whose byte lengths are unknown: the sizes under modern ggml, labelled as
    an interpretation (:mod:`converters.inspect.modern_sizes`)."""
    from converters.inspect.modern_sizes import interpret

    it = interpret(rec)
    if it is None:
        return
    rows = [[t["type"], t["type_id"], t["tensors"], f"{t['bytes']:,}"] for t in it["interpreted_types"]]
    rows += [[u["tensor"], "", "", f"not interpreted: {u['reason']}"] for u in it["unresolved"]]
    console.print(table(f"INTERPRETATION (not evidence): {it['label'].split(': ', 1)[1]}",
                        ["type", "type_id", "tensors", "bytes"], rows))
    if it["total_bytes"] is not None:
        tiles = ("tiles the data section exactly" if it["tiles_data_section"] else
                 f"does NOT tile the data section: {json.dumps(it['first_mismatch'])}")
        console.print(f"interpretation: all tensors {it['total_bytes']:,} bytes; {tiles}", highlight=False,
                      markup=False, soft_wrap=True)


def _print_summary(s: dict) -> None:
    art = s["artifact"]
    rows = [["status", s["status"]], ["format", s["format"]], ["path", art["path"]], ["size", art["size"]],
            ["header sha256", art["header_sha256"]], ["sha256", art["sha256"] or "(not computed)"],
            ["tensors", s["counts"]["tensors"]], ["metadata", s["counts"]["metadata"]],
            ["parameters", _count(s["totals"]["parameter_count"])], ["parent evidence", s["parent_evidence_id"]],
            ["evidence output", s["evidence_output"] or "-"]]
    console.print(table("summary", ["field", "value"], rows))
    console.print(table("header metadata", ["key", "type", "value"],
                        [[m["key"], m["type"], _cell(m["value"])] for m in s["header_metadata"]]))
    page = s.get("page")
    if page is not None:
        cols = sorted({k for r in page["rows"] for k in r} - {"index"})
        console.print(table(f"{page['collection']} (matches {page['matches']}, offset {page['offset']})",
                            ["#", *cols], [[r["index"], *[_cell(r.get(c)) for c in cols]] for r in page["rows"]]))


def _print_page(result: dict) -> None:
    """A page of retained Evidence (``--import-bundle`` / a query object), or the imported ids."""
    if "rows" not in result:
        console.print(table("imported evidence", ["evidence_id"], [[e] for e in result["evidence_ids"]]))
        return
    cols = sorted({k for r in result["rows"] for k in r} - {"index"})
    console.print(table(f"{result['collection']} of {result['parent_evidence_id']} (matches {result['matches']}, "
                        f"offset {result['offset']})", ["#", *cols],
                        [[r["index"], *[_cell(r.get(c)) for c in cols]] for r in result["rows"]]))


def _print_calbin(rec: dict) -> None:
    model, mem = rec.get("model", {}), rec.get("memory", {})
    rows = [["format", "calbin"], ["path", rec["package"]["path"]], ["files", rec["package"].get("file_count")],
            *[[k, _cell(v)] for k, v in model.items()],
            ["parameter bytes by chip", _cell(mem.get("parameter_bytes", {}).get("by_chip"))],
            ["submodels", ", ".join(s["name"] for s in rec.get("submodels", []))],
            ["findings", _cell(rec["finding_counts"])], ["verdict", rec["verdict"]]]
    console.print(table("calbin package", ["field", "value"], rows))
    console.print(table("gates", ["gate", "title", "status"],
                        [[g["name"], g["title"], g["status"]] for g in rec["gates"]]))


@command("inspect")
def inspect_cmd(
    path: Path | None = typer.Argument(None, help="GGUF / safetensors file, checkpoint directory, .ninfer "
                                       "entry, or a stored Evidence record (optional with --import-bundle)."),
    hash_mode: str = typer.Option("header", "--hash", help="header: header digest only; full: SHA-256 of "
                                  "every byte (streamed)."),
    detail: str = typer.Option("full", "--detail", help="full Evidence (the default here; the MCP "
                                "tool defaults to summary, docs/inspect.md §MCP), or a compact summary."),
    evidence_output: Path | None = typer.Option(None, "--evidence-output", "--evidence_output", help="Also "
                                                "write the full Evidence record to this new file, as a "
                                                "bundle ({\"records\": [...]}, docs/inspect.md §Bundles)."),
    import_bundle: Path | None = typer.Option(None, "--import-bundle", help="Check the integrity digests of and index an "
                                              "Evidence bundle, then page it with --view (a selection, or a "
                                              "query object {\"source\": ..., \"view\": ...})."),
    view: str | None = typer.Option(None, "--view", help="JSON selection, e.g. "
                                    "'{\"collection\": \"tensors\", \"names\": [\"output.weight\"]}' "
                                    "(needs --detail summary)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output (one JSON document)."),
) -> None:
    """Inspect a model artifact statically and report evidence (nothing is loaded or run)."""
    from converters.inspect import InspectionCancelled, inspect_model_artifact

    if hash_mode not in ("header", "full"):
        raise typer.BadParameter("--hash must be 'header' or 'full'")
    if detail not in ("full", "summary"):
        raise typer.BadParameter("--detail must be 'full' or 'summary'")
    view_obj = None
    if view is not None:
        from converters.errors import SourceFormatError
        from converters.sources import strict_json

        try:  # strict and bounded: nesting over 32 levels, duplicate members and NaN are refused
            view_obj = strict_json.loads(view.encode("utf-8", "surrogateescape"), file=None, what="--view")
        except SourceFormatError as exc:
            raise typer.BadParameter(f"--view is not JSON: {exc.message}") from None
    if import_bundle is not None or (isinstance(view_obj, dict) and "source" in view_obj):
        if evidence_output is not None or hash_mode != "header":
            raise typer.BadParameter("--import-bundle and a query object page retained facts: no "
                                     "--evidence-output, no --hash full")
        from converters.inspect.retained import query_stored

        result = query_stored(path, import_bundle, view_obj)
        emit_json(result) if json_out else _print_page(result)
        return
    if path is None:
        raise typer.BadParameter("PATH is required (unless --import-bundle is given)")
    if view_obj is not None and detail != "summary":
        raise typer.BadParameter("--view needs --detail summary (a full record and a selection conflict)")
    if evidence_output is not None and evidence_output.exists():
        raise typer.BadParameter(f"--evidence-output {evidence_output} exists; refusing to overwrite")

    def run(progress=None) -> dict:
        return inspect_model_artifact(path, hash=hash_mode, detail=detail, view=view_obj,
                                      evidence_output=evidence_output, progress=progress)

    try:
        if hash_mode == "full" and not json_out and path.is_file():
            with byte_progress(disable=not sys.stderr.isatty()) as bar:
                task = bar.add_task("sha256", total=path.stat().st_size)
                result = run(lambda n: bar.advance(task, n))
        else:
            result = run()
    except InspectionCancelled as exc:
        emit_json(exc.evidence) if json_out else _print_record(exc.evidence)
        report_error("cancelled after the header was verified; partial evidence printed")
        interrupt_reported()
        raise typer.Exit(130) from None
    if json_out:
        emit_json(result)
    elif result.get("format") == "calbin":
        _print_calbin(result)
    elif "parent_evidence_id" in result:
        _print_summary(result)
    else:
        _print_record(result)
        if result.get("format") == "ninfer" and result.get("status") == "complete":
            _print_composition(path)
            _print_acceptance(path, result)
        _print_interpretation(result)
    if result.get("status") != "complete":
        err = result.get("error") or {}
        report_error(f"partial evidence: {err.get('message', 'incomplete')} ({err.get('code')})")
        raise typer.Exit(1)
