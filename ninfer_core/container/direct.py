"""Durable writes that bypass the page cache (docs/io-speed.md §Direct writes).

A durable writer must get every byte to disk before it publishes, so copying the bytes into the page
cache first only costs: the kernel allocates a new page per 4 KiB, copies into it and writes it back
later. A :class:`DirectRun` gathers one thread's in-order bytes into page-aligned buffers and hands
whole :data:`UNIT`\\ s of them to the writer's :class:`DirectQueue`, whose thread writes them with
``O_DIRECT`` (the disk reads them straight from the buffer) while the producer goes on. The bytes before
the run's first unit boundary and after its last share their units with other objects; the writer's
:class:`BoundaryUnits` gathers them, and queues a unit once every object byte in it has arrived, or
writes it through the page cache when it cannot.

The rule that keeps the page cache coherent: a unit is written directly only as a whole, by one write,
and nothing ever writes into it through the page cache. The page cache holds a file in naturally aligned
folios of at most :data:`UNIT` bytes, so no cached folio can span a directly written unit.
"""

from __future__ import annotations

import collections
import errno
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ninfer_core.errors import WriterError

#: bytes of one directly written unit: the largest page-cache folio (2 MiB with 4 KiB pages), and a multiple
#: of every logical block size
UNIT = 2 << 20
#: bytes of one gathering buffer: a run hands its buffer to the queue when it is full (whole units)
STAGE_BYTES = 4 * UNIT
#: bytes queued or being written at most: a producer that would queue more waits for the disk
QUEUE_BYTES = 4 * STAGE_BYTES
#: units a writer assembles at once (:class:`BoundaryUnits`): 64 MiB
MAX_GATHERING = 32
#: errors that mean "direct writes are not possible here", not "the write failed"
_REFUSED = {errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}

Write = Callable[[int, memoryview, int], None]  # (file index, bytes, file offset)


