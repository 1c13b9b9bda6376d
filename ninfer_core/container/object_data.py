"""What a writer accepts as an object's bytes, and how it is cut into byte chunks (container §11.4).

``data`` is a bytes-like object or numpy array, an iterable of such chunks (so a large object streams in
bounded memory), or a callable returning either (so encoding can run in the calling worker thread). The
in-process writer also takes :class:`~ninfer_core.container.filecopy.FileRange` chunks: bytes copied
unchanged from a source file in the kernel. The
in-process writer (:mod:`ninfer_core.container.writer`) and the staged one
(:mod:`ninfer_core.container.staging`) both read it through :func:`object_chunks` and :func:`byte_view`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ninfer_core.container.filecopy import FileRange
from ninfer_core.errors import WriterError

ObjectData = Any  # bytes-like | np.ndarray | Iterable[bytes-like] | Callable[[], bytes-like | Iterable]


@dataclass(frozen=True)
class Placed:
    """A chunk written at byte ``offset`` of its object instead of after the previous chunk (the in-process
    writer only): the planes of an expert bank written as each row block is made. Every byte of the object
    must still be written exactly once (docs/io-speed.md §Write path)."""

    offset: int
    data: Any


def object_chunks(data: ObjectData, object_id: str) -> Iterable:
    """The chunks of ``data`` (calling it first when it is a callable); a str or an object that is neither
    bytes-like nor iterable is refused (rule ``object_data``)."""
    if callable(data):
        data = data()
    if isinstance(data, np.ndarray | bytes | bytearray | memoryview | FileRange):
        return (data,)
    if isinstance(data, str):
        raise WriterError(f"object {object_id!r}: data must be bytes, not str", section="§11.4", rule="object_data")
    try:
        memoryview(data)
    except TypeError:
        pass
    else:
        return (data,)
    try:
        return iter(data)
    except TypeError:
        raise WriterError(f"object {object_id!r}: data of type {type(data).__name__} is neither bytes-like nor an "
                          f"iterable of chunks", section="§11.4", rule="object_data") from None


def byte_view(chunk: Any, object_id: str) -> memoryview:
    """A flat, contiguous byte view of one chunk (a copy only when the chunk is not contiguous)."""
    if isinstance(chunk, np.ndarray):
        return memoryview(np.ascontiguousarray(chunk).reshape(-1).view(np.uint8))
    try:
        view = memoryview(chunk)
    except TypeError:
        raise WriterError(f"object {object_id!r}: chunk of type {type(chunk).__name__} is not bytes-like",
                          section="§11.4", rule="object_data") from None
    if not view.c_contiguous:
        view = memoryview(view.tobytes())
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
