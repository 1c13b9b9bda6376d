"""Producing the bytes of planned objects: row block by row block, in payload order, error measured.

A tensor object is made of pieces (``plan.py``). Each piece is cut into row blocks of at most
:data:`CHUNK_BYTES` of float32; each block is made into a small object of the same format (rows
``[r0, r1)``) and its planes are placed where the parent's row view (``codecs.row_view``, container
§7.3) says. Every layout of the project stores rows row-major inside each plane, so the first plane
streams out in order and only the later (small) planes — scales, the q5/q6 high bits — are held until
the end: memory per object is one block plus those planes, flat in model size.

``transcode`` pieces move the source's raw element blocks (rows whole; columns only as whole blocks)
and convert them exactly (``codecs.transcode_ggml``, layout spec §6). ``encode`` pieces decode the
source rows, apply the chain's columns and value transforms in float64, optionally rotate them
(``W·D·H``, storage-layouts §7), encode with the recipe's encoder and decode the result again to
measure the error (:class:`ErrorStats`).

Kept pieces of a prequantized source (``prequantized.py``) are ``QuantizedWeight.transcode`` of their rows —
whole row tiles per block, the source's divisor in each member's slot (docs/prequantized.md).

Objects of a format its codec encodes whole (the trait ``whole_object``, docs/format/codec-traits.md: nvfp4,
whose divisor is the amax of the whole matrix) are encoded whole, or member by member when each member has
its own divisor (``divisors = members``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from converters.errors import ConversionError
from converters.mapping import transforms as T
from converters.pipeline.expert_bank import place_bank, stream_bank
from converters.pipeline.plan import block_permutation
from converters.pipeline.planned import Piece, PlannedLiteral, PlannedResource, PlannedTensor
from converters.pipeline.prequantized import quantized_weight
from converters.pipeline.unchanged import unchanged_ranges
from converters.sources.hadamard import INVERSE, read_rotation
from converters.sources.rows import TensorRows, open_rows
from ninfer_core import codecs
from ninfer_core.codecs.base import scratch
from ninfer_core.container.filecopy import FileRange
from ninfer_core.container.object_data import Placed

#: float32 bytes of one row block (encoders make a few temporaries of this size).
CHUNK_BYTES = 16 * 1024 * 1024
#: elements per partial sum of the error statistics
STATS_ROW = 4096
#: rows of :data:`STATS_ROW` the error statistics take at a time (2 × 1 MiB of float32: in the L2 cache)
STATS_CHUNK_ROWS = 64


@dataclass
class ErrorStats:
    """Running comparison of encoded values against the values given to the encoder."""

    sxy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    max_abs: float = 0.0
    elements: int = 0
    unrounded: ErrorStats | None = None  # against the float64 result of value transforms (see add_unrounded)

    def add_unrounded(self, ref: np.ndarray, got: np.ndarray) -> None:
        """Accumulate ``got`` against ``ref``, the float64 result of a value transform or an un-rotation
        (:meth:`Producer.reference`), compared in float64: what the rounding to float32 before encoding
        costs too (``A_log = log(-ssm_a)`` stored fp32 is exact against its float32 value, not against
        the float64 one). Reported as ``against_float64``; the exactness label stays the encoder's."""
        if self.unrounded is None:
            self.unrounded = ErrorStats()
        self.unrounded.add(ref, got)

    def add(self, ref: np.ndarray, got: np.ndarray) -> None:
        """Accumulate ``ref`` (what was encoded) against ``got`` (what decodes back).

        Dot products run in float32 over rows of :data:`STATS_ROW` elements (vectorized, no float64 copy
        of the block; the last row zero-padded) and are summed in float64, which keeps the relative error
        near 1e-7; a float64 ``ref`` is compared in float64. One pass over the block: the three products
        and the largest difference of :data:`STATS_CHUNK_ROWS` rows at a time, while they are in the cache
        (docs/imatrix.md §Requantization speed); each row's partial sum is the same as over the whole block."""
        wide = np.asarray(ref).dtype == np.float64
        r = np.ascontiguousarray(ref, dtype=np.float64 if wide else np.float32).reshape(-1)
        g = np.ascontiguousarray(got, dtype=r.dtype).reshape(-1)
        if not r.size:
            return
        full, rest = divmod(r.size, STATS_ROW)
        parts = np.empty((3, full + (1 if rest else 0)), dtype=r.dtype)
        diff = scratch("stats_diff", (max(1, min(full, STATS_CHUNK_ROWS)), STATS_ROW), r.dtype)
        largest = 0.0
        for i in range(0, full, STATS_CHUNK_ROWS):
            j = min(full, i + STATS_CHUNK_ROWS)
            a = r[i * STATS_ROW:j * STATS_ROW].reshape(-1, STATS_ROW)
            b = g[i * STATS_ROW:j * STATS_ROW].reshape(-1, STATS_ROW)
            largest = max(largest, _row_sums(a, b, parts[:, i:j], diff[:j - i]))
        if rest:
            a, b = np.zeros((1, STATS_ROW), dtype=r.dtype), np.zeros((1, STATS_ROW), dtype=r.dtype)
            a[0, :rest], b[0, :rest] = r[full * STATS_ROW:], g[full * STATS_ROW:]
            largest = max(largest, _row_sums(a, b, parts[:, full:], diff[:1]))
        self.sxy += float(parts[0].sum(dtype=np.float64))
        self.sxx += float(parts[1].sum(dtype=np.float64))
        self.syy += float(parts[2].sum(dtype=np.float64))
        self.max_abs = max(self.max_abs, largest)
        self.elements += r.size

    def merge(self, other: ErrorStats) -> None:
        self.sxy += other.sxy
        self.sxx += other.sxx
        self.syy += other.syy
        self.max_abs = max(self.max_abs, other.max_abs)
        self.elements += other.elements
        if other.unrounded is not None:
            if self.unrounded is None:
                self.unrounded = ErrorStats()
            self.unrounded.merge(other.unrounded)

    @property
    def cosine(self) -> float:
        if self.sxx == 0 and self.syy == 0:
            return 1.0
        if self.sxx == 0 or self.syy == 0:
            return 0.0
        return self.sxy / math.sqrt(self.sxx * self.syy)

    @property
    def exact(self) -> bool:
        return self.max_abs == 0.0

    def to_json(self) -> dict:
        rms = math.sqrt(max(self.sxx + self.syy - 2 * self.sxy, 0.0) / self.elements) if self.elements else 0.0
        out = {"cosine": round(self.cosine, 9), "max_abs": float(f"{self.max_abs:.6g}"),
               "rms": float(f"{rms:.6g}"), "elements": self.elements}
        if self.unrounded is not None:
            out["against_float64"] = self.unrounded.to_json()
        return out


