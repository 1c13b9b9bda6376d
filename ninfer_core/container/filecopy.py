"""Unchanged bytes copied file to file in the kernel (docs/io-speed.md §Unchanged bytes).

An object stored exactly as a source file holds it (a GGUF tensor kept in its GGML blocks, a BF16 or F32
tensor kept as it is) need not pass through Python buffers: a writer given a :class:`FileRange` as one of
an object's chunks copies those bytes with ``os.copy_file_range`` (in the kernel, no user-space copy),
falling back to ``os.sendfile`` where the kernel or file system refuses it (across file systems on old
kernels, some network and overlay file systems), and to ``pread``/``pwrite`` last. The bytes written are
the same whichever path runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ninfer_core.errors import WriterError

#: bytes per ``copy_file_range`` / ``sendfile`` call
COPY_STEP = 1 << 30
#: the most bytes one ``pwrite`` writes: on the benchmark VM, buffered writes of 2 MiB or more into a new file
#: ran 4-10x slower than the same bytes written 1 MiB at a time (docs/io-speed.md §Write size)
WRITE_BYTES = 1 << 20
#: bytes per read of the ``pread``/``pwrite`` fallback and of :meth:`FileRange.chunks`: one write's worth
FALLBACK_BUFFER = WRITE_BYTES
#: errors that mean "this copy method is not available here", not "the copy failed"
_UNSUPPORTED = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EBADF,
                errno.EPERM, errno.ETXTBSY}


@dataclass(frozen=True)
class FileRange:
    """``length`` bytes at ``offset`` of the file ``path``, given to a writer as one chunk of an object."""

    path: str | os.PathLike
    offset: int
    length: int

    def __post_init__(self) -> None:
        if self.offset < 0 or self.length < 0:
            raise WriterError(f"file range [{self.offset}, +{self.length}) of {self.path} is negative",
                              file=str(self.path), section="§11.4", rule="object_data")

    @property
    def nbytes(self) -> int:
        return self.length

    def __len__(self) -> int:
        return self.length

    def read(self, start: int, length: int) -> bytes:
        """``length`` bytes of the range from its byte ``start``."""
        fd = _open_source(self.path)
        try:
            return self._pread(fd, start, length)
        finally:
            os.close(fd)

    def chunks(self, size: int = FALLBACK_BUFFER) -> Iterator[bytes]:
        """The range's bytes read in pieces of at most ``size`` (for consumers that need the bytes: a
        content digest, a staged writer)."""
        fd = _open_source(self.path)
        try:
            for off in range(0, self.length, size):
                yield self._pread(fd, off, min(size, self.length - off))
        finally:
            os.close(fd)

    def _pread(self, fd: int, start: int, length: int) -> bytes:
        """``length`` bytes from the range's byte ``start``, read from the source open as ``fd``; a source
        that ends first is a :class:`WriterError` (rule ``object_length``)."""
        data = os.pread(fd, length, self.offset + start)
        if len(data) != length:
            raise _short(self, start + len(data))
        return data


def _open_source(path: str | os.PathLike) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise WriterError(f"cannot open {path} to copy from it: {exc.strerror}", file=str(path), section="§11.4",
                          rule="io_error") from None


def _read_ahead(fd: int, offset: int, length: int) -> None:
    """Tell the kernel the range is read once, in order (``POSIX_FADV_SEQUENTIAL``: a larger read-ahead
    window from the first page). Each copy opens its source anew, and a new descriptor starts with the
    smallest window, so without it every tensor of a cold source is read in small requests at first:
    docs/io-speed.md §Unchanged bytes has the measurement. A refusal changes nothing but speed."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        with contextlib.suppress(OSError):
            advise(fd, offset, length, os.POSIX_FADV_SEQUENTIAL)


def _short(rng: FileRange, got: int) -> WriterError:
    return WriterError(f"{rng.path} ended after {got} of the {rng.length} bytes at offset {rng.offset} (the file "
                       "changed while it was copied)", file=str(rng.path), section="§11.4", rule="object_length")


class RangeCopier:
    """Copies :class:`FileRange` pieces into positions of one destination file; remembers, per process,
    which method the kernel accepted, so a refused method is tried once, not once per copy."""

    methods: tuple[str, ...] = ("copy_file_range", "sendfile", "pwrite")
    _refused: set[str] = set()

    @classmethod
    def copy(cls, rng: FileRange, start: int, length: int, dst_fd: int, dst_offset: int, dst_path: Path) -> str:
        """Copy ``length`` bytes from ``rng.offset + start`` to ``dst_offset`` of ``dst_fd``; returns the method
        that did it."""
        src_fd = _open_source(rng.path)
        _read_ahead(src_fd, rng.offset + start, length)
        try:
            for method in cls.methods:
                if method in cls._refused:
                    continue
                try:
                    done = getattr(cls, f"_{method}")(src_fd, rng.offset + start, dst_fd, dst_offset, length,
                                                      dst_path)
                except OSError as exc:
                    if exc.errno in _UNSUPPORTED and method != "pwrite":
                        cls._refused.add(method)
                        continue
                    raise WriterError(f"copy of {length} bytes from {rng.path} into {dst_path.name} failed: "
                                      f"{exc.strerror}", file=str(dst_path), section="§11.4",
                                      rule="io_error") from None
                if done == -1:  # refused before writing anything
                    cls._refused.add(method)
                    continue
                if done != length:
                    raise _short(rng, start + done)
                return method
        finally:
            os.close(src_fd)
        raise WriterError("no copy method is available", file=str(dst_path), section="§11.4", rule="io_error")

    @staticmethod
    def _copy_file_range(src_fd: int, src_off: int, dst_fd: int, dst_off: int, n: int, dst_path: Path) -> int:
        if not hasattr(os, "copy_file_range"):
            return -1
        done = 0
        while done < n:
            got = os.copy_file_range(src_fd, dst_fd, min(COPY_STEP, n - done), src_off + done, dst_off + done)
            if got == 0:
                break
            done += got
        return done

    @staticmethod
    def _sendfile(src_fd: int, src_off: int, dst_fd: int, dst_off: int, n: int, dst_path: Path) -> int:
        if not hasattr(os, "sendfile"):
            return -1
        # sendfile writes at the output's file position; a private descriptor keeps that position off the
        # one every writer thread shares
        out = os.open(dst_path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.lseek(out, dst_off, os.SEEK_SET)
            done = 0
            while done < n:
                got = os.sendfile(out, src_fd, src_off + done, min(COPY_STEP, n - done))
                if got == 0:
                    break
                done += got
            return done
        finally:
            os.close(out)

    @staticmethod
    def _pwrite(src_fd: int, src_off: int, dst_fd: int, dst_off: int, n: int, dst_path: Path) -> int:
        buf = memoryview(bytearray(min(FALLBACK_BUFFER, n)))
        done = 0
        while done < n:
            got = os.preadv(src_fd, [buf[:min(len(buf), n - done)]], src_off + done)
            if got == 0:
                break
            put = 0
            while put < got:
                put += os.pwrite(dst_fd, buf[put:got], dst_off + done + put)
            done += got
        return done
