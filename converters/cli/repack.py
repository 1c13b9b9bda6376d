"""``convert repack IN OUT [--max-file-bytes N] [--json]``: re-split or join an artifact (container §11.4).

Copies the logical payload into a new file set with a new ``artifact_id``, keeping objects, bindings
and uses (one library call: :func:`converters.pipeline.repack.repack_artifact`); ``--max-file-bytes``
splits per §2.3, no limit joins everything into one file. Streams through a bounded buffer with a byte progress bar on stderr; refuses an existing
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


def print_summary(summary: dict, title: str) -> None:
    """Human form of :func:`converters.pipeline.repack.artifact_summary`: an overview table and a files table."""
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
    from converters.pipeline.repack import repack_artifact

    limit = parse_byte_size(max_file_bytes)
    progress = byte_progress(disable=json_out)
    tasks = []

    def start(total: int) -> None:  # the bar appears once the target is free and the source open
        progress.start()
        tasks.append(progress.add_task(f"repack {target.name}", total=total))

    try:
        out, summary = repack_artifact(source, target, max_file_bytes=limit, on_start=start,
                                       progress=lambda n: progress.advance(tasks[0], n))
    finally:
        if tasks:  # started
            progress.stop()
    if json_out:
        emit_json(summary)
    else:
        print_summary(summary, f"{out} (repacked from {source.name})")
