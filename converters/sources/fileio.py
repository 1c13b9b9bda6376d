"""Opening a selected path and reading its header exactly, with typed errors and identity checks.

docs/inspect.md §Identity and reading: the result records the exact selected path, file size, header length, header
SHA-256, the bytes read and the ranges read; before completing, the open descriptor's identity and
metadata (device, inode, size, mtime) are checked against the path, so a replacement or modification that
the file system shows is detected. A missing, non-regular or unusable path is ``target_unavailable``; a
host I/O or resource failure on a valid selection (EIO, EMFILE, ...) is ``execution_failure`` with the
path and cause in ``details.diagnostics``.

:class:`HeaderReader` reads the header sequentially through ``os.pread`` without reading past it: the
parser *promises* a lower bound on where the header still extends (from the counts it has read and the
minimal size of each remaining record), and the reader only reads ahead up to that bound. Every byte it
reads is therefore a header byte, so ``bytes_read == header_length`` and the header hash is computed on
the fly.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from converters.errors import SourceError, SourceFormatError
from converters.sources.limits import HEADER_CAP, limit_error

# errnos that mean the selected target itself is unusable (not a host failure).
_TARGET_ERRNOS = {
    errno.ENOENT: "missing",
    errno.ENOTDIR: "missing",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.ELOOP: "unusable",
    errno.EISDIR: "not_regular",
    errno.ENAMETOOLONG: "unusable",
    errno.ENXIO: "not_regular",
}

READ_CHUNK = 4 * 1024 * 1024
#: the Linux limits a path meets (a name of a directory entry, a whole path): os_error names them
NAME_MAX = 255
PATH_MAX = 4096


class SourceIOError(SourceError, OSError):
    """A host I/O or resource failure on a valid selection (``execution_failure``), with diagnostics."""

    def __init__(self, message: str, *, diagnostics: dict, **kw):
        kw.setdefault("code", "execution_failure")
        kw.setdefault("category", "io_error")
        self.diagnostics = diagnostics
        super().__init__(message, **kw)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["details"] = {"diagnostics": self.diagnostics}
        return d


def os_error(exc: OSError, path, action: str) -> SourceError:
    """Map an ``OSError`` from ``action`` on ``path`` to a typed source error."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.ENAMETOOLONG:
        reason += f" (a name is over {NAME_MAX} bytes or the path over {PATH_MAX})"
    category = _TARGET_ERRNOS.get(exc.errno)
    if category is not None:
        return SourceError(f"cannot {action}: {reason}", file=str(path), code="target_unavailable",
                           category=category, rule="target_usable",
                           section="docs/inspect.md §Identity and reading")
    return SourceIOError(
        f"I/O failure while trying to {action}: {reason}", file=str(path), rule="host_io",
        section="docs/inspect.md §Identity and reading",
        diagnostics={"path": str(path), "action": action, "errno": exc.errno,
                     "errno_name": errno.errorcode.get(exc.errno) if exc.errno else None, "reason": reason})


def nul_error(path) -> SourceError:
    """A path with a NUL byte names no file (the kernel cannot take it; Python raises ValueError)."""
    return SourceError("the path contains a NUL byte", file=str(path).replace("\0", "\\0"),
                       code="target_unavailable", category="unusable", rule="target_usable",
                       section="docs/inspect.md §Identity and reading")


