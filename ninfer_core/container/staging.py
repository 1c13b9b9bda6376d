"""A staged artifact: planned once, written by independent tasks in any process, sealed once (§2.3, §11.4).

The scale-out form of :class:`~ninfer_core.ArtifactWriter` (which writes from threads of one process).
:meth:`ArtifactWriter.stage <ninfer_core.ArtifactWriter.stage>` plans the directory — every offset,
the files table, the JSON reservation — exactly as :meth:`~ninfer_core.ArtifactWriter.plan` does, and
creates a *staging directory* next to the entry::

    .<entry name>.staging/
        staged.json          the plan: entry path, FilePlan (JSON text, sizes, names), ID mode
        file-0000 …          every file of the artifact at its final length (sparse), headers written
        written/*.json       markers of objects written completely: index, id, bytes, SHA-256, a caller note

Any process that can see the directory (a shared file system) opens it with :meth:`StagedArtifact.open`
and calls :meth:`StagedArtifact.write_object` for the objects it was given: the bytes go to their
planned offsets (``pwrite``, the §11.2 mapping in reverse), are flushed, and only then are the markers
published (one file per flush, atomic rename), so a marker always means "these bytes are on disk". Writing an object again
rewrites the same range (idempotent; a crashed task is simply re-run). :meth:`StagedArtifact.seal`
checks coverage (every object marked with its planned size), optionally replaces the provenance inside
the reserved JSON (errors measured while writing), derives the ID from the content when asked
(:mod:`ninfer_core.container.contentid`, from the markers' digests — no second read of the payload),
writes the headers, flushes, publishes the parts then the entry without ever replacing a name, and
removes the staging directory. :meth:`StagedArtifact.discard` removes it without publishing.

Unlike the in-process writer's temporaries, staged files carry no process id: they belong to the
staging directory, not to a process, and ``cleanup_temporaries`` never touches them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ninfer_core.container.contentid import content_artifact_id
from ninfer_core.container.fileset import FileSetWriter, check_targets_free, file_head
from ninfer_core.container.framing import ENTRY_MAGIC, PART_MAGIC
from ninfer_core.container.object_data import byte_view, object_chunks
from ninfer_core.container.planned_directory import replaced_provenance
from ninfer_core.container.planner import FilePlan
from ninfer_core.container.tempfiles import fsync_directory, head_artifact_id, publish_noreplace
from ninfer_core.errors import ArtifactExistsError, WriterError

log = logging.getLogger(__name__)

SCHEMA = "ninfer-staged/v1"
STATE = "staged.json"
MARKERS = "written"


def staging_dir_for(entry: str | os.PathLike) -> Path:
    """The default staging directory of an entry path: ``.<name>.staging`` beside it."""
    entry = Path(entry)
    return entry.parent / f".{entry.name}.staging"


def _file_name(index: int) -> str:
    return f"file-{index:04d}"


def _atomic_json(path: Path, value: Any, durable: bool) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, separators=(",", ":"))
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise WriterError(f"cannot write {path.name}: {exc.strerror or exc}", file=str(path), section="§11.4",
                          rule="io_error") from None


class StagedArtifact:
    """The files of a planned artifact in a staging directory; see the module docstring."""

    def __init__(self, staging: Path, state: dict) -> None:
        self.staging = staging
        self.entry = Path(state["entry"])
        self.durable = bool(state["durable"])
        self.artifact_id = bytes.fromhex(state["artifact_id"]) if state["artifact_id"] else None
        self.plan = FilePlan(json_text=bytes.fromhex(state["json_text_hex"]), json_bytes=state["json_bytes"],
                             entry_payload_start=state["entry_payload_start"], sizes=tuple(state["sizes"]),
                             names=tuple(state["names"]), root=state["root"])
        self.records = [(o["id"], int(o["offset"]), int(o["bytes"])) for o in self.plan.root["objects"]]
        self.index = {oid: i for i, (oid, _, _) in enumerate(self.records)}
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()
        self._touched: set[int] = set()
        self._queued: list[tuple[int, dict]] = []
        self._token, self._batches = secrets.token_hex(4), 0

    # ---- creating and opening ------------------------------------------------------------------------

    @classmethod
    def create(cls, entry: Path, staging_dir: str | os.PathLike, plan: FilePlan, *, artifact_id: bytes | None,
               durable: bool = True) -> StagedArtifact:
        """Create the staging directory (it must not exist) with every file pre-allocated."""
        entry = Path(entry).resolve()
        staging = Path(staging_dir).resolve()
        check_targets_free(entry, plan.names)
        try:
            staging.mkdir()
        except FileExistsError:
            raise ArtifactExistsError(f"staging directory {staging.name} already exists (another conversion is "
                                      "staged there; seal or discard it)", file=str(staging), section="§11.4",
                                      rule="target_exists") from None
        except OSError as exc:
            raise WriterError(f"cannot create staging directory: {exc.strerror}", file=str(staging),
                              section="§11.4", rule="io_error") from None
        state = {"schema": SCHEMA, "entry": str(entry), "durable": durable,
                 "artifact_id": artifact_id.hex() if artifact_id is not None else None,
                 "json_bytes": plan.json_bytes, "entry_payload_start": plan.entry_payload_start,
                 "sizes": list(plan.sizes), "names": list(plan.names), "json_text_hex": plan.json_text.hex(),
                 "root": plan.root}
        try:
            (staging / MARKERS).mkdir()
            head_id = artifact_id if artifact_id is not None else bytes(16)
            for i in range(len(plan.sizes)):
                fd = os.open(staging / _file_name(i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                try:
                    os.ftruncate(fd, plan.file_bytes(i))
                    FileSetWriter._pwrite_all(fd, memoryview(file_head(plan, i, head_id)), 0, staging)
                finally:
                    os.close(fd)
            _atomic_json(staging / STATE, state, durable)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls(staging, state)

    @classmethod
    def open(cls, staging_dir: str | os.PathLike) -> StagedArtifact:
        """Open an existing staging directory (any process that can see it)."""
        staging = Path(staging_dir)
        try:
            state = json.loads((staging / STATE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise WriterError("no staged artifact here (sealed, discarded, or never staged)", file=str(staging),
                              section="§11.4", rule="staging_missing") from None
        except (OSError, ValueError) as exc:
            raise WriterError(f"unreadable staging state: {exc}", file=str(staging / STATE), section="§11.4",
                              rule="staging_state") from None
        if not isinstance(state, dict) or state.get("schema") != SCHEMA:
            raise WriterError(f"staging state is not {SCHEMA}", file=str(staging / STATE), section="§11.4",
                              rule="staging_state")
        return cls(staging, state)

    # ---- writing --------------------------------------------------------------------------------------

    def _fd(self, index: int) -> int:
        with self._lock:
            if index not in self._fds:
                try:
                    self._fds[index] = os.open(self.staging / _file_name(index), os.O_WRONLY)
                except OSError as exc:
                    raise WriterError(f"cannot open staged file: {exc.strerror}",
                                      file=str(self.staging / _file_name(index)), section="§11.4",
                                      rule="io_error") from None
            return self._fds[index]

    def _write_at(self, offset: int, view: memoryview, touched: set[int]) -> None:
        end = offset + len(view)
        if offset < 0 or end > self.plan.payload_bytes:
            raise WriterError(f"write [{offset}, {end}) is outside the payload [0, {self.plan.payload_bytes})",
                              file=str(self.staging), section="§11.2", rule="write_range")
        for i, start, stop, file_offset in self.plan.file_spans(offset, end):
            FileSetWriter._pwrite_all(self._fd(i), view[start - offset:stop - offset], file_offset,
                                      self.staging / _file_name(i))
            touched.add(i)

    def write_object(self, object_id: str, chunks, *,
                     note: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
                     defer: bool = False) -> str:
        """Write all bytes of ``object_id`` (an iterable of bytes-like chunks, in order) at its planned
        offset, flush, then publish its marker with the SHA-256 and ``note`` (a callable is called after
        the last chunk: e.g. statistics gathered while the chunks were made). Returns the hex digest.

        ``defer``: queue the marker instead; :meth:`flush` flushes the files once and publishes every
        queued marker (one ``fsync`` per file for a batch of objects instead of one per object)."""
        if object_id not in self.index:
            raise WriterError(f"object {object_id!r} is not in the staged plan", file=str(self.staging),
                              section="§11.4", rule="object_unknown")
        n = self.index[object_id]
        _, offset, size = self.records[n]
        digest, written, touched = hashlib.sha256(), 0, set()
        for chunk in object_chunks(chunks, object_id):
            view = byte_view(chunk, object_id)
            if written + len(view) > size:
                raise WriterError(f"object {object_id!r} got more than its {size} declared bytes",
                                  file=str(self.staging), section="§11.4", rule="object_length")
            self._write_at(offset + written, view, touched)
            digest.update(view)
            written += len(view)
        if written != size:
            raise WriterError(f"object {object_id!r} got {written} of its {size} declared bytes",
                              file=str(self.staging), section="§11.4", rule="object_length")
        note = note() if callable(note) else note
        marker = {"id": object_id, "bytes": size, "sha256": digest.hexdigest(), "note": dict(note or {})}
        with self._lock:
            self._touched |= touched
            self._queued.append((n, marker))
        if not defer:
            self.flush()
        return marker["sha256"]

    def flush(self) -> None:
        """Flush the files written so far, then publish the queued markers (a marker means: on disk)."""
        with self._lock:
            touched, queued = self._touched, self._queued
            self._touched, self._queued = set(), []
        if self.durable:
            for i in sorted(touched):
                os.fsync(self._fd(i))
        if queued:
            self._batches += 1
            name = f"{os.getpid()}-{threading.get_ident()}-{self._token}-{self._batches}.json"
            _atomic_json(self.staging / MARKERS / name, [{"index": n, **m} for n, m in queued], self.durable)

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds = {}

    # ---- coverage and sealing -------------------------------------------------------------------------

    def markers(self) -> dict[str, dict]:
        """Object ID → marker of every object written completely (stale or foreign entries ignored)."""
        out = {}
        for path in sorted((self.staging / MARKERS).glob("*.json")):
            try:
                batch = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for m in batch if isinstance(batch, list) else ():
                n = m.get("index") if isinstance(m, dict) else None
                if isinstance(n, int) and 0 <= n < len(self.records) and m.get("id") == self.records[n][0] \
                        and m.get("bytes") == self.records[n][2]:
                    out[m["id"]] = m
        return out

    def missing(self) -> list[str]:
        """IDs of the objects without a marker, in directory order."""
        done = self.markers()
        return [oid for oid, _, _ in self.records if oid not in done]

    def seal(self, *, provenance: Mapping[str, Any] | None = None) -> Path:
        """Check coverage, fill in provenance and ID, flush, publish parts then entry; remove the staging."""
        self.close()
        markers = self.markers()
        missing = [oid for oid, _, _ in self.records if oid not in markers]
        if missing:
            shown = ", ".join(repr(m) for m in missing[:5]) + (" …" if len(missing) > 5 else "")
            raise WriterError(f"{len(missing)} object(s) not completely written: {shown}", file=str(self.staging),
                              section="§11.4", rule="coverage_incomplete")
        plan = self.plan if provenance is None else replaced_provenance(self.plan, provenance, self.entry)
        artifact_id = self.artifact_id
        if artifact_id is None:
            artifact_id = content_artifact_id(plan.json_text,
                                              (bytes.fromhex(markers[oid]["sha256"]) for oid, _, _ in self.records))
        paths = [self.staging / _file_name(i) for i in range(len(plan.sizes))]
        self._take_back_published_parts(paths, plan.names)
        for i, path in enumerate(paths):
            try:
                fd = os.open(path, os.O_WRONLY)
            except OSError as exc:
                raise WriterError(f"cannot open staged file: {exc.strerror}", file=str(path), section="§11.4",
                                  rule="io_error") from None
            try:
                size = os.fstat(fd).st_size
                if size != plan.file_bytes(i):
                    raise WriterError(f"{path.name} is {size} bytes, expected {plan.file_bytes(i)}", file=str(path),
                                      section="§11.4", rule="file_length")
                FileSetWriter._pwrite_all(fd, memoryview(file_head(plan, i, artifact_id)), 0, path)
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
        finals = [self.entry if n is None else self.entry.parent / n for n in plan.names]
        check_targets_free(self.entry, plan.names)
        published: list[Path] = []
        try:
            for i in range(1, len(finals)):  # parts first …
                publish_noreplace(paths[i], finals[i])
                published.append(finals[i])
            if self.durable and len(finals) > 1:
                fsync_directory(self.entry.parent)
            publish_noreplace(paths[0], self.entry)  # … the entry last
        except BaseException:
            for p in published:
                try:
                    p.unlink()
                except OSError:
                    pass
            raise
        if self.durable:
            fsync_directory(self.entry.parent)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.plan = plan
        self.artifact_id = artifact_id
        log.info("sealed %s (%d files, %d objects)", self.entry, len(finals), len(self.records))
        return self.entry

    def _take_back_published_parts(self, paths: list[Path], names: tuple[str | None, ...]) -> None:
        """Move back the parts an earlier seal published before it died without its entry (docs/format/
        container.md §11.4): a final-named part whose staged file is gone and whose header ID equals the
        staged entry's (which is still here: it is removed only once the entry is published). When the
        staged file is still there too (the seal died between link and unlink), the published name goes."""
        entry_id = head_artifact_id(paths[0], ENTRY_MAGIC)
        if entry_id is None or os.path.lexists(self.entry):
            return
        for i in range(1, len(paths)):
            final = self.entry.parent / names[i]
            if head_artifact_id(final, PART_MAGIC) == entry_id:
                try:
                    if os.path.lexists(paths[i]):
                        os.unlink(final)
                    else:
                        os.rename(final, paths[i])
                except OSError as exc:
                    raise WriterError(f"cannot take back the part an interrupted seal published: {exc.strerror}",
                                      file=str(final), section="§11.4", rule="io_error") from None
                log.info("took back %s, published by an interrupted seal", final)

    def discard(self) -> None:
        """Remove the staging directory without publishing anything — and the parts an interrupted seal
        published without its entry (they carry the staged entry's ID; nothing else would remove them)."""
        self.close()
        paths = [self.staging / _file_name(i) for i in range(len(self.plan.sizes))]
        entry_id = head_artifact_id(paths[0], ENTRY_MAGIC)
        if entry_id is not None and not os.path.lexists(self.entry):
            for name in self.plan.names[1:]:
                final = self.entry.parent / name
                if head_artifact_id(final, PART_MAGIC) == entry_id:
                    try:
                        final.unlink()
                    except OSError as exc:
                        log.warning("cannot remove %s: %s", final, exc)
        shutil.rmtree(self.staging, ignore_errors=True)