def open_direct(path: Path) -> int | None:
    """A second, ``O_DIRECT`` descriptor for writing ``path``; None where the platform, the page size or the
    file system does not allow direct writes (tmpfs on old kernels, some network file systems)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag or mmap.PAGESIZE != 4096:  # larger pages mean larger folios than UNIT
        return None
    try:
        return os.open(path, os.O_WRONLY | flag | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def pwrite_direct(fd: int, data: memoryview, file_offset: int) -> bool:
    """Write ``data`` (whole units, page-aligned memory) at ``file_offset`` with ``O_DIRECT``; False when the
    kernel refuses direct writes for this file (nothing was written then). Other errors raise ``OSError``."""
    done = 0
    while done < len(data):
        try:
            n = os.pwrite(fd, data[done:], file_offset + done)
        except OSError as exc:
            if exc.errno in _REFUSED and done == 0:
                return False
            raise
        if n <= 0 or n % UNIT:  # a short direct write leaves an unaligned rest: no such file system is known
            raise OSError(errno.EIO, f"direct write of {len(data) - done} bytes wrote {n}")
        done += n
    return True


def _new_buffer(size: int) -> memoryview | None:
    """A page-aligned buffer, or None when the process may not have more memory (``ulimit -v``, a cgroup):
    then the bytes go through the page cache instead — direct writes are a speed-up, never a requirement."""
    try:
        return memoryview(mmap.mmap(-1, size))
    except (OSError, MemoryError):
        return None


class DirectQueue:
    """Whole units written on a thread of their own, in the order queued: ``write(index, view,
    file_offset)`` writes them (directly, or through the page cache where the kernel refuses). The thread
    ends whenever the queue is empty and starts again with the next unit, so an idle writer holds none.
    The first error is kept, no later unit is written, and :meth:`submit` and :meth:`drain` raise it. A
    producer waits only when :data:`QUEUE_BYTES` are queued already: then the disk is the limit. So the
    buffers alive are those the producers hold, :data:`QUEUE_BYTES` and the spares among them."""

    def __init__(self, write: Write) -> None:
        self.write = write
        self._cond = threading.Condition()
        self._items: collections.deque = collections.deque()
        self._busy = 0  # buffers queued or being written
        self._queued_bytes = 0
        self._spare: list[memoryview] = []
        self._error: BaseException | None = None
        self._running = False

    def buffer(self) -> memoryview | None:
        """A gathering buffer of :data:`STAGE_BYTES`: a written one, else a new one (None: no memory)."""
        with self._cond:
            if self._spare:
                return self._spare.pop()
        return _new_buffer(STAGE_BYTES)

    def give_back(self, buf: memoryview) -> None:
        """Return a gathering buffer that was not queued."""
        with self._cond:
            self._spare.append(buf)
            self._cond.notify_all()

    def submit(self, index: int, buf: memoryview, n: int, file_offset: int,
               done: Callable[[memoryview], None] | None = None) -> None:
        """Queue the first ``n`` bytes of ``buf`` (whole units) for ``file_offset`` of file ``index``; the
        buffer belongs to the queue until it is written, then goes to ``done`` (default: this queue's
        gathering buffers)."""
        with self._cond:
            while self._queued_bytes >= QUEUE_BYTES and self._error is None:
                self._cond.wait()
            if self._error is not None:
                raise self._error
            self._items.append((index, buf, n, file_offset, done))
            self._busy += 1
            self._queued_bytes += n
            start = not self._running
            self._running = True
        if start:
            try:
                threading.Thread(target=self._run, name="ninfer-direct-writes", daemon=True).start()
            except RuntimeError:  # no thread to be had (a limit on memory or threads): write here
                self._run()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._items:
                    self._running = False
                    return
                index, buf, n, file_offset, done = self._items.popleft()
                skip = self._error is not None
            try:
                if not skip:
                    self.write(index, buf[:n], file_offset)
            except BaseException as exc:  # noqa: BLE001 - kept; raised in the producers and at commit
                with self._cond:
                    self._error = self._error or exc
            finally:
                if done is not None:
                    done(buf)
                with self._cond:
                    if done is None:
                        self._spare.append(buf)
                    self._busy -= 1
                    self._queued_bytes -= n
                    self._cond.notify_all()

    def drain(self) -> None:
        """Wait until everything queued is written; raise the first error."""
        with self._cond:
            while self._busy:
                self._cond.wait()
            if self._error is not None:
                raise self._error

    def cancel(self, reason: BaseException) -> None:
        """Write nothing more: drop what is queued, wait for the write under way (before its file closes)."""
        with self._cond:
            self._error = self._error or reason
            while self._busy:
                self._cond.wait()


class DirectRun:
    """One thread's in-order bytes of one object: whole units queued on ``queue``, the bytes of units the
    run does not fill given to ``partial`` (a :meth:`BoundaryUnits.add`); without memory for a gathering
    buffer, the run's own units are written by ``buffered``. Call :meth:`write` with
    consecutive file positions and :meth:`close` at the end; a write that does not continue the last one
    ends the run there and starts a new one. :meth:`release` gives the gathering buffer back."""

    def __init__(self, queue: DirectQueue, partial: Write, buffered: Write) -> None:
        self.queue, self.partial, self.buffered = queue, partial, buffered
        self.stage: memoryview | None = None
        self.index, self.base, self.fill = -1, 0, 0  # file, file offset of stage[0], bytes gathered

    def write(self, index: int, data: memoryview, file_offset: int) -> None:
        while len(data):
            if index != self.index or file_offset != self.base + self.fill:
                self.close()
                head = -file_offset % UNIT
                if head:  # up to the first unit boundary: a unit shared with other writes
                    head = min(head, len(data))
                    self.partial(index, data[:head], file_offset)
                    data, file_offset = data[head:], file_offset + head
                    continue
                self.index, self.base = index, file_offset
            if self.stage is None:
                self.stage = self.queue.buffer()
                if self.stage is None:  # no memory: whole units are this run's alone, so written buffered
                    n = len(data) - (file_offset + len(data)) % UNIT
                    if n:
                        self.buffered(index, data[:n], file_offset)
                    if n < len(data):  # a unit it may not fill: shared territory
                        self.partial(index, data[n:], file_offset + n)
                    self.index, self.base = -1, 0
                    return
            n = min(len(data), STAGE_BYTES - self.fill)
            self.stage[self.fill:self.fill + n] = data[:n]
            self.fill += n
            data, file_offset = data[n:], file_offset + n
            if self.fill == STAGE_BYTES:
                self._emit(STAGE_BYTES)

    def close(self) -> None:
        """Give the run's last, partial unit to ``partial`` and queue the gathered whole units."""
        whole = self.fill // UNIT * UNIT
        if self.fill > whole:
            self.partial(self.index, self.stage[whole:self.fill], self.base + whole)
        if whole:
            self._emit(whole)
        self.index, self.base, self.fill = -1, 0, 0

    def release(self) -> None:
        """Give the gathering buffer back (after :meth:`close`, or dropping what is gathered)."""
        if self.stage is not None:
            self.queue.give_back(self.stage)
            self.stage = None

    def _emit(self, n: int) -> None:
        """Queue the first ``n`` gathered bytes (whole units, all there is: the buffer goes with them)."""
        full, self.stage = self.stage, None
        self.queue.submit(self.index, full, n, self.base)
        self.base, self.fill = self.base + n, 0


_BUFFERED, _WRITTEN = "buffered", "written"  # a unit's state once it is no longer gathered


def _written_twice(index: int, unit: int) -> WriterError:
    return WriterError(f"bytes [{unit * UNIT}, {(unit + 1) * UNIT}) of file {index} were written more than once "
                       "(chunks of an object overlap)", section="§11.4", rule="object_length")


