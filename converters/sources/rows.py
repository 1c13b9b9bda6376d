"""Row blocks of a source tensor: its raw element-block bytes or its float32 values, mapped per block.

A tensor is read as ``R`` rows of ``C`` elements (``converters/mapping/chain.py``: rank ≥ 2 → ``C`` is the last axis; 1-D →
rows of one element). A row of a GGML block type is ``C / B`` whole blocks of ``T`` bytes, so selecting
or reordering rows never splits a block; that is what lets Q8_0 rows be moved and then transcoded
exactly (storage-layouts §6).

Each read maps only the file range it needs (``np.memmap`` of the block's byte span) and the map goes
away with the array; a caller that reuses a buffer has the span read into it with ``pread`` instead
(``raw(into=…)``, docs/io-speed.md §Source reads). :meth:`converters.sources.Source.raw` keeps one map of
the whole file open, so every page a conversion touches would stay resident and count against the process
for the whole run; mapping per block keeps memory flat in model size. Offsets and lengths come
from the strict parsers' :class:`~converters.sources.SourceTensor`, already checked against the file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from converters.errors import SourceError
from converters.sources.decode import decode_tensor
from ninfer_core import codecs

# safetensors dtype → bytes per element
ST_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
            "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}
# safetensors float dtypes whose bytes are a v3 contiguous format as they are (storage-layouts §6 last row)
ST_EXACT = {"BF16": "bf16", "F32": "fp32"}


@dataclass(frozen=True)
class Storage:
    """How a source tensor's rows are stored: ``ggml_type`` (GGML name, ``None`` for safetensors),
    ``block`` elements in ``block_bytes`` bytes, ``rows`` × ``cols`` elements, ``row_bytes`` per row
    (``None`` when a row is not whole blocks)."""

    ggml_type: str | None
    dtype: str
    block: int
    block_bytes: int
    rows: int
    cols: int
    row_bytes: int | None

    @property
    def plain(self) -> bool:
        return self.block == 1


def storage_of(t) -> Storage:
    """The :class:`Storage` of a :class:`~converters.sources.SourceTensor`."""
    shape = t.shape
    cols = shape[-1] if len(shape) >= 2 else 1
    rows = t.elements // cols if cols else 0
    if t.basis == "prequantized":  # a virtual tensor: rows are dequantized, not mapped (docs/prequantized.md)
        return Storage(None, t.dtype, t.block[0] if t.block else 1, 0, rows, cols, None)
    if t.read_length is None:
        raise SourceError(f"{t.name}: the byte length of {t.dtype} is not known; it cannot be read",
                          file=str(t.file), json_path=t.name, rule="storage_length_known")
    if t.type_id is None:
        size = ST_SIZES.get(t.dtype)
        if size is None:
            raise SourceError(f"{t.name}: safetensors dtype {t.dtype} is not supported", file=str(t.file),
                              json_path=t.name, rule="dtype_supported")
        return Storage(None, t.dtype, 1, size, rows, cols, cols * size)
    g = codecs.resolve_ggml_type(t.read_type or t.type_id, t.elements, t.read_length, tensor=t.name)
    whole = cols % g.block_size == 0
    return Storage(g.name, t.dtype, g.block_size, g.type_size, rows, cols,
                   cols // g.block_size * g.type_size if whole else None)


class TensorRows:
    """Row access to one tensor of one source (a prequantized virtual tensor's rows are its library's
    dequantization, docs/prequantized.md §Source-layer contract)."""

    def __init__(self, source, name: str) -> None:
        self.source = source
        self.tensor = source.tensor(name)
        self.quantized = source.quantized(name) if hasattr(source, "quantized") else None
        self.storage = storage_of(self.tensor)
        header = getattr(source, "header", None)
        self.big_endian = getattr(header, "byte_order", "little") == "big"

    def _map(self, first: int, count: int) -> np.ndarray:
        try:
            return self._map_rows(first, count)
        except (OSError, ValueError) as exc:  # the file changed (shrank) since its header was checked
            t = self.tensor
            raise SourceError(f"{t.name}: cannot map rows [{first}, {first + count}): {exc}", file=str(t.file),
                              json_path=t.name, code="execution_failure", category="io_error",
                              rule="read_tensor") from None

    def _map_rows(self, first: int, count: int) -> np.ndarray:
        t, s = self.tensor, self.storage
        if s.row_bytes is None:
            if first != 0 or count != s.rows:
                raise SourceError(f"{t.name}: rows of {s.cols} elements are not whole {s.ggml_type} blocks; "
                                  "only the whole tensor can be read", file=str(t.file), json_path=t.name,
                                  rule="whole_block_rows")
            return np.memmap(t.file, dtype=np.uint8, mode="r", offset=t.file_offset, shape=(t.read_length,))
        if count == 0:
            return np.zeros((0, s.row_bytes), dtype=np.uint8)
        mm = np.memmap(t.file, dtype=np.uint8, mode="r", offset=t.file_offset + first * s.row_bytes,
                       shape=(count * s.row_bytes,))
        return mm.reshape(count, s.row_bytes)

    def raw(self, ids: slice | np.ndarray, *, into: Callable[[int], np.ndarray] | None = None) -> np.ndarray:
        """Raw bytes of the selected rows, ``[n, row_bytes]`` (a mapped view for a slice, else a copy).

        ``into(nbytes)``: a uint8 buffer the caller reuses, of at least ``nbytes`` (the byte span of the rows,
        ``min(ids)`` to ``max(ids)``): the span is read into it with ``pread`` instead of being mapped, and a
        slice's rows are a view of it (docs/io-speed.md §Source reads)."""
        if self.quantized is not None:
            return self.source.raw(self.tensor.name)  # raises: a prequantized weight has no row bytes
        span = self._map if into is None else lambda first, count: self._read(first, count, into)
        if isinstance(ids, slice):
            start, stop, _ = ids.indices(self.storage.rows)
            return span(start, stop - start)
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return self._map(0, 0)
        lo, hi = int(ids.min()), int(ids.max()) + 1
        return np.ascontiguousarray(span(lo, hi - lo)[ids - lo])

    def _read(self, first: int, count: int, into: Callable[[int], np.ndarray]) -> np.ndarray:
        """Rows ``[first, first + count)`` read with ``pread`` into the buffer ``into`` gives:
        ``[count, row_bytes]``."""
        t, s = self.tensor, self.storage
        if s.row_bytes is None or count == 0:
            return self._map(first, count)
        n = count * s.row_bytes
        buf = into(n)
        if buf.size < n:
            raise ValueError(f"{t.name}: a buffer of {buf.size} bytes cannot hold {n}")
        return read_tensor_bytes(t, first * s.row_bytes, buf[:n]).reshape(count, s.row_bytes)

    def floats(self, ids: slice | np.ndarray) -> np.ndarray:
        """float32 values of the selected rows, ``[n, cols]``."""
        if self.quantized is not None:
            return self._dequantized(ids)
        raw = self.raw(ids) if self.storage.row_bytes is not None else self._map(0, self.storage.rows)
        n = raw.shape[0] if raw.ndim == 2 else self.storage.rows
        shaped = dataclasses.replace(self.tensor, shape=(n, self.storage.cols))
        out = decode_tensor(shaped, np.ascontiguousarray(raw).reshape(-1), big_endian=self.big_endian)
        if raw.ndim != 2 and not isinstance(ids, slice):
            out = out[np.asarray(ids, dtype=np.int64)]
        elif raw.ndim != 2:
            out = out[ids]
        return out


    def _dequantized(self, ids: slice | np.ndarray) -> np.ndarray:
        """The library's values of the selected rows, reading only rows ``min(ids)..max(ids)``."""
        qw = self.quantized
        if isinstance(ids, slice):
            start, stop, step = ids.indices(self.storage.rows)
            return qw.dequantize(start, max(start, stop))[::step] if step > 0 else qw.dequantize(0, 0)
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return qw.dequantize(0, 0)
        lo, hi = int(ids.min()), int(ids.max()) + 1
        return qw.dequantize(lo, hi)[ids - lo]


