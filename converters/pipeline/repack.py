"""``convert repack`` as a library call: re-split (or join) an artifact and summarise the result.

:func:`repack_artifact` refuses an existing target and a path that is certainly no ``.ninfer`` artifact
before reading anything (:mod:`converters.sources.kind`), copies the logical payload into a new file set
with a new ``artifact_id`` (:func:`ninfer_core.repack`: same objects, bindings and uses; split per
docs/format/container.md §2.3, or one file without a limit) and returns :func:`artifact_summary` of the
copy with the source's path and ``artifact_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from converters.sources.fileio import refuse_parts_leaving
from converters.sources.kind import require_kind
from ninfer_core import open_artifact, repack
from ninfer_core.container.fileset import check_targets_free


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


def repack_artifact(source: str | Path, target: str | Path, *, max_file_bytes: int | None = None,
                    on_start: Callable[[int], None] | None = None,
                    progress: Callable[[int], None] | None = None) -> tuple[Path, dict]:
    """Copy ``source`` into the new artifact ``target``; returns the entry written and its summary (with
    ``source``: path and ``artifact_id``). ``on_start(payload_bytes)`` is called once the source is open,
    ``progress(n)`` as bytes are copied. A missing target directory is created; a failure leaves no output
    file and no directory it created."""
    from converters.pipeline.convert import output_parent

    check_targets_free(Path(target), [None])  # refuse before reading anything
    with output_parent(Path(target), source=source):  # out/ is made as for a conversion (docs/cli.md §Outputs)
        require_kind(source, ("ninfer",), command="repack", rule="repack_source", pass_unrecognised=True)
        with open_artifact(source) as src:
            refuse_parts_leaving(src, source, command="repack")
            total, source_id = src.payload_bytes, src.artifact_id
        if on_start is not None:
            on_start(total)
        out = repack(source, target, max_file_bytes=max_file_bytes, progress=progress)
    with open_artifact(out) as art:
        summary = artifact_summary(art)
    summary["source"] = {"path": str(source), "artifact_id": source_id}
    return Path(out), summary