@dataclass(frozen=True)
class FileIdentity:
    """What identifies an open file: device, inode, size and modification time."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class OpenFile:
    """A read-only descriptor on a regular file, with its identity at open time."""

    def __init__(self, path) -> None:
        self.path = Path(path)
        try:
            st_path = os.stat(self.path)
        except OSError as exc:
            raise os_error(exc, self.path, "stat the selected path") from None
        except ValueError:
            raise nul_error(self.path) from None
        if not stat.S_ISREG(st_path.st_mode):
            raise SourceError("the selected path is not a regular file", file=str(self.path),
                              code="target_unavailable", category="not_regular", rule="target_regular_file",
                              section="docs/inspect.md §Identity and reading")
        try:
            # non-blocking: a FIFO swapped in after the stat above must not block the open (fstat below)
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise os_error(exc, self.path, "open the selected path") from None
        try:
            st = os.fstat(self.fd)
        except OSError as exc:
            os.close(self.fd)
            raise os_error(exc, self.path, "fstat the open descriptor") from None
        if not stat.S_ISREG(st.st_mode):
            os.close(self.fd)
            raise SourceError("the opened path is not a regular file", file=str(self.path),
                              code="target_unavailable", category="not_regular", rule="target_regular_file")
        self.identity = FileIdentity.of(st)
        self.size = st.st_size

    def pread(self, length: int, offset: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``; a short read is a typed truncation error."""
        out = []
        got = 0
        while got < length:
            try:
                chunk = os.pread(self.fd, min(length - got, 1 << 30), offset + got)
            except OSError as exc:
                raise os_error(exc, self.path, f"read {length} bytes at offset {offset}") from None
            if not chunk:
                raise SourceFormatError(
                    f"file ended at byte {offset + got} while reading [{offset}, {offset + length})",
                    file=str(self.path), rule="short_read")
            out.append(chunk)
            got += len(chunk)
        return out[0] if len(out) == 1 else b"".join(out)

    def verify_unchanged(self) -> None:
        """Check the descriptor and the path still show the identity recorded at open (docs/inspect.md §Identity and reading)."""
        try:
            now_fd = FileIdentity.of(os.fstat(self.fd))
        except OSError as exc:
            raise os_error(exc, self.path, "fstat the open descriptor") from None
        try:
            now_path = FileIdentity.of(os.stat(self.path))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise SourceError("the selected path was removed or replaced while it was inspected",
                                  file=str(self.path), code="target_unavailable", category="target_changed",
                                  rule="identity_unchanged") from None
            raise os_error(exc, self.path, "stat the selected path") from None
        if now_fd != self.identity:
            raise SourceError(f"the open file was modified while it was inspected "
                              f"(was {self.identity}, now {now_fd})", file=str(self.path),
                              code="target_unavailable", category="target_changed", rule="identity_unchanged")
        if now_path != self.identity:
            raise SourceError(f"the selected path no longer names the opened file "
                              f"(opened {self.identity}, path now {now_path})", file=str(self.path),
                              code="target_unavailable", category="target_changed", rule="identity_unchanged")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OpenFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_bounded(path, limit: int, *, what: str, too_big: Callable[[int], Exception] | None = None) -> bytes:
    """The whole of a small file the tool reads (recipe, mapping, side JSON, token counts, view): opened as
    :class:`OpenFile` does — a regular file only, so a FIFO or device never blocks or streams — and its size
    checked against ``limit`` before a byte is read (docs/robustness.md §Promises). A file over the limit is
    ``too_big(size)`` when the caller names its own error, else a typed ``limit_exceeded``."""
    with OpenFile(path) as f:
        if f.size > limit:
            if too_big is not None:
                raise too_big(f.size)
            raise limit_error(f"{what} of {f.size} bytes exceeds the {limit}-byte limit", file=str(path),
                              rule="file_size")
        return f.pread(f.size, 0) if f.size else b""


def resolved(path) -> Path:
    """``Path(path).resolve()`` with the typed errors of an open: a symlink loop (a ``RuntimeError`` before
    Python 3.13) or a name too long is ``target_unavailable`` naming ``path`` (docs/robustness.md §Promises)."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise os_error(OSError(errno.ELOOP, os.strerror(errno.ELOOP)), path, "resolve the path") from None
    except OSError as exc:
        raise os_error(exc, path, "resolve the path") from None
    except ValueError:
        raise nul_error(path) from None


def checked_stat(path, *, follow: bool = True) -> os.stat_result | None:
    """``os.stat`` (``os.lstat`` with ``follow=False``) of ``path``, None when nothing is there; any other
    failure (a name too long, a symlink loop, no permission, a NUL byte) is the typed error of an open, not
    the ``OSError`` or silent False of ``Path.is_dir`` / ``os.path.lexists``."""
    try:
        return os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise os_error(exc, path, "stat the path") from None
    except ValueError:
        raise nul_error(path) from None


def is_directory(path) -> bool:
    """Whether ``path`` names a directory (:func:`checked_stat`)."""
    st = checked_stat(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def lexists(path) -> bool:
    """Whether anything, a dangling symlink included, has the name ``path`` (:func:`checked_stat`)."""
    return checked_stat(path, follow=False) is not None


def symlink_leaving(path, directory) -> Path | None:
    """Where ``path`` leads when it is a symlink that leaves ``directory`` (resolved) or dangles (then the
    unresolvable target), else None: an artifact's files move as one set (docs/format/container.md §2.1)."""
    path = Path(path)
    if not path.is_symlink():
        return None
    target = Path(os.path.realpath(path))
    root = Path(os.path.realpath(directory))
    if not target.exists() or (target.parent != root and root not in target.parents):
        return target
    return None


