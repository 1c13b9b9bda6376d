"""Range reads over the logical payload of a file set (container spec §2.2, §3.2, §11.1, §11.2).

A logical range ``[offset, offset+length)`` is cut at the file boundaries ``P_i``; each piece
``[a, b)`` is read at ``file_payload_start(i) + (a - P_i)`` into ``a - offset`` of the destination.
Continuation parts are opened only when a read needs them, and checked then (magic, ``part_index``,
``artifact_id``, exact length, §3.2): a missing or foreign part fails exactly the reads that touch it,
with an error naming the part. A range inside one file is returned as a zero-copy ``memoryview`` of a
read-only memory map of that range; a range across files is assembled with ``pread`` (a short read is an error, not
a ``SIGBUS``). Lengths are checked when a file is opened; a file truncated *while* mapped is outside
what a reader can defend against and is not handled.
"""

from __future__ import annotations

import bisect
import mmap
import os
import stat
import threading
from dataclasses import dataclass

from ninfer_core.container.framing import HEADER_BYTES, PART_MAGIC, PartHeader
from ninfer_core.container.records import FileEntry
from ninfer_core.errors import RangeError, ReadError

_MAX_PREAD = 1 << 30  # one pread call at most (Linux caps a read near 2 GiB anyway)


@dataclass(frozen=True)
class Segment:
    """One piece of a logical range inside one file (§11.2)."""

    file: FileEntry
    file_offset: int
    dest_offset: int
    nbytes: int


def pread_exact(fd: int, buf: memoryview, file_offset: int, *, file: str) -> None:
    """Fill ``buf`` from ``fd`` at ``file_offset``; an early EOF or I/O failure is a :class:`ReadError`."""
    done = 0
    total = len(buf)
    while done < total:
        chunk = buf[done:done + _MAX_PREAD]
        try:
            n = os.preadv(fd, [chunk], file_offset + done)
        except OSError as exc:
            raise ReadError(f"read of {total} bytes at offset {file_offset} failed: {exc.strerror}",
                            file=file, section="§11.2", rule="io_error") from None
        if n == 0:
            raise ReadError(f"file ends {total - done} bytes early: read of {total} bytes at offset "
                            f"{file_offset} reached EOF", file=file, section="§11.2", rule="short_read")
        done += n


class _OpenFile:
    __slots__ = ("entry", "fd")

    def __init__(self, entry: FileEntry, fd: int) -> None:
        self.entry = entry
        self.fd = fd


