"""A bound transform chain, resolved once from shapes into index maps and value steps.

A source tensor of shape ``S`` is seen as a matrix of ``R`` rows × ``C`` columns: ``C = S[-1]`` and
``R = prod(S[:-1])`` for rank ≥ 2; a 1-D tensor is ``R = S[0]`` rows of one element. Running the
chain's ``rows`` transforms on the array of row numbers (shaped ``S[:-1]``) and its ``columns``
transforms on ``arange(C)`` tells, before any payload is read, which source row and column every output
element comes from. So the engine can

- read only the rows it needs, in row blocks (streaming, bounded memory);
- apply the same maps to raw GGML block bytes (rows whole; columns only when whole blocks move), which
  keeps an exact transcode exact;
- compute the expected float values (rows → columns → values in float64 → float32).

Value transforms commute with the order transforms (they are elementwise), so the YAML order of a chain
only matters among transforms of the same kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from converters.errors import TransformError
from converters.mapping import transforms as T


@dataclass(frozen=True)
class RowRun:
    """The row map of a chain whose output rows are one run of consecutive source rows (a picked expert of
    a bank, a row slice): two integers instead of one int64 per row. An MoE model binds ~10^5 experts;
    as index arrays (each a view keeping the whole bank's row map alive) their maps would grow with the
    model. Indexes and converts (``np.asarray``) like the index array it stands for."""

    start: int
    length: int
    ndim = 1
    dtype = np.dtype(np.int64)

    @property
    def shape(self) -> tuple[int]:
        return (self.length,)

    def __len__(self) -> int:
        return self.length

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.arange(self.start, self.start + self.length, dtype=dtype or np.int64)

    def __getitem__(self, key):
        if isinstance(key, slice):
            a, b, step = key.indices(self.length)
            if step == 1:
                return RowRun(self.start + a, max(0, b - a))
        return np.asarray(self)[key]


@dataclass(frozen=True)
class Chain:
    """Output ``shape``; ``rows[i]`` = source row of output row ``i`` (``None``: identity);
    ``columns[j]`` = source column of output column ``j`` (``None``: identity); ``values`` in order."""

    source_shape: tuple[int, ...]
    shape: tuple[int, ...]
    rows: np.ndarray | RowRun | None
    columns: np.ndarray | None
    values: tuple[T.Transform, ...]
    steps: tuple[str, ...]

    @property
    def source_rows(self) -> int:
        return _rows_of(self.source_shape)

    @property
    def source_columns(self) -> int:
        return self.source_shape[-1] if len(self.source_shape) >= 2 else 1

    @property
    def n_rows(self) -> int:
        return _rows_of(self.shape)

    @property
    def n_columns(self) -> int:
        return self.shape[-1] if len(self.shape) >= 2 else 1

    @property
    def reorders(self) -> bool:
        return self.rows is not None or self.columns is not None

    def row_ids(self, start: int, stop: int) -> np.ndarray | slice:
        """Source rows of output rows ``[start, stop)``: a slice when contiguous, else an index array."""
        if self.rows is None:
            return slice(start, stop)
        ids = self.rows[start:stop]
        if isinstance(ids, RowRun):
            return slice(ids.start, ids.start + ids.length)
        if len(ids) and ids[-1] - ids[0] == len(ids) - 1 and np.all(np.diff(ids) == 1):
            return slice(int(ids[0]), int(ids[-1]) + 1)
        return ids

    def apply(self, block: np.ndarray) -> np.ndarray:
        """Columns and value steps on a block of already selected source rows (2-D, float)."""
        if self.columns is not None:
            block = np.ascontiguousarray(block[:, self.columns])
        if self.values:
            x = np.asarray(block, dtype=np.float64)
            for v in self.values:
                x = v(x)
            block = x.astype(np.float32)
        return block

    def unapply(self, x: np.ndarray) -> np.ndarray:
        """Output rows ``x`` (``[rows, n_columns]``) each as the source stores it: value steps inverted in reverse
        order (float64), columns back in source order; the rows stay in the output's order (docs/acceptance.md
        §Golden: two questions)."""
        x = np.asarray(x).reshape(-1, self.n_columns)
        if self.values:
            y = np.asarray(x, dtype=np.float64)
            for v in reversed(self.values):
                y = v.inverse(y)
            x = y.astype(np.float32)
        if self.columns is not None:
            x = x[:, np.argsort(self.columns, kind="stable")]
        return x

    def row_sources(self) -> np.ndarray:
        """The source row of every output row, as an array."""
        return np.arange(self.n_rows) if self.rows is None else np.asarray(self.rows)

    def source_order(self, x: np.ndarray, *, whole: bool = True) -> np.ndarray:
        """The chain undone on the output ``x``: :meth:`unapply`, and for the ``whole`` output the rows sorted by
        the source row each came from (a selected part of a fused tensor keeps its rows; only a reordering
        inside the part is undone). A block of rows (not ``whole``) keeps its rows, and needs a chain that does
        not reorder them."""
        if not whole and self.rows is not None and not isinstance(self.rows, RowRun):
            raise ValueError(f"rows reordered by {self.steps}: undo them on the whole output")
        x = self.unapply(x)
        if whole and self.rows is not None and not isinstance(self.rows, RowRun):
            order = np.argsort(np.asarray(self.rows), kind="stable")
            if np.any(order != np.arange(len(order))):
                x = x[order]
        return x

    def describe(self) -> list[str]:
        return list(self.steps)


def _rows_of(shape: Sequence[int]) -> int:
    if len(shape) == 0:
        return 1
    if len(shape) == 1:
        return shape[0]
    n = 1
    for d in shape[:-1]:
        n *= d
    return n


def resolve_chain(source_shape: Sequence[int], steps: Sequence[tuple[str, dict[str, int]]]) -> Chain:
    """Resolve ``steps`` (transform name, evaluated integer arguments) against ``source_shape``."""
    source_shape = tuple(int(d) for d in source_shape)
    rank = len(source_shape)
    if rank == 0:
        raise TransformError("scalar source tensors are not supported by transform chains")
    leading = source_shape[:-1] if rank >= 2 else source_shape
    rowmap = np.arange(_rows_of(source_shape), dtype=np.int64).reshape(leading)
    colmap = np.arange(source_shape[-1] if rank >= 2 else 1, dtype=np.int64)
    values: list[T.Transform] = []
    described = []
    for name, args in steps:
        t = T.get(name)
        described.append(f"{name}({', '.join(f'{k}={v}' for k, v in args.items())})")
        if t.kind == "rows":
            rowmap = t(rowmap, **args)
        elif t.kind == "columns":
            if rank < 2:
                raise TransformError(f"{name} permutes columns, but the tensor is 1-D {source_shape}")
            colmap = t(colmap, **args)
        else:
            values.append(t)
    if rowmap.ndim == 0:
        raise TransformError(f"the row transforms of {source_shape} leave no rows")
    shape = tuple(rowmap.shape) + ((len(colmap),) if rank >= 2 else ())
    flat = rowmap.reshape(-1)
    rows = None if (len(flat) == _rows_of(source_shape) and np.array_equal(flat, np.arange(len(flat)))) else flat
    if rows is not None and len(flat) and flat[-1] - flat[0] == len(flat) - 1 and np.all(np.diff(flat) == 1):
        rows = RowRun(int(flat[0]), len(flat))
    elif rows is not None:
        rows = flat.copy()  # not a view that keeps the whole source's row map alive
    cols = None if np.array_equal(colmap, np.arange(len(colmap))) and len(colmap) == (
        source_shape[-1] if rank >= 2 else 1) else colmap
    return Chain(source_shape, shape, rows, cols, tuple(values), tuple(described))