def refuse_parts_leaving(art, entry, *, command: str) -> None:
    """Refuse an artifact one of whose files is a symlink leaving its directory (or dangling): ``command``
    (repack, report) would read a file that is not the set's; ``validate`` reports the same as
    ``NINFER_SYMLINK_ESCAPE``."""
    entry = Path(entry)
    for f in art.files:
        loc = Path(f.location) if f.location is not None else entry
        target = symlink_leaving(loc, entry.parent)
        if target is not None:
            raise SourceError(f"{loc.name} is a symlink to {target}, outside the artifact's directory (or "
                              f"dangling): {command} reads only the artifact's own files", file=str(loc),
                              category="unusable", rule="part_symlink_outside",
                              section="docs/format/container.md §2.1")


class HeaderReader:
    """Sequential header reads that never pass the header's end; hashes and records what it reads.

    ``promise(offset)`` tells the reader the header certainly extends to ``offset`` (if the file is
    valid); reads are extended up to that bound (and :data:`READ_CHUNK`) to keep syscalls few.
    """

    def __init__(self, f: OpenFile, *, cap: int = HEADER_CAP, byte_order: str = "<") -> None:
        self.f = f
        self.cap = cap
        self.order = byte_order
        self.pos = 0
        self._buf = b""
        self._buf_start = 0
        self._floor = 0
        self.hasher = hashlib.sha256()
        self.bytes_read = 0

    # -- reading -------------------------------------------------------------------------------
    def promise(self, offset: int) -> None:
        if offset > self._floor:
            self._floor = offset

    @property
    def buf_end(self) -> int:
        return self._buf_start + len(self._buf)

    def _fill(self, end: int, what: str) -> None:
        if end > self.cap:
            raise SourceFormatError(f"header would extend past the {self.cap}-byte header cap at {what}",
                                    file=str(self.f.path), json_path=what, rule="header_cap", category="limit_exceeded",
                                    section="docs/inspect.md §Boundaries")
        if end > self.f.size:
            raise SourceFormatError(f"file truncated: {what} needs bytes up to {end}, file has {self.f.size}",
                                    file=str(self.f.path), json_path=what, rule="truncated")
        start = self.buf_end
        target = max(end, min(self._floor, start + READ_CHUNK, self.cap, self.f.size))
        chunk = self.f.pread(target - start, start)
        self.hasher.update(chunk)
        self.bytes_read += len(chunk)
        keep = self._buf[self.pos - self._buf_start:]
        self._buf = keep + chunk if keep else chunk
        self._buf_start = self.pos

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if end > self.buf_end:
            self._fill(end, what)
        i = self.pos - self._buf_start
        self.pos = end
        return self._buf[i:i + n]

    def unpack(self, fmt: str, what: str) -> tuple:
        s = struct.Struct(self.order + fmt)
        end = self.pos + s.size
        if end > self.buf_end:
            self._fill(end, what)
        out = s.unpack_from(self._buf, self.pos - self._buf_start)
        self.pos = end
        return out

    def u32(self, what: str) -> int:
        return self.unpack("I", what)[0]

    def u64(self, what: str) -> int:
        return self.unpack("Q", what)[0]

    def skip(self, n: int, what: str) -> None:
        """Advance ``n`` bytes (they are still read and hashed: they belong to the header)."""
        while n > 0:
            step = min(n, READ_CHUNK)
            self.take(step, what)
            n -= step

    def ranges_read(self) -> list[list[int]]:
        return [[0, self.bytes_read]] if self.bytes_read else []