class _Gathering:
    """A unit being assembled: its bytes so far (zero elsewhere) and how many object bytes it still awaits."""

    __slots__ = ("buf", "missing", "parts")

    def __init__(self, buf: memoryview, missing: int) -> None:
        self.buf, self.missing = buf, missing
        self.parts: list[tuple[int, int]] = []  # (start, end) of the bytes that arrived


class BoundaryUnits:
    """The units that several writes share (an object's first and last unit, its neighbour's, a kernel
    copy's ends), assembled in memory and written directly once all their object bytes have arrived.

    ``expected(index, unit)``: how many object bytes unit ``unit`` of file ``index`` holds, or None when the
    unit cannot be written directly (it holds a file's header, or the file ends inside it); such units,
    and the bytes that cannot be assembled, are written by ``buffered``. At most :data:`MAX_GATHERING`
    units are held; past that the oldest is written through the page cache, as is every later byte of it.
    Thread-safe."""

    def __init__(self, expected: Callable[[int, int], int | None], buffered: Write, queue: DirectQueue) -> None:
        self.expected, self.buffered, self.queue = expected, buffered, queue
        self._lock = threading.Lock()
        self._units: dict[tuple[int, int], _Gathering | str] = {}  # insertion order: oldest first
        self._gathering = 0
        self._spare: list[memoryview] = []  # buffers of written units, reused (fresh pages cost a fault each)

    def add(self, index: int, data: memoryview, file_offset: int) -> None:
        """Object bytes at ``file_offset`` of file ``index`` (any length: cut at unit boundaries here)."""
        while len(data):
            unit, at = divmod(file_offset, UNIT)
            n = min(len(data), UNIT - at)
            self._add_to_unit(index, unit, at, data[:n])
            data, file_offset = data[n:], file_offset + n

    def _add_to_unit(self, index: int, unit: int, at: int, data: memoryview) -> None:
        key = (index, unit)
        complete = evicted = None
        with self._lock:
            state = self._units.get(key)
            if state is None:
                expected = self.expected(index, unit)
                if expected is None:
                    state = self._units[key] = _BUFFERED
                elif (buf := self._buffer()) is None:  # no memory to assemble it
                    state = self._units[key] = _BUFFERED
                else:
                    state = self._units[key] = _Gathering(buf, expected)
                    self._gathering += 1
                    if self._gathering > MAX_GATHERING:
                        evicted = self._evict_oldest()
            if state is _WRITTEN:
                raise _written_twice(index, unit)
            if isinstance(state, _Gathering):
                state.buf[at:at + len(data)] = data
                state.parts.append((at, at + len(data)))
                state.missing -= len(data)
                if state.missing < 0:
                    raise _written_twice(index, unit)
                if state.missing == 0:
                    complete = state
                    self._units[key] = _WRITTEN
                    self._gathering -= 1
        if evicted is not None:
            self._write_buffered(*evicted)
        if not isinstance(state, _Gathering):
            self.buffered(index, data, unit * UNIT + at)
        elif complete is not None:
            self.queue.submit(index, complete.buf, UNIT, unit * UNIT, done=self._give_back)

    def _give_back(self, buf: memoryview) -> None:
        with self._lock:
            self._spare.append(buf)

    def _buffer(self) -> memoryview | None:
        """A zeroed unit buffer (under the lock); None: no memory."""
        if self._spare:
            buf = self._spare.pop()
            np.frombuffer(buf, dtype=np.uint8)[:] = 0
            return buf
        return _new_buffer(UNIT)

    def _evict_oldest(self) -> tuple[int, int, _Gathering]:
        """Take the oldest gathering unit out (under the lock); the caller writes it through the page cache."""
        for key, state in self._units.items():
            if isinstance(state, _Gathering):
                self._units[key] = _BUFFERED
                self._gathering -= 1
                return (*key, state)
        raise AssertionError("no unit is being gathered")

    def _write_buffered(self, index: int, unit: int, state: _Gathering) -> None:
        """Write the bytes of a unit that arrived through the page cache, and only those: the rest of it
        may be arriving from other threads, straight to the page cache now."""
        start = end = 0
        for a, b in [*sorted(state.parts), (UNIT + 1, UNIT + 1)]:
            if a != end:
                if end > start:
                    self.buffered(index, state.buf[start:end], unit * UNIT + start)
                start = a
            end = b
        self._give_back(state.buf)

    def flush(self) -> None:
        """Write every unit still gathering through the page cache (before the files are flushed)."""
        with self._lock:
            left = [(*key, state) for key, state in self._units.items() if isinstance(state, _Gathering)]
            for index, unit, _ in left:
                self._units[(index, unit)] = _BUFFERED
            self._gathering = 0
        for index, unit, state in left:
            self._write_buffered(index, unit, state)
