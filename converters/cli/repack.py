"""``convert repack IN OUT [--max-file-bytes N] [--json]``: re-split or join an artifact (container §11.4).

Copies the logical payload into a new file set with a new ``artifact_id``, keeping objects, bindings
and uses (:func:`ninfer_core.repack`); ``--max-file-bytes`` splits per §2.3, no limit joins everything
into one file. Streams through a bounded buffer with a byte progress bar on stderr; refuses an existing
output before reading anything; a failure or Ctrl-C leaves no output file.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from converters.cli.output import byte_progress, command, console, emit_json, table

_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]i?)?b?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30,
          "ti": 1 << 40}


def parse_byte_size(text: str | None) -> int | None:
    """``"64000000"``, ``"64MB"``, ``"2GiB"`` → bytes (decimal K/M/G/T, binary Ki/Mi/Gi/Ti)."""
    if text is None:
        return None
    m = _SIZE.match(text)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a byte size (e.g. 64000000, 64MB, 2GiB)")
    return int(m.group(1)) * _UNITS[(m.group(2) or "").lower()]


def artifact_summary(art) -> dict:
    """A JSON-ready summary of an open artifact: identity, components, object counts, files."""
    kinds: dict[str, int] = {}
    for obj in art.objects:
        key = obj.kind if obj.kind == "resource" else f"{obj.format} / {obj.layout}"
        kinds[key] = kinds.get(key, 0) + 1
    return {
        "path": str(art.path),
        "artifact_id": art.artifact_id,
        "components": sorted(art.components),
        "objects": len(art.objects),
        "objects_by_encoding": dict(sorted(kinds.items())),
        "bindings": len(art.bindings),
        "uses": len(art.uses),
        "payload_bytes": art.payload_bytes,
        "json_bytes": art.json_bytes,
        "entry_payload_start": art.entry_payload_start,
        "files": [{"path": f.location.name, "payload_bytes": f.payload_bytes, "file_bytes": f.file_bytes,
                   "payload_range": [f.payload_offset, f.payload_end]} for f in art.files],
    }


def print_summary(summary: dict, title: str) -> None:
    """Human form of :func:`artifact_summary`: an overview table and a files table."""
    rows = [["artifact_id", summary["artifact_id"]], ["components", ", ".join(summary["components"])],
            ["objects", summary["objects"]], ["bindings", summary["bindings"]], ["uses", summary["uses"]],
            ["payload bytes", f"{summary['payload_bytes']:,}"], ["json_bytes", f"{summary['json_bytes']:,}"],
            ["entry payload start", f"{summary['entry_payload_start']:,}"]]
    rows += [[f"objects {k}", v] for k, v in summary["objects_by_encoding"].items()]
    console.print(table(title, ["field", "value"], rows))
    console.print(table("files", ["file", "payload bytes", "file bytes", "logical payload range"],
                        [[f["path"], f"{f['payload_bytes']:,}", f"{f['file_bytes']:,}",
                          f"[{f['payload_range'][0]:,}, {f['payload_range'][1]:,})"] for f in summary["files"]]))


@command("repack")
def repack_command(
    source: Path = typer.Argument(..., help="Entry file of the artifact to copy.", show_default=False),
    target: Path = typer.Argument(..., help="Entry file to create (never overwritten).", show_default=False),
    max_file_bytes: str = typer.Option(None, "--max-file-bytes",
                                       help="Split so no file exceeds this size (e.g. 64000000, 2GiB); "
                                            "omit to join into one file."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Re-split (or join) an artifact: same objects, bindings and uses, new files and artifact_id."""
    from converters.sources.kind import require_kind
    from ninfer_core import open_artifact, repack
    from ninfer_core.container.fileset import check_targets_free

    limit = parse_byte_size(max_file_bytes)
    check_targets_free(target, [None])  # refuse before reading anything
    require_kind(source, ("ninfer",), command="repack", rule="repack_source", pass_unrecognised=True)
    with open_artifact(source) as src:
        total = src.payload_bytes
        source_id = src.artifact_id
    with byte_progress(disable=json_out) as progress:
        task = progress.add_task(f"repack {target.name}", total=total)
        out = repack(source, target, max_file_bytes=limit, progress=lambda n: progress.advance(task, n))
    with open_artifact(out) as art:
        summary = artifact_summary(art)
    summary["source"] = {"path": str(source), "artifact_id": source_id}
    if json_out:
        emit_json(summary)
    else:
        print_summary(summary, f"{out} (repacked from {source.name})")
