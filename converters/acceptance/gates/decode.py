"""Row blocks of a logical parameter, from the artifact and from the source, in bounded memory.

Both sides give float32 ``[rows, K]`` blocks of a parameter seen as a matrix (rank ≥ 2: ``K`` is the last
axis; 1-D: rows of one element), so gates can compare a 30 GB model block by block.

- :class:`ArtifactRows` decodes from the artifact alone, independently of the converter: a binding's
  element ranges (whole object or ordered parts, container §7.1) → the object rows that hold them
  (``codecs.decode(rows=...)``, container §7.3) → the use's auxiliaries undone: ``input_columns`` (the stored
  column ``j`` is logical column ``cols[j]``, §8) and ``hadamard_signs`` (the stored matrix is ``W·D·H``,
  storage-layouts §7; :func:`hadamard_unrotate`). ``engine.logical_array`` does the same for whole arrays;
  verify does not reuse it (nor ``transforms.hadamard_unrotate``) so that the converter's own undo logic is not
  what checks the converter.
- :class:`SourceRows` computes the source's values after the mapped transforms for a row range — the row
  block form of ``engine.parameter_values`` (same chain: source rows selected, columns reordered, value
  steps in float64; a tensor the source stores Hadamard-rotated (``prism.hadamard.*``, Ternary Bonsai)
  un-rotated with :func:`converters.sources.hadamard.logical_values`, the expected-value oracle's own un-rotation;
  rounded once to float32). The source side deliberately shares that oracle: it states what the logical
  parameters of a rotated source are (the HF values), and the rotation is row-wise, so a row block
  un-rotates exactly like the whole matrix. Only the artifact side keeps an independent transform.
  Ternary/binary types that gguf-py cannot decode (PrismML PQ2_0, PTQ1_0, Q2_0, and Q1_0:
  :data:`OWN_DECODED`) are read here as code × ``d`` from their blocks
  (:func:`converters.sources.ternary.source_codes`): the source reader decodes them with ``ninfer_core.codecs``,
  the PrismML types by transcoding into t2/q2 — the very path that wrote the artifact, which would make
  gate 4 compare the transcoder with itself.

Also :class:`LazyParameters`, the mapping the golden forward reads: each parameter materialised when asked
for (one layer's worth at a time), and the embedding/head as :class:`RowView` so only the token rows and
one head block are ever decoded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np

from converters.sources import ternary
from converters.sources.hadamard import logical_values
from converters.sources.rows import TensorRows, open_rows
from ninfer_core import codecs

#: float32 elements per row block (64 MiB)
BLOCK_ELEMENTS = 16 * 1024 * 1024
HADAMARD_BLOCK = 1024  # storage-layouts §7
#: source types whose values the gates read from the blocks themselves (see the module docstring)
OWN_DECODED = frozenset(t for t in ternary.TYPES if t not in ("TQ1_0", "TQ2_0"))


def matrix_shape(shape) -> tuple[int, int]:
    """``(rows, K)`` of a logical shape (rank ≥ 2: ``K`` = last axis; 1-D: ``K`` = 1; scalar: 1 × 1)."""
    shape = tuple(shape)
    if len(shape) >= 2:
        return math.prod(shape[:-1]), shape[-1]
    return (shape[0] if shape else 1), 1


def row_blocks(n_rows: int, k: int, elements: int = BLOCK_ELEMENTS) -> Iterator[tuple[int, int]]:
    step = max(1, elements // max(1, k))
    for a in range(0, n_rows, step):
        yield a, min(n_rows, a + step)


def hadamard_unrotate(stored: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``W = W' · H · D`` per 1024-column block (storage-layouts §7: ``W' = W · D · H``, ``H = H^T = H^-1``):
    ``x · H`` as a fast Walsh–Hadamard transform (10 butterfly stages of ``[a + b, a - b]``, the Sylvester
    order) in float64, O(K log K) per row, compiled (:mod:`.hadamard_kernel`)."""
    from converters.acceptance.gates.hadamard_kernel import unrotate

    rows, k = stored.shape
    if k % HADAMARD_BLOCK or signs.shape != (k,):
        raise ValueError(f"Hadamard unrotation of {k} columns with {signs.shape[0]} signs (blocks of {HADAMARD_BLOCK})")
    out = np.empty((rows, k), dtype=np.float32)
    unrotate(np.ascontiguousarray(stored), np.asarray(signs, dtype=np.float64), out)
    return out