class BlockErrors:
    """The measured errors of row blocks kept apart, one :class:`ErrorStats` per block in the order made. A
    bank written in shares by several workers (docs/io-speed.md §Write path) records each share's blocks
    here; :meth:`merge_into` then adds them to the object's statistics share by share, in row order, which
    gives exactly the sums of one pass over the rows (``ErrorStats`` accumulates block by block), whatever
    the number of shares."""

    def __init__(self) -> None:
        self.blocks: list[ErrorStats] = []

    def add(self, ref: np.ndarray, got: np.ndarray) -> None:
        self.blocks.append(ErrorStats())
        self.blocks[-1].add(ref, got)

    def add_unrounded(self, ref: np.ndarray, got: np.ndarray) -> None:
        self.blocks[-1].add_unrounded(ref, got)

    def merge_into(self, stats: ErrorStats) -> None:
        for b in self.blocks:
            stats.merge(b)


def _row_sums(a: np.ndarray, b: np.ndarray, out: np.ndarray, diff: np.ndarray) -> float:
    """Per row of ``a``/``b`` (rows of :data:`STATS_ROW`): ``a·b``, ``a·a``, ``b·b`` into ``out[0..2]``; returns
    the largest ``|a - b|``."""
    np.einsum("ij,ij->i", a, b, out=out[0])
    np.einsum("ij,ij->i", a, a, out=out[1])
    np.einsum("ij,ij->i", b, b, out=out[2])
    d = np.subtract(a, b, out=diff)
    return float(np.abs(d, out=d).max())


