"""Re-splitting an artifact: copy the logical payload into a new file set (container spec §11.4, §2.3).

"When the split limit changes, the same logical payload may be copied, keeping the objects, bindings
and uses, with a new files table and a new artifact_id" (§11.4). :func:`repack` does exactly that:
the directory is kept record for record (object offsets included), the logical payload
``[0, payload_bytes)`` is copied byte for byte through one bounded buffer, and only ``files`` and
``artifact_id`` change. Every source part is checked before anything is written, and the output is
published with the same crash-safe protocol as any writer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ninfer_core.container.fileset import FileSetWriter, check_targets_free
from ninfer_core.container.planned_directory import check_written_directory
from ninfer_core.container.planner import plan_files
from ninfer_core.container.reader import open_artifact
from ninfer_core.container.tempfiles import cleanup_temporaries
from ninfer_core.container.writer import artifact_id_bytes
from ninfer_core.errors import WriterError

COPY_CHUNK = 8 << 20


def repack(source: str | os.PathLike, target: str | os.PathLike, *, max_file_bytes: int | None = None,
           artifact_id: bytes | str | None = None, progress: Callable[[int], None] | None = None,
           chunk_bytes: int = COPY_CHUNK, durable: bool = True) -> Path:
    """Copy ``source`` into a new artifact at ``target`` split by ``max_file_bytes`` (None: one file).

    ``progress(n)`` is called after each ``n`` payload bytes copied. Returns the new entry path.
    """
    target = Path(target)
    if not target.parent.is_dir():
        raise WriterError("the target's directory does not exist", file=str(target), section="§11.4",
                          rule="target_path")
    check_targets_free(target, [None])
    cleanup_temporaries(target)
    with open_artifact(source) as art:
        bad = art.check_files()
        if bad:
            raise bad[0]
        root = art.directory.to_json()
        root["files"] = []
        plan = plan_files(root, art.payload_bytes, target.name, max_file_bytes=max_file_bytes)
        check_written_directory(plan, target)
        files = FileSetWriter(target, plan, artifact_id_bytes(artifact_id), durable=durable)
        try:
            buf = memoryview(bytearray(min(chunk_bytes, art.payload_bytes)))
            for offset in range(0, art.payload_bytes, len(buf)):
                piece = buf[:min(len(buf), art.payload_bytes - offset)]
                art.readinto(offset, piece)
                files.write_at(offset, piece)
                if progress is not None:
                    progress(len(piece))
            return files.commit()
        except BaseException:
            files.abort()
            raise
