"""``--hash full``: stream the bytes after a verified header into SHA-256 with a bounded buffer.

docs/inspect.md §Identity and reading: the full mode feeds the remaining file bytes to SHA-256 without interpreting
tensor data; the header digest is kept as well (the full hash continues from the header's SHA-256
state, so no byte is read twice). Memory is two fixed buffers; a reader thread fills one while the
caller hashes the other (``hashlib`` releases the GIL on large updates), so reading and hashing overlap
like a pipe into ``sha256sum``.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

from converters.sources.fileio import OpenFile, os_error

BUFFER_BYTES = 8 * 1024 * 1024


def _fill(f: OpenFile, buf: bytearray, offset: int, length: int) -> int:
    view = memoryview(buf)[:length]
    got = 0
    while got < length:
        try:
            n = os.preadv(f.fd, [view[got:]], offset + got)
        except OSError as exc:
            raise os_error(exc, f.path, f"read {length - got} bytes at offset {offset + got}") from None
        if n == 0:
            from converters.errors import SourceFormatError

            raise SourceFormatError(f"file ended at byte {offset + got} while hashing (expected {f.size} bytes)",
                                    file=str(f.path), rule="short_read")
        got += n
    return got


def stream_sha256(f: OpenFile, hasher, start: int, *, buffer_bytes: int = BUFFER_BYTES,
                  progress: Callable[[int], None] | None = None) -> int:
    """Update ``hasher`` with bytes ``[start, f.size)`` of ``f``; returns the number of bytes hashed.

    Raises typed errors (``execution_failure`` for I/O, ``short_read`` if the file shrank); a
    ``KeyboardInterrupt`` propagates after the reader thread stops.
    """
    end = f.size
    if start >= end:
        return 0
    bufs = [bytearray(buffer_bytes), bytearray(buffer_bytes)]
    free: queue.Queue = queue.Queue()
    full: queue.Queue = queue.Queue()
    for i in range(2):
        free.put(i)
    stop = threading.Event()

    def reader() -> None:
        pos = start
        try:
            while pos < end and not stop.is_set():
                i = free.get()
                if i is None:
                    return
                n = _fill(f, bufs[i], pos, min(buffer_bytes, end - pos))
                full.put((i, n, None))
                pos += n
        except BaseException as exc:  # handed to the consumer, which re-raises it typed
            full.put((None, 0, exc))

    t = threading.Thread(target=reader, name="inspect-hash-reader", daemon=True)
    t.start()
    done = 0
    try:
        while done < end - start:
            i, n, exc = full.get()
            if exc is not None:
                raise exc
            hasher.update(memoryview(bufs[i])[:n])
            done += n
            free.put(i)
            if progress is not None:
                progress(n)
    finally:
        stop.set()
        free.put(None)
        t.join()
    return done