@dataclass
class Block:
    """Rows ``[r0, r1)`` of an object encoded as a small object of the same format."""

    r0: int
    r1: int
    data: bytes | np.ndarray | list[FileRange]  # file ranges: the source's bytes, unchanged
    shape: tuple[int, ...]
    divisors: int = 1
    code_ranges: list[FileRange] | None = None  # the first (code) plane as source file ranges; data's is not filled


class Producer:
    """Makes the bytes of planned objects from the conversion's sources."""

    def __init__(self, sources: dict, *, hadamard_seed: int | None = None, importance=None) -> None:
        self.sources = sources
        self.hadamard_seed = hadamard_seed
        self.importance = importance  # converters.pipeline.importance.Importance (docs/imatrix.md) or None
        self._signs: dict[int, np.ndarray] = {}

    def signs(self, width: int) -> np.ndarray:
        if width not in self._signs:
            # the object stores bf16; ±1 is exact in bf16, so the float32 vector is the stored one
            self._signs[width] = T.hadamard_signs(width, self.hadamard_seed)
        return self._signs[width]

    # -- whole objects -------------------------------------------------------------------------------

    def stream(self, obj, stats: ErrorStats | None = None, *, file_ranges: bool = False,
               placed: bool = False, share: tuple[Piece, ...] | None = None,
               ) -> Iterator[bytes | np.ndarray | memoryview | FileRange | Placed]:
        """The object's bytes in payload order (for ``ArtifactWriter.write_object``). ``file_ranges``: bytes
        stored exactly as a source file holds them come as :class:`FileRange` chunks, which the in-process
        writer copies in the kernel (:mod:`converters.pipeline.unchanged`). ``placed``: an expert bank comes
        in one pass as :class:`Placed` chunks (:func:`~converters.pipeline.expert_bank.place_bank`). ``stats``
        accumulates the measured error of requantized rows; without it nothing is measured (nor decoded).
        ``share``: only these experts of a bank (one of :func:`~converters.pipeline.expert_bank.bank_shares`),
        placed; the first share also places the zero bytes between the bank's planes."""
        if isinstance(obj, PlannedResource):
            yield obj.data
            return
        if isinstance(obj, PlannedLiteral):
            yield codecs.encode(obj.format, obj.layout, obj.values.astype(_literal_dtype(obj.format)))
            return
        # without stats nothing is measured: what was encoded is not decoded again
        if obj.bank_rows:  # expert banks are written plane-major, memory flat in the bank's size
            if share is not None:
                yield from place_bank(lambda s: self.blocks(obj, s, pieces=share, kept_ranges=True), obj, stats,
                                      gaps=share[0] is obj.pieces[0])
            elif placed:
                yield from place_bank(lambda s: self.blocks(obj, s, kept_ranges=True), obj, stats)
            else:
                yield from stream_bank(lambda s: self.blocks(obj, s), obj, stats, lambda: None)
            return
        yield from self._stream_tensor(obj, stats, file_ranges)

    def produce(self, obj, stats: ErrorStats | None = None) -> bytes:
        """The whole object as one ``bytes`` (tests, small objects)."""
        return b"".join(bytes(memoryview(c).cast("B")) if not isinstance(c, bytes) else c
                        for c in self.stream(obj, stats))

    def _stream_tensor(self, obj: PlannedTensor, stats: ErrorStats | None, file_ranges: bool = False) -> Iterator:
        planes = codecs.planes(obj.format, obj.layout, obj.shape, obj.divisors)
        first = planes[0]
        tails = [np.zeros(p.size, dtype=np.uint8) for p in planes[1:]]
        cursor = first.offset
        for block in self.blocks(obj, stats, file_ranges=file_ranges):
            view = codecs.row_view(obj.format, obj.layout, obj.shape, block.r0, block.r1, obj.divisors)
            if isinstance(block.data, list):  # unchanged source bytes: file ranges of the only plane
                if len(view) != 1 or view[0][1] != cursor or view[0][2] != sum(r.length for r in block.data):
                    raise ConversionError(f"{obj.id}: rows [{block.r0}, {block.r1}) do not match their source "
                                          "file ranges", rule="plane_geometry")
                yield from block.data
                cursor += view[0][2]
                continue
            data = np.frombuffer(block.data, dtype=np.uint8) if isinstance(block.data, bytes | bytearray) \
                else np.asarray(block.data).reshape(-1).view(np.uint8)
            small = codecs.planes(obj.format, obj.layout, block.shape, block.divisors)
            for i, (sp, (_, off, size)) in enumerate(zip(small, view, strict=True)):
                if sp.size != size:
                    raise ConversionError(f"{obj.id}: rows [{block.r0}, {block.r1}) of plane {sp.name} are "
                                          f"{sp.size} bytes, the parent's row view {size}", rule="plane_geometry")
                part = data[sp.offset:sp.offset + sp.size]
                if i == 0:
                    if off != cursor:
                        raise ConversionError(f"{obj.id}: row blocks out of order at row {block.r0}",
                                              rule="plane_geometry")
                    yield from code_plane(obj, block, size) if block.code_ranges is not None else (part,)
                    cursor += size
                else:
                    rel = off - planes[i].offset
                    tails[i - 1][rel:rel + size] = part
        if cursor != first.offset + first.size:
            raise ConversionError(f"{obj.id}: rows cover {cursor - first.offset} of {first.size} bytes of plane "
                                  f"{first.name}", rule="plane_geometry")
        end = first.offset + first.size
        for p, tail in zip(planes[1:], tails, strict=True):
            if p.offset > end:
                yield np.zeros(p.offset - end, dtype=np.uint8)
            yield tail
            end = p.offset + p.size

    # -- row blocks ---------------------------------------------------------------------------------

    def blocks(self, obj: PlannedTensor, stats: ErrorStats | None, *, file_ranges: bool = False,
               pieces: tuple[Piece, ...] | None = None, kept_ranges: bool = False) -> Iterator[Block]:
        """The object's row blocks in row order (a piece stored unchanged as one block of file ranges when
        ``file_ranges``); ``pieces``: only those pieces' blocks (a bank's share: pieces whose blocks do not
        depend on the others', expert_bank.bank_shares). ``file_ranges`` or ``kept_ranges``: a kept
        prequantized block's code plane as source file ranges where the source holds it unchanged
        (:meth:`kept_block`)."""
        tail = obj.shape[1:]
        traits = codecs.codec_traits(obj.format)
        kept = any(pc.quantization is not None and pc.method == "transcode" for pc in obj.pieces)
        if traits.whole_object and not kept:
            if obj.divisors > 1 and obj.divisors == len(obj.pieces):
                for pc in pieces or obj.pieces:  # one divisor per member: each member encoded as its own object
                    values = self.values(pc, obj, 0, pc.rows)
                    weights = self.importance.weights(obj, pc) if self.importance is not None else None
                    yield self.encode_block(obj, pc.row_start, values, stats, weights=weights)
                return
            if pieces is not None and tuple(pieces) != tuple(obj.pieces):
                raise ConversionError(f"{obj.id}: an object encoded whole with one divisor cannot be made in "
                                      "shares", rule="plane_geometry")
            parts = [self.values(pc, obj, 0, pc.rows) for pc in obj.pieces]
            values = parts[0] if len(parts) == 1 else np.concatenate(parts)  # one piece: no copy
            yield self.encode_block(obj, 0, values, stats, divisors=obj.divisors, weights=self.stacked_weights(obj))
            return
        width = max(1, int(np.prod(tail)) if tail else 1)
        step = max(1, CHUNK_BYTES // (4 * width)) * axis0_rows(obj.shape)  # source rows, whole axis-0 rows
        if kept:  # whole row tiles (nvfp4's 128-row scale tiles) per block
            step = max(traits.row_tile, step // traits.row_tile * traits.row_tile)
        for pc in pieces or obj.pieces:
            if pc.quantization is not None and pc.method == "transcode":
                for a in range(0, pc.rows, step):
                    yield self.kept_block(obj, pc, a, min(pc.rows, a + step), ranges=file_ranges or kept_ranges)
                continue
            if traits.whole_object:  # a requantized member beside kept ones: its own divisor, encoded whole
                weights = self.importance.weights(obj, pc) if self.importance is not None else None
                yield self.encode_block(obj, pc.row_start, self.values(pc, obj, 0, pc.rows), stats, weights=weights)
                continue
            rows = open_rows(self.sources, pc.source)
            if file_ranges and (ranges := unchanged_ranges(obj, pc, rows)) is not None:
                inner = axis0_rows(obj.shape)
                yield Block(pc.row_start // inner, (pc.row_start + pc.rows) // inner, ranges,
                            (pc.rows // inner, *obj.shape[1:]))
                continue
            for a in range(0, pc.rows, step):
                b = min(pc.rows, a + step)
                if pc.method == "transcode":
                    yield self.transcode_block(obj, pc, rows, a, b)
                else:
                    ref = self.reference(pc, a, b, rows)
                    values = self.values(pc, obj, a, b, rows) if ref is None else ref.astype(np.float32)
                    weights = self.importance.weights(obj, pc) if self.importance is not None else None
                    yield self.encode_block(obj, pc.row_start + a, values, stats, ref=ref, weights=weights)

    def stacked_weights(self, obj: PlannedTensor) -> np.ndarray | None:
        """Per-row importance ``(rows, K)`` of an object encoded whole: each piece's rows take its vector
        (ones where a piece has none), or None when no piece has one (docs/imatrix.md)."""
        if self.importance is None:
            return None
        vecs = [self.importance.weights(obj, pc) for pc in obj.pieces]
        if all(v is None for v in vecs):
            return None
        k = obj.shape[-1]
        return np.concatenate([np.broadcast_to(v if v is not None else np.ones(k, np.float32), (pc.rows, k))
                               for pc, v in zip(obj.pieces, vecs, strict=True)])

    def values(self, pc: Piece, obj: PlannedTensor, a: int, b: int, rows: TensorRows | None = None) -> np.ndarray:
        """float32 values of member rows ``[a, b)`` after the chain (and the Hadamard rotation)."""
        if pc.method != "encode":
            raise ConversionError(f"{obj.id}: {obj.format} objects are encoded whole, but {pc.parameter} is a "
                                  "transcode piece", rule="whole_object_transcode")
        rows = rows or open_rows(self.sources, pc.source)
        ref = self.reference(pc, a, b, rows)
        if ref is not None:  # computed in float64, rounded once
            return np.ascontiguousarray(ref, dtype=np.float32)
        chain = pc.source.chain
        raw = rows.floats(chain.row_ids(a, b))
        require_finite(raw, pc, rows, a)
        x = chain.apply(raw)
        if pc.hadamard_width is not None:
            x = T.hadamard_rotate(x, self.signs(pc.hadamard_width)).astype(np.float32)
        return np.ascontiguousarray(x, dtype=np.float32)

    def reference(self, pc: Piece, a: int, b: int, rows: TensorRows) -> np.ndarray | None:
        """float64 values of member rows ``[a, b)`` when they are computed — value transforms, the un-rotation of
        a looked-up tensor the source stores rotated (:mod:`converters.sources.hadamard`) — else None (the source's
        float32 values are the values). :meth:`values` rounds them once to float32; the error statistics
        also compare against them (``against_float64``)."""
        chain = pc.source.chain
        if not chain.values and pc.source_hadamard != INVERSE:
            return None
        x = rows.floats(chain.row_ids(a, b))
        require_finite(x, pc, rows, a)
        if chain.columns is not None:
            x = x[:, chain.columns]
        x = np.asarray(x, dtype=np.float64)
        for v in chain.values:
            x = v(x)
        if pc.source_hadamard == INVERSE:
            signs = read_rotation(self.sources[pc.source.input]).signs_for(x.shape[-1], tensor=pc.source.tensor)
            x = T.hadamard_unrotate(x, signs)
        if pc.hadamard_width is not None:
            x = T.hadamard_rotate(x, self.signs(pc.hadamard_width))
        return x

    def encode_block(self, obj: PlannedTensor, r0: int, values: np.ndarray, stats: ErrorStats | None, *,
                     divisors: int = 1, ref: np.ndarray | None = None, weights: np.ndarray | None = None) -> Block:
        """Rows of ``values`` encoded; with ``stats``, the values the encoding decodes to (made by the codec
        while encoding, ``codecs.encode(decoded=…)``) are compared with ``values`` (and ``ref``)."""
        inner = axis0_rows(obj.shape)
        r0, shape = r0 // inner, (values.shape[0] // inner, *obj.shape[1:])
        x = values.reshape(shape)
        got = scratch("decoded", shape, np.float32) if stats is not None else None  # this thread's, reused
        data = codecs.encode(obj.format, obj.layout, x, encoder=obj.encoder, divisors=divisors, as_array=True,
                             weights=weights, decoded=got)
        if stats is not None:
            stats.add(x, got)
            if ref is not None:
                stats.add_unrounded(ref.reshape(shape), got)
        return Block(r0, r0 + shape[0], data, shape, divisors)

    def transcode_block(self, obj: PlannedTensor, pc: Piece, rows: TensorRows, a: int, b: int) -> Block:
        chain = pc.source.chain
        ids = chain.row_ids(a, b)
        if isinstance(rows, TensorRows):  # read into this thread's reused buffer (docs/io-speed.md §Source reads)
            raw = rows.raw(ids, into=lambda n: scratch("source_rows", (n,), np.uint8))
        else:
            raw = rows.raw(ids)
        if chain.columns is not None and pc.deferred_columns is None and pc.column_groups is None:
            st = rows.storage
            n = raw.shape[0]
            order = block_permutation(chain.columns, st.block)
            raw = raw.reshape(n, -1, st.block_bytes)[:, order].reshape(n, -1)
        inner = axis0_rows(obj.shape)
        shape = ((b - a) // inner, *obj.shape[1:])
        data = codecs.transcode_ggml(pc.source_type, np.ascontiguousarray(raw), shape, obj.format,
                                     tensor=pc.source.tensor, as_array=True, inline=True)
        if pc.column_groups is not None:
            data = permute_column_groups(obj.format, shape, data, block_permutation(chain.columns, pc.column_groups))
        return Block((pc.row_start + a) // inner, (pc.row_start + b) // inner, data, shape)


    def kept_block(self, obj: PlannedTensor, pc: Piece, a: int, b: int, *, ranges: bool = False) -> Block:
        """Member rows ``[a, b)`` of a kept prequantized tensor: ``QuantizedWeight.transcode`` of its source rows
        (codes and scales copied, the source's divisor kept; docs/prequantized.md), or ``gather`` of the runs
        of consecutive source rows when the mapping selects or permutes rows
        (docs/prequantized.md §Row gathers). ``ranges``: rows of one run whose code plane the source holds unchanged
        (``QuantizedWeight.code_span``) give it as a :class:`FileRange`, which the in-process writer copies in
        the kernel; only the other planes are made here (docs/io-speed.md §Prequantized bench)."""
        qw = quantized_weight(self.sources, pc.source)
        ids = pc.source.chain.row_ids(a, b)
        runs = [(ids.start, ids.stop)] if isinstance(ids, slice) else row_runs(np.asarray(ids))
        span = qw.code_span(obj.format, *runs[0]) if ranges and len(runs) == 1 else None
        data = (qw.transcode(obj.format, *runs[0], codes=span is None) if len(runs) == 1
                else qw.gather(obj.format, runs))
        return Block(pc.row_start + a, pc.row_start + b, np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8),
                     (b - a, *obj.shape[1:]), code_ranges=None if span is None else [FileRange(*span)])


def code_plane(obj: PlannedTensor, block: Block, size: int) -> list[FileRange]:
    """The file ranges of a block's code plane (:meth:`Producer.kept_block`), checked against the parent's
    row view: ``size`` bytes."""
    if sum(r.length for r in block.code_ranges) != size:
        raise ConversionError(f"{obj.id}: rows [{block.r0}, {block.r1}) do not match their source file ranges",
                              rule="plane_geometry")
    return block.code_ranges


def row_runs(ids: np.ndarray) -> list[tuple[int, int]]:
    """``[(r0, r1), …]``: the runs of consecutive source rows of a row map, in order."""
    cuts = np.flatnonzero(np.diff(ids) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(ids, cuts)]


def require_finite(x: np.ndarray, pc: Piece, rows: TensorRows, a: int) -> None:
    """Refuse source values that are NaN or infinite, naming the file, the tensor and where (a NaN Q8_0
    block scale decodes to a NaN block): nothing downstream can represent them faithfully."""
    bad = ~np.isfinite(x)
    if not bad.any():
        return
    first = np.unravel_index(int(np.flatnonzero(bad)[0]), x.shape)
    value = x[first]
    where = f"row {a + int(first[0])}" + (f", column {int(first[1])}" if len(first) > 1 else "")
    ggml_type, block = rows.storage.ggml_type, rows.storage.block
    hint = f" (in {ggml_type} block {int(first[-1]) // block} of that row: its scale decodes to {value})" \
        if ggml_type and block > 1 and len(first) > 1 else ""
    file = getattr(rows.tensor, "file", None) or getattr(rows.source, "path", None)
    raise ConversionError(f"source tensor {pc.source.tensor!r} holds {int(bad.sum())} non-finite value(s) in rows "
                          f"[{a}, {a + x.shape[0]}): first {value} at {where}{hint}; a NaN or infinity cannot be "
                          "converted", file=str(file) if file is not None else None, json_path=pc.source.tensor,
                          rule="source_not_finite")


def axis0_rows(shape: tuple[int, ...]) -> int:
    """Source rows (a chain's rows: all leading axes flattened, ``chain.py``) per codec row (axis 0): 1 for
    rank ≤ 2; ``prod(shape[1:-1])`` for a rank-3+ object such as a Conv3d weight ``[N, C, T, p, p]``."""
    return int(np.prod(shape[1:-1])) if len(shape) > 2 else 1


def permute_column_groups(fmt: str, shape: tuple[int, int], data: bytes | np.ndarray, order: np.ndarray) -> bytes:
    """Move whole column groups of a ``row_split_k128_v1`` object: output group ``j`` of every row is input
    group ``order[j]`` — its codes in every code plane and its multiplier (storage-layouts §1: each plane
    is row-major with a fixed number of bytes per group). Padding groups stay where they are."""
    n, _ = shape
    codec = codecs.FORMATS[fmt]
    per_group = {"low": codec.group * codec.low_bits // 8, "high": codec.group * codec.high_bits // 8, "scale": 2}
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    moved = len(order)
    for p in codecs.planes(fmt, codec.layout, shape):
        width = per_group[p.name]
        plane = buf[p.offset:p.offset + p.size].reshape(n, -1)
        body = plane[:, : moved * width].reshape(n, moved, width)
        plane[:, : moved * width] = body[:, order].reshape(n, -1)
    return buf.tobytes()


def _literal_dtype(fmt: str):
    return np.dtype(codecs.codec_traits(fmt).integer_word or np.float32)
