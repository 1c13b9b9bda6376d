"""Writing one artifact's file set: temporaries, positioned writes, coverage, publish (§3, §11.4).

A :class:`FileSetWriter` receives a final :class:`~ninfer_core.container.planner.FilePlan`. It creates
one hidden temporary per file in the target directory (exclusive create), sets each to its exact final
length (a sparse file: unwritten bytes read as zero, which is what the alignment zones and object gaps
must hold), writes the headers and the padded JSON, then accepts payload bytes at any logical offset,
from any thread: a logical range is mapped to files exactly as a reader maps it (§11.2) and written
with ``os.pwrite``, at most :data:`~ninfer_core.container.filecopy.WRITE_BYTES` per call (docs/io-speed.md
§Write size); a durable writer writes whole 2 MiB units past the page cache instead, on a thread of their
own (:mod:`.direct`, docs/io-speed.md §Direct writes). :meth:`commit` checks that the required logical
ranges were fully written, flushes (``fsync``) the files, publishes the parts first and the entry last
without ever replacing an existing name, and flushes the directory. :meth:`abort` (called on any failure,
``KeyboardInterrupt`` included) waits for in-flight writes, closes and removes every temporary and any
part already published without its entry.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

from ninfer_core.container.direct import (
    UNIT,
    BoundaryUnits,
    DirectQueue,
    DirectRun,
    open_direct,
    pwrite_direct,
)
from ninfer_core.container.filecopy import WRITE_BYTES, FileRange, RangeCopier
from ninfer_core.container.framing import EntryHeader, PartHeader
from ninfer_core.container.planner import FilePlan
from ninfer_core.container.tempfiles import (
    cleanup_temporaries,
    fsync_directory,
    new_token,
    publish_noreplace,
    temp_name,
)
from ninfer_core.errors import ArtifactExistsError, NinferError, WriterError

log = logging.getLogger(__name__)


def check_targets_free(entry: Path, names: list[str | None] | tuple[str | None, ...]) -> None:
    """Refuse (before writing anything) when the entry or any planned part name exists (§11.4). Refusing an
    existing entry first removes dead writers' temporaries of it: one killed between publishing the entry
    and removing its temporary left a hard link to the published entry that no later write would clean."""
    for name in names:
        final = entry if name is None else entry.parent / name
        if os.path.lexists(final):
            if name is None:
                cleanup_temporaries(entry)
            what = "artifact" if name is None else "continuation part"
            raise ArtifactExistsError(f"{what} {final.name} already exists; it is never overwritten (remove it "
                                      f"or choose another name)", file=str(final), section="§11.4",
                                      rule="target_exists")


def file_head(plan: FilePlan, index: int, artifact_id: bytes) -> bytes:
    """The bytes at the start of file ``index``: entry header + JSON text, or the part header (§3.1, §3.2)."""
    if index == 0:
        return EntryHeader(plan.json_bytes, artifact_id).pack() + plan.json_text
    return PartHeader(index, artifact_id).pack()


def _close_quietly(fds: list[int | None]) -> None:
    for fd in fds:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


class _Temps:
    """The temporaries and published names of one writer; removing them is idempotent."""

    def __init__(self) -> None:
        self.fds: list[int] = []
        self.direct_fds: list[int | None] = []  # O_DIRECT descriptors of a durable writer (.direct)
        self.paths: list[Path] = []
        self.published: list[Path] = []

    def close_direct(self) -> None:
        _close_quietly(self.direct_fds)
        self.direct_fds = []

    def remove(self) -> None:
        self.close_direct()
        _close_quietly(self.fds)
        self.fds = []
        for path in self.paths + self.published:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("cannot remove %s: %s", path, exc)
        self.paths, self.published = [], []


class FileSetWriter:
    """Temporaries of a planned artifact, written at logical offsets and published atomically."""

    def __init__(self, entry: Path, plan: FilePlan, artifact_id: bytes, *, durable: bool = True,
                 objects: Sequence[tuple[int, int]] = ()) -> None:
        """``objects``: the logical ``(start, end)`` of every object, in order; with them a durable writer
        also writes the units objects share directly (docs/io-speed.md §Direct writes)."""
        self.entry = entry
        self.plan = plan
        self.artifact_id = artifact_id
        self.durable = durable
        self.finals = [entry if n is None else entry.parent / n for n in plan.names]
        self._cond = threading.Condition()
        self._write_locks = [threading.Lock() for _ in plan.names]  # one writer per file at a time (§Write path)
        self._inflight = 0
        self._closed = False
        self.direct_bytes = 0  # payload bytes written with O_DIRECT (docs/io-speed.md §Direct writes)
        self._direct_refused: set[int] = set()  # files whose direct writes the kernel refused
        self._queue: DirectQueue | None = None
        self._boundary: BoundaryUnits | None = None
        self._temps = _Temps()
        self._finalizer = weakref.finalize(self, _Temps.remove, self._temps)
        check_targets_free(entry, plan.names)
        try:
            self._create()
        except BaseException:
            self.abort()
            raise
        self._object_starts = [start for start, _ in objects]
        self._object_ends = [end for _, end in objects]
        self._queue = DirectQueue(self._write_unit) if any(fd is not None for fd in self._temps.direct_fds) \
            else None
        self._boundary = BoundaryUnits(self._unit_object_bytes, self._guarded_write, self._queue) \
            if objects and self._queue is not None else None

    def _create(self) -> None:
        token = new_token()
        for i, final in enumerate(self.finals):
            temp = final.parent / temp_name(final.name, token)
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            except OSError as exc:
                raise WriterError(f"cannot create temporary {temp.name}: {exc.strerror}", file=str(temp),
                                  section="§11.4", rule="io_error") from None
            self._temps.paths.append(temp)
            self._temps.fds.append(fd)
            try:
                os.ftruncate(fd, self.plan.file_bytes(i))
                self._pwrite_all(fd, memoryview(file_head(self.plan, i, self.artifact_id)), 0, temp)
            except OSError as exc:
                raise WriterError(f"cannot prepare {temp.name}: {exc.strerror}", file=str(temp),
                                  section="§11.4", rule="io_error") from None
            self._temps.direct_fds.append(open_direct(temp) if self.durable else None)

    @property
    def payload_bytes(self) -> int:
        return self.plan.payload_bytes

    # ---- headers rewritten before commit (content-derived ID, provenance filled in late) -------------

    def replace_artifact_id(self, artifact_id: bytes) -> None:
        """Write ``artifact_id`` into every header (before :meth:`commit`; §3.1, §3.2)."""
        self.artifact_id = artifact_id
        self._write_heads()

    def replace_plan(self, plan: FilePlan) -> None:
        """Write a new JSON text of the same ``json_bytes`` (same files table) into the entry."""
        if (plan.json_bytes, plan.sizes, plan.names) != (self.plan.json_bytes, self.plan.sizes, self.plan.names):
            raise WriterError("a replaced directory must keep json_bytes and the files table", file=str(self.entry),
                              section="§11.4", rule="json_reservation")
        self.plan = plan
        self._write_heads()

    def _write_heads(self) -> None:
        with self._cond:
            if self._closed:
                raise WriterError("the writer was closed or aborted", file=str(self.entry), section="§11.4",
                                  rule="writer_state")
        for i, fd in enumerate(self._temps.fds):
            self._pwrite_all(fd, memoryview(file_head(self.plan, i, self.artifact_id)), 0, self._temps.paths[i])

    # ---- positioned writes (§11.2 mapping, in reverse) -------------------------------------------

    def write_at(self, offset: int, data: memoryview, run: DirectRun | None = None) -> None:
        """Write ``data`` at logical payload ``offset`` (any thread, any order); through ``run`` (one of
        :meth:`direct_run`) when it continues that thread's run of in-order bytes."""
        end = offset + len(data)
        if offset < 0 or end > self.plan.payload_bytes:
            raise WriterError(f"write [{offset}, {end}) is outside the payload [0, {self.plan.payload_bytes})",
                              file=str(self.entry), section="§11.2", rule="write_range")
        if run is None and self._boundary is not None:  # units shared with other objects are assembled
            run = self.direct_run()
            try:
                self.write_at(offset, data, run)
                run.close()
            finally:
                run.release()
            return
        for i, start, stop, file_offset in self.plan.file_spans(offset, end):
            if run is None:
                self._guarded_write(i, data[start - offset:stop - offset], file_offset)
            else:
                run.write(i, data[start - offset:stop - offset], file_offset)

    def direct_run(self) -> DirectRun | None:
        """A run for one thread's in-order writes whose whole units bypass the page cache, or None when this
        writer writes through the page cache only (not durable, or no file allows ``O_DIRECT``;
        docs/io-speed.md §Direct writes). Close it, then release it."""
        if self._queue is None:
            return None
        return DirectRun(self._queue, self._guarded_write if self._boundary is None else self._boundary.add,
                         self._guarded_write)

    def _unit_object_bytes(self, index: int, unit: int) -> int | None:
        """How many object bytes unit ``unit`` of file ``index`` holds; None when it holds header bytes or
        the file ends inside it (such a unit is written through the page cache)."""
        start = unit * UNIT
        if start < self.plan.payload_start(index) or start + UNIT > self.plan.file_bytes(index):
            return None
        lo = self.plan.file_offsets[index] + start - self.plan.payload_start(index)
        hi = lo + UNIT
        first = bisect.bisect_right(self._object_ends, lo)
        last = bisect.bisect_left(self._object_starts, hi)
        return sum(min(hi, self._object_ends[k]) - max(lo, self._object_starts[k]) for k in range(first, last))

    def copy_at(self, offset: int, rng: FileRange) -> None:
        """Copy the bytes of ``rng`` to logical payload ``offset`` in the kernel (:mod:`.filecopy`)."""
        end = offset + rng.length
        if offset < 0 or end > self.plan.payload_bytes:
            raise WriterError(f"copy [{offset}, {end}) is outside the payload [0, {self.plan.payload_bytes})",
                              file=str(self.entry), section="§11.2", rule="write_range")
        for i, start, stop, file_offset in self.plan.file_spans(offset, end):
            at, length = start - offset, stop - start
            if self._boundary is not None:  # the copy's first and last partial units are assembled
                head = min(length, -file_offset % UNIT)
                tail = (file_offset + length) % UNIT if length > head else 0
                for a, n in ((at, head), (at + length - tail, tail)):
                    if n:
                        self._boundary.add(i, memoryview(rng.read(a, n)), file_offset + a - at)
                at, length, file_offset = at + head, length - head - tail, file_offset + head
            if length:
                self._guarded_write(i, None, file_offset, copy=(rng, at, length))

    def _write_unit(self, index: int, data: memoryview, file_offset: int) -> None:
        """Write whole units a run queued (on the queue's thread; commit drains the queue, abort cancels it
        before any file closes): with ``O_DIRECT``, taking no per-file lock as nothing is copied into the page
        cache, or through the page cache once the kernel refused direct writes to this file."""
        fd = self._temps.direct_fds[index]
        if fd is not None and index not in self._direct_refused:
            try:
                written = pwrite_direct(fd, data, file_offset)
            except OSError as exc:
                raise WriterError(f"write of {len(data)} bytes at offset {file_offset} failed: {exc.strerror}",
                                  file=str(self._temps.paths[index]), section="§11.4", rule="io_error") from None
            with self._cond:
                if written:
                    self.direct_bytes += len(data)
                    return
                self._direct_refused.add(index)
        with self._write_locks[index]:
            self._pwrite_all(self._temps.fds[index], data, file_offset, self._temps.paths[index])

    def _guarded_write(self, index: int, data: memoryview | None, file_offset: int,
                       copy: tuple[FileRange, int, int] | None = None) -> None:
        with self._cond:
            if self._closed:
                raise WriterError("the writer was closed or aborted", file=str(self.entry), section="§11.4",
                                  rule="writer_state")
            self._inflight += 1
            fd = self._temps.fds[index]
        try:
            if copy is None:
                with self._write_locks[index]:
                    self._pwrite_all(fd, data, file_offset, self._temps.paths[index])
            else:
                rng, start, length = copy
                RangeCopier.copy(rng, start, length, fd, file_offset, self._temps.paths[index])
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()

    @staticmethod
    def _pwrite_all(fd: int, data: memoryview, file_offset: int, path: Path) -> None:
        done = 0
        while done < len(data):
            try:
                n = os.pwrite(fd, data[done:done + WRITE_BYTES], file_offset + done)
            except OSError as exc:
                raise WriterError(f"write of {len(data)} bytes at offset {file_offset} failed: {exc.strerror}",
                                  file=str(path), section="§11.4", rule="io_error") from None
            done += n

    # ---- finishing -------------------------------------------------------------------------------

    def _quiesce(self) -> None:
        with self._cond:
            self._closed = True
            while self._inflight:
                self._cond.wait()

    def commit(self) -> Path:
        """Flush, check lengths, publish parts then the entry (§11.4 step 7); returns the entry path."""
        if self._queue is not None:
            try:
                if self._boundary is not None:
                    self._boundary.flush()
                self._queue.drain()
            except BaseException:
                self.abort()
                raise
        self._quiesce()
        try:
            for i, fd in enumerate(self._temps.fds):
                size = os.fstat(fd).st_size
                if size != self.plan.file_bytes(i):
                    raise WriterError(f"{self._temps.paths[i].name} is {size} bytes, expected "
                                      f"{self.plan.file_bytes(i)}", file=str(self._temps.paths[i]),
                                      section="§11.4", rule="file_length")
                if self.durable:
                    os.fsync(fd)
            self._temps.close_direct()
            for fd in self._temps.fds:
                os.close(fd)
            self._temps.fds = []
            for i in range(1, len(self.finals)):  # parts first …
                publish_noreplace(self._temps.paths[i], self.finals[i])
                self._temps.published.append(self.finals[i])
            if self.durable and len(self.finals) > 1:
                fsync_directory(self.entry.parent)  # … durably, before the entry can exist
            publish_noreplace(self._temps.paths[0], self.entry)  # the entry last
            self._temps.published.append(self.entry)
            if self.durable:
                fsync_directory(self.entry.parent)
        except BaseException as exc:
            self.abort()
            if isinstance(exc, OSError) and not isinstance(exc, NinferError):  # fsync/close: EIO, ENOSPC …
                raise WriterError(f"cannot flush the artifact's files: {exc.strerror or exc}", file=str(self.entry),
                                  section="§11.4", rule="io_error") from None
            raise
        self._temps.paths, self._temps.published = [], []
        self._finalizer.detach()
        self._queue = self._boundary = None  # their buffers go with them
        return self.entry

    def abort(self) -> None:
        """Stop accepting writes, wait for writes in flight, remove temporaries and unpublished parts."""
        self._quiesce()
        if self._queue is not None:  # before the files close
            self._queue.cancel(WriterError("the writer was aborted", file=str(self.entry), section="§11.4",
                                           rule="writer_state"))
        published_entry = self.entry in self._temps.published
        if published_entry:  # the artifact is complete; only leftovers remain to remove
            self._temps.published = []
        self._temps.remove()
        self._finalizer.detach()