class ArtifactRows:
    """Decoded logical rows of one binding of an open artifact (see the module docstring)."""

    def __init__(self, art, name: str, shape) -> None:
        self.art, self.name, self.shape = art, name, tuple(shape)
        self.n_rows, self.k = matrix_shape(self.shape)
        b = art.bindings[name]
        if b.object is not None:
            obj = art.object(b.object)
            self.segments = [(obj, 0, obj.elements)]
        else:
            self.segments = [(art.object(p.object), p.begin, p.end) for p in b.parts or ()]
        self.objects = tuple(dict.fromkeys(o.id for o, _, _ in self.segments))
        self.columns = self.signs = None
        for use in art.uses:
            if use.parameter != name:
                continue
            aux = use.auxiliaries
            if "input_columns" in aux:
                self.columns = art.binding_array(aux["input_columns"]).astype(np.int64)
            if "hadamard_signs" in aux:
                self.signs = art.binding_array(aux["hadamard_signs"]).astype(np.float32)
            break

    def _elements(self, e0: int, e1: int) -> np.ndarray:
        """Logical elements ``[e0, e1)`` of the binding (before auxiliaries), float32, flat."""
        out, pos = [], 0
        for obj, begin, end in self.segments:
            n = end - begin
            lo, hi = max(e0, pos), min(e1, pos + n)
            if lo < hi:
                out.append(self._object_elements(obj, begin + lo - pos, begin + hi - pos))
            pos += n
        return np.concatenate(out) if len(out) != 1 else out[0]

    def _object_elements(self, obj, e0: int, e1: int) -> np.ndarray:
        width = math.prod(obj.shape[1:]) if len(obj.shape) > 1 else 1
        r0, r1 = e0 // width, -(-e1 // width)
        data = self.art.object_bytes(obj.id)
        try:
            if len(obj.shape) >= 2:
                rows = codecs.decode(obj.format, obj.layout, obj.shape, data, divisors=obj.divisors, rows=(r0, r1))
            else:
                rows = codecs.decode(obj.format, obj.layout, obj.shape, data, divisors=obj.divisors)[r0:r1]
        finally:
            data.release()
        return np.asarray(rows, dtype=np.float32).reshape(-1)[e0 - r0 * width : e1 - r0 * width]

    def rows(self, a: int, b: int) -> np.ndarray:
        """Logical rows ``[a, b)`` as float32 ``[b - a, K]``."""
        x = self._elements(a * self.k, b * self.k).reshape(b - a, self.k)
        if self.columns is not None:
            restored = np.empty_like(x)
            restored[:, self.columns] = x
            x = restored
        if self.signs is not None:
            x = hadamard_unrotate(x, self.signs)
        return x

    def array(self) -> np.ndarray:
        return self.rows(0, self.n_rows).reshape(self.shape)


class SourceRows:
    """The source's values of one bound parameter after its transform chain, by row block; with ``ids``, the
    parameter's rows at those indices in that order (an indexed proposal head: the text head's rows at
    ``proposal/token_ids``, container §9.2)."""

    def __init__(self, sources: Mapping, p, bound, ids: np.ndarray | None = None) -> None:
        source = p.source if p.source is not None else bound.source_of(p.tied_to)  # tied: the target's values
        self.chain = source.chain
        self.file = sources[source.input]
        self.tensor = open_rows(sources, source)
        self.n_rows, self.k = self.chain.n_rows, self.chain.n_columns
        self.source = source.tensor
        self.ids = None
        if ids is not None:
            ids = np.asarray(ids, dtype=np.int64).reshape(-1)
            if ids.size and not (0 <= int(ids.min()) and int(ids.max()) < self.n_rows):
                raise ValueError(f"row ids outside the {self.n_rows} rows of {p.name}")
            self.ids, self.n_rows = ids, len(ids)

    def _row_ids(self, a: int, b: int):
        if self.ids is None:
            return self.chain.row_ids(a, b)
        out = self.ids[a:b]
        return out if self.chain.rows is None else np.asarray(self.chain.rows[out], dtype=np.int64)

    def _floats(self, ids) -> np.ndarray:
        st = self.tensor.storage if isinstance(self.tensor, TensorRows) else None
        if st is None or st.ggml_type not in OWN_DECODED or st.row_bytes is None:
            return self.tensor.floats(ids)
        raw = np.asarray(self.tensor.raw(ids))
        codes, words = ternary.source_codes(st.ggml_type, raw.reshape(raw.shape[0], -1), st.cols)
        d = words.view(np.float16).astype(np.float32)
        return codes.astype(np.float32) * d[:, np.arange(st.cols) // st.block]

    def rows(self, a: int, b: int) -> np.ndarray:
        x = self.chain.apply(self._floats(self._row_ids(a, b)))
        x = np.asarray(x).reshape(b - a, self.k)
        return np.asarray(logical_values(self.file, self.source, x), dtype=np.float32)  # rotated: un-rotated

    def array(self, shape) -> np.ndarray:
        return self.rows(0, self.n_rows).reshape(tuple(shape))


class RowView:
    """A rank-2 parameter that decodes only the rows indexed (``view[ids]``, ``view[a:b]``)."""

    def __init__(self, rows, shape) -> None:
        self._rows = rows
        self.shape = tuple(shape)

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            a, b, step = key.indices(self.shape[0])
            if step != 1:
                raise IndexError("RowView supports unit-step slices")
            return self._rows.rows(a, b)
        ids = np.asarray(key, dtype=np.int64).reshape(-1)
        out = np.empty((len(ids), self.shape[1]), dtype=np.float32)
        for i, r in enumerate(ids):
            out[i] = self._rows.rows(int(r), int(r) + 1)[0]
        return out


class LazyParameters(Mapping):
    """``name → values`` computed on access by ``make(name)``; names in ``row_views`` give a :class:`RowView`."""

    def __init__(self, shapes: Mapping[str, tuple[int, ...]], make, row_views=()) -> None:
        self.shapes, self.make, self.row_views = dict(shapes), make, set(row_views)

    def __getitem__(self, name: str):
        if name not in self.shapes:
            raise KeyError(name)
        rows = self.make(name)
        if name in self.row_views and len(self.shapes[name]) == 2:
            return RowView(rows, self.shapes[name])
        return rows.rows(0, rows.n_rows).reshape(self.shapes[name])

    def __contains__(self, name) -> bool:  # Mapping's default would materialise the value
        return name in self.shapes

    def __iter__(self):
        return iter(self.shapes)

    def __len__(self) -> int:
        return len(self.shapes)