class PayloadFiles:
    """The files of one artifact, opened on demand, serving range reads of the logical payload."""

    def __init__(self, files: tuple[FileEntry, ...], artifact_id: bytes, entry_fd: int) -> None:
        self.files = files
        self.artifact_id = artifact_id
        self.payload_bytes = files[-1].payload_end
        self._starts = [f.payload_offset for f in files]
        self._open: dict[int, _OpenFile] = {0: _OpenFile(files[0], entry_fd)}
        self._lock = threading.Lock()

    # ---- mapping (§11.2) ----------------------------------------------------------------------

    def check_range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.payload_bytes:
            raise RangeError(f"read [{offset}, {offset + length}) is outside the logical payload "
                             f"[0, {self.payload_bytes})", file=str(self.files[0].location), section="§11.2",
                             rule="read_range")

    def segments(self, offset: int, length: int) -> list[Segment]:
        """The per-file pieces of ``[offset, offset+length)``, in order."""
        self.check_range(offset, length)
        out = []
        end = offset + length
        i = bisect.bisect_right(self._starts, offset) - 1
        pos = offset
        while pos < end:
            f = self.files[i]
            b = min(end, f.payload_end)
            if b > pos:
                out.append(Segment(f, f.payload_start + (pos - f.payload_offset), pos - offset, b - pos))
                pos = b
            i += 1
        return out

    # ---- opening and checking parts (§3.2) ----------------------------------------------------

    def opened(self, index: int) -> _OpenFile:
        """The open file ``index``, opening and checking a part the first time it is needed."""
        with self._lock:
            handle = self._open.get(index)
            if handle is None:
                handle = _OpenFile(self.files[index], self._open_part(self.files[index]))
                self._open[index] = handle
            return handle

    def _open_part(self, entry: FileEntry) -> int:
        name = str(entry.location)
        where = f"part files[{entry.index}] {entry.path!r}"
        try:
            # non-blocking: opening a FIFO in a part's place must not wait for a writer (checked below)
            fd = os.open(entry.location, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise ReadError(f"{where} is missing", file=name, json_path=f"$.files[{entry.index}]",
                            section="§11.1", rule="part_missing") from None
        except OSError as exc:
            raise ReadError(f"{where} cannot be opened: {exc.strerror}", file=name,
                            json_path=f"$.files[{entry.index}]", section="§11.1", rule="part_unreadable") from None
        try:
            check_part_file(fd, entry, self.artifact_id)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def check_all(self) -> list[ReadError]:
        """Open every part; return the problems (one per bad part) instead of raising."""
        problems = []
        for f in self.files[1:]:
            try:
                self.opened(f.index)
            except ReadError as exc:
                problems.append(exc)
        return problems

    # ---- reads ---------------------------------------------------------------------------------

    def view(self, offset: int, length: int) -> memoryview:
        """The bytes of a logical range: zero-copy when it lies in one file, else a fresh copy.

        A one-file range is a view of a memory map of just that range; the map is released when the
        last view of it is dropped, so reading object after object does not accumulate mapped pages.
        """
        segs = self.segments(offset, length)
        if not segs:
            return memoryview(b"")
        if len(segs) == 1:
            seg = segs[0]
            handle = self.opened(seg.file.index)
            check_unchanged_length(handle.fd, seg.file)  # mapping past EOF would be a SIGBUS, not an error
            start = seg.file_offset // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
            skip = seg.file_offset - start
            try:
                mapped = mmap.mmap(handle.fd, skip + seg.nbytes, offset=start, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # a file system without mmap: fall back to a copy
                buf = bytearray(length)
                self.readinto(offset, memoryview(buf))
                return memoryview(buf)
            return memoryview(mapped)[skip:skip + seg.nbytes].toreadonly()
        buf = bytearray(length)
        self.readinto(offset, memoryview(buf))
        return memoryview(buf)

    def readinto(self, offset: int, buf: memoryview) -> None:
        """Copy the logical range ``[offset, offset+len(buf))`` into ``buf`` with ``pread``."""
        for seg in self.segments(offset, len(buf)):
            handle = self.opened(seg.file.index)
            pread_exact(handle.fd, buf[seg.dest_offset:seg.dest_offset + seg.nbytes], seg.file_offset,
                        file=str(seg.file.location))

    def close(self) -> None:
        with self._lock:
            handles, self._open = list(self._open.values()), {}
        for h in handles:
            os.close(h.fd)


def check_unchanged_length(fd: int, entry: FileEntry) -> None:
    """A file checked at open must still have its length when it is mapped (it may be truncated since)."""
    size = os.fstat(fd).st_size
    if size < entry.file_bytes:
        raise ReadError(f"file is now {size} bytes, shorter than its {entry.file_bytes} bytes when opened",
                        file=str(entry.location), json_path=f"$.files[{entry.index}]", section="§11.2",
                        rule="short_read")


def file_kind(mode: int) -> str:
    """A word for a file type that is not a regular file, for error messages."""
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return word
    return "not a regular file"


def check_part_file(fd: int, entry: FileEntry, artifact_id: bytes) -> None:
    """§3.2: a part's magic, ``part_index``, ``artifact_id`` and length ``4096 + payload_bytes``."""
    name = str(entry.location)
    jp = f"$.files[{entry.index}]"
    where = f"part files[{entry.index}] {entry.path!r}"
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ReadError(f"{where} is not a regular file ({file_kind(st.st_mode)})", file=name, json_path=jp,
                        section="§11.1", rule="part_unreadable")
    size = st.st_size
    raw = bytearray(min(size, HEADER_BYTES))
    pread_exact(fd, memoryview(raw), 0, file=name)
    parsed = PartHeader.unpack(bytes(raw))
    if parsed is None:
        raise ReadError(f"{where} is {size} bytes, shorter than its {HEADER_BYTES}-byte header", file=name,
                        json_path=jp, section="§3.2", rule="part_length")
    magic, header = parsed
    if magic != PART_MAGIC:
        raise ReadError(f"{where} has magic {magic.hex(' ')}, expected {PART_MAGIC.hex(' ')}", file=name,
                        json_path=jp, section="§3.2", rule="part_magic")
    if header.artifact_id != artifact_id:
        raise ReadError(f"{where} belongs to artifact {header.artifact_id.hex()}, not {artifact_id.hex()}",
                        file=name, json_path=jp, section="§3.2", rule="part_artifact_id")
    if header.part_index != entry.index:
        raise ReadError(f"{where} says part_index {header.part_index}, expected {entry.index}", file=name,
                        json_path=jp, section="§3.2", rule="part_index")
    if size != entry.file_bytes:
        raise ReadError(f"{where} is {size} bytes, expected 4096 + {entry.payload_bytes} = {entry.file_bytes}",
                        file=name, json_path=jp, section="§3.2", rule="part_length")