def read_tensor_bytes(t, at: int, out: np.ndarray) -> np.ndarray:
    """``out.size`` bytes of source tensor ``t`` from byte ``at`` of its data, read into the uint8 buffer ``out``
    with ``pread`` (docs/io-speed.md §Source reads), and ``out`` returned. A file that cannot be opened or read,
    or that ends early (it changed since its header was checked), is a :class:`SourceError` naming the file
    and the tensor (rule ``read_tensor``)."""
    n, done, start = out.size, 0, t.file_offset + at
    where = dict(file=str(t.file), json_path=t.name, code="execution_failure", category="io_error", rule="read_tensor")
    try:
        fd = os.open(t.file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            while done < n:
                got = os.preadv(fd, [out[done:]], start + done)
                if got == 0:
                    raise SourceError(f"{t.name}: the file ended at byte {start + done} while reading {n} bytes at "
                                      f"offset {start}", **where)
                done += got
        finally:
            os.close(fd)
    except OSError as exc:
        raise SourceError(f"{t.name}: cannot read {n} bytes at offset {start}: {exc.strerror or exc}", **where) from None
    return out


class StackedRows:
    """Row access to tensors of one shape and type stacked along a new leading axis (a mapping's
    ``stack:`` source, e.g. the two time halves of an mmproj Conv3d): row ``r`` is row ``r % R`` of
    member ``r // R`` (``R`` rows per member). Same interface as :class:`TensorRows`."""

    def __init__(self, members: list[TensorRows]) -> None:
        self.members = members
        first = members[0].storage
        self.per_member = first.rows
        self.storage = dataclasses.replace(first, rows=first.rows * len(members))
        self.tensor = members[0].tensor

    def _split(self, ids: slice | np.ndarray) -> np.ndarray:
        if isinstance(ids, slice):
            start, stop, _ = ids.indices(self.storage.rows)
            return np.arange(start, stop, dtype=np.int64)
        return np.asarray(ids, dtype=np.int64)

    def _gather(self, ids: slice | np.ndarray, read) -> np.ndarray:
        rows = self._split(ids)
        member, local = np.divmod(rows, self.per_member)
        parts = {int(k): read(self.members[int(k)], local[member == k]) for k in np.unique(member)}
        width = next(iter(parts.values())).shape[1] if parts else (self.storage.row_bytes or 0)
        dtype = next(iter(parts.values())).dtype if parts else np.uint8
        out = np.empty((len(rows), width), dtype=dtype)
        for k, block in parts.items():
            out[member == k] = block
        return out

    def raw(self, ids: slice | np.ndarray) -> np.ndarray:
        """Raw bytes of the selected rows, ``[n, row_bytes]`` (a copy)."""
        return self._gather(ids, lambda m, local: m.raw(local))

    def floats(self, ids: slice | np.ndarray) -> np.ndarray:
        """float32 values of the selected rows, ``[n, cols]``."""
        return self._gather(ids, lambda m, local: m.floats(local))


class TransposedRows:
    """Row access to a rank-3 tensor ``[E, N, K]`` read as ``[E, K, N]``, each entry's matrix transposed (a
    mapping's ``transpose: true`` source: Qwen3-VL-MoE's fused experts, docs/qwen3-vl.md §Fused transposed experts):
    row ``e·K + j`` is column ``j`` of source rows ``[e·N, (e+1)·N)``. Element-addressed (plain) storage
    only; an entry is transposed once and kept while its row blocks are read (one entry of memory). Same
    interface as :class:`TensorRows`."""

    def __init__(self, inner: TensorRows) -> None:
        t, s = inner.tensor, inner.storage
        if not s.plain or s.row_bytes is None or len(t.shape) != 3:
            raise SourceError(f"{t.name}: only a rank-3 tensor of plain elements can be read transposed "
                              f"(shape {list(t.shape)}, {s.ggml_type or s.dtype})", file=str(t.file),
                              json_path=t.name, rule="transpose_supported")
        self.inner, self.tensor = inner, t
        self.entries, self.n, self.k = (int(d) for d in t.shape)
        self.storage = dataclasses.replace(s, rows=self.entries * self.k, cols=self.n,
                                           row_bytes=self.n * s.block_bytes)
        self._last: tuple[int, str, np.ndarray] | None = None

    def _entry(self, e: int, read: str) -> np.ndarray:
        """Entry ``e`` transposed, ``[K, N]`` (values, or raw elements as unsigned integers of their size); the
        last one is kept for the row blocks that follow (one entry of memory)."""
        last = self._last  # one snapshot: another thread may replace it meanwhile
        if last is None or last[:2] != (e, read):
            block = np.asarray(getattr(self.inner, read)(slice(e * self.n, (e + 1) * self.n)))  # [N, K(·bytes)]
            if read == "raw":  # whole elements move: view each as one unsigned integer of its size
                block = np.ascontiguousarray(block).view(f"<u{self.storage.block_bytes}")
            last = (e, read, np.ascontiguousarray(block.T))
            self._last = last
        return last[2]

    def _gather(self, ids: slice | np.ndarray, read: str) -> np.ndarray:
        rows = (np.arange(*ids.indices(self.storage.rows), dtype=np.int64) if isinstance(ids, slice)
                else np.asarray(ids, dtype=np.int64))
        entry, col = np.divmod(rows, self.k)
        parts = [(entry == e, self._entry(int(e), read)[col[entry == e]]) for e in np.unique(entry)]
        parts = [(where, block.view(np.uint8) if read == "raw" else block) for where, block in parts]
        width = parts[0][1].shape[1] if parts else self.storage.row_bytes
        out = np.empty((len(rows), width), dtype=parts[0][1].dtype if parts else np.uint8)
        for where, block in parts:
            out[where] = block
        return out

    def raw(self, ids: slice | np.ndarray) -> np.ndarray:
        """Raw bytes of the selected rows, ``[n, row_bytes]`` (a copy)."""
        return self._gather(ids, "raw")

    def floats(self, ids: slice | np.ndarray) -> np.ndarray:
        """float32 values of the selected rows, ``[n, cols]``."""
        return self._gather(ids, "floats")


def open_rows(sources, bound) -> TensorRows | StackedRows | TransposedRows:
    """Row access to a :class:`~converters.mapping.BoundSource`: its tensor (transposed when the mapping says
    so), or its stacked tensors."""
    source = sources[bound.input]
    if getattr(bound, "stack", ()):
        return StackedRows([TensorRows(source, name) for name in bound.stack])
    if getattr(bound, "transposed", False):
        return TransposedRows(TensorRows(source, bound.tensor))
    return TensorRows(source, bound.tensor)
