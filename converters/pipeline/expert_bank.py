"""Expert banks: the experts of one MoE projection stacked by rows in one rank-2 parent, planned and
streamed expert by expert.

A mapping parameter with ``repeat: {e: num_experts}`` and ``bank: <object id>`` (``mappings/*.yaml``)
names, per layer, ``E`` logical matrices ``[N, K]`` that live in one object ``[E·N, K]``: expert ``e``
owns rows ``[e·N, (e+1)·N)`` and its binding is the Part ``range [e·N·K, (e+1)·N·K)`` (container §7.1),
which every layout of the project serves as a zero-copy row view (§7.2 "a rank-2 expert bank's expert
range can back a rank-2 logical projection", §7.3; ``ninfer_core.codecs.row_view``).

Format (:func:`plan_bank`): the recipe's entry for the experts' role decides it for the whole bank,
unless a command-line override matches the bank id or every expert (docs/recipes.md §Overrides).

- a format with per-member divisors (``nvfp4``; the codec trait ``divisors_per_member``,
  docs/format/codec-traits.md): ``divisors = E``, one FP32 weight divisor per expert (container §5.1,
  storage-layouts §3: ``divisor[floor(n / N)]``), so every expert is quantized on its own scale; each expert
  must be whole row tiles (trait ``row_tile``: nvfp4's 128-row scale tiles, ``N % 128 == 0``) for its row
  view to own its tiles — otherwise the recipe's fallback, noted in provenance.
- integer formats (``q4_g64_fp16`` …) and ``fp8_e4m3fn_row_bf16``: per-group / per-row multipliers
  already make experts independent; exact transcoding (Q8_0 → ``q8_g32_fp16``, ternary types →
  ``t2_g128_fp16``) applies per expert when the recipe prefers it.
- ``exact``: the experts' common exact form — transcoded, or the GGML blocks passed through as one
  ``gguf_<type>`` bank (rows of whole blocks, so an expert is still a row range). Prequantized experts
  (``exact``, or a recipe with ``prequantized: keep``) keep their codes; an nvfp4 bank of them has
  ``divisors = E``, each expert's source divisor (docs/recipes.md §Prequantized sources).

Streaming (:func:`stream_bank`): an object's first plane is written in row order while its later planes
(scales, q5/q6 high bits, nvfp4 block scales and divisors) are collected; for a bank of tens of GB those
later planes alone exceed any memory budget (q8: 1/16 of the codes). So a bank is written plane-major:
one pass over the experts streams a plane at its planned offset and keeps only the following planes
that fit :data:`TAIL_BUDGET`; planes beyond it get their own pass (the experts are produced again —
sources are memory-mapped per row block, so a pass costs a re-read, not memory). Peak memory is one
expert's row block (``produce.CHUNK_BYTES``; an nvfp4 expert is encoded whole) plus the budget, flat in
the bank's size.

The in-process writer takes chunks at any position of an object, so a conversion written there uses
:func:`place_bank` instead: one pass, each row block's plane parts written at their offsets as they are
made, nothing held. The staged writer (scale-out) and a content-derived ID hash an object's bytes in
order, so they keep the plane-major stream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np

from converters.errors import ConversionError
from converters.mapping.overrides import bank_match
from converters.mapping.recipes import EXACT
from converters.pipeline.prequantized import keep_piece, quantized_weight
from ninfer_core import codecs
from ninfer_core.container.object_data import Placed

#: later-plane bytes of one bank held in memory during a pass (the rest gets further passes): the scale
#: planes of real banks (Qwen3-235B: 0.8 G elements, 50 MB of q8 or nvfp4 scales) fit, so one pass
#: suffices; a bank several times larger costs a re-read per plane beyond it, not memory
TAIL_BUDGET = 64 * 1024 * 1024


def plan_bank(planner, oid: str, members: list) -> object:
    """The :class:`~converters.pipeline.planned.PlannedTensor` of bank ``oid`` stacking ``members`` (bound parameters
    of one rule, in expert order) by rows; ``planner`` is the plan's ``_Planner``."""
    first = members[0]
    if any(p.shape != first.shape or p.role != first.role or len(p.shape) != 2 for p in members):
        shapes = sorted({f"{p.role} {list(p.shape)}" for p in members})
        raise ConversionError(f"bank {oid}: members must be matrices of one role and shape, got {shapes}",
                              file=first.where, rule="bank_members")
    rows, k = first.shape
    shape = (len(members) * rows, k)
    spec = planner.role(first)
    override = bank_match(planner.recipe.overrides, oid, members)
    want, fallback = (spec.format, spec.fallback) if override is None else (override.format, None)
    rule = f"recipe {planner.recipe.name} role {spec.pattern}" if override is None else override.flag
    notes: list[str] = []
    keep = (override is None and planner.recipe.prequantized == "keep"
            and all(quantized_weight(planner.sources, p.source) is not None for p in members))
    if want == EXACT or keep:  # a kept prequantized nvfp4 bank: each expert keeps its source divisor
        fmt, pieces = _exact_pieces(planner, oid, members, rows, keep=keep)
        divisors = len(members) if codecs.codec_traits(fmt).divisors_per_member and len(members) > 1 else 1
    else:
        traits = codecs.codec_traits(want)
        fmt, divisors = want, (len(members) if traits.divisors_per_member else 1)
        if traits.divisors_per_member and rows % traits.row_tile:
            if fallback is None:
                raise ConversionError(f"bank {oid}: {fmt} needs every expert to be whole {traits.row_tile}-row scale "
                                      f"tiles, but an expert has {rows} rows, and {rule} gives no fallback",
                                      file=planner.recipe.file, rule="format_shape")
            notes.append(f"{fmt} needs experts of whole {traits.row_tile}-row scale tiles, an expert has {rows} "
                         f"rows: fallback {fallback}")
            fmt, divisors = fallback, 1
        fmt, divisors = planner.fit(oid, fmt, fallback, shape, divisors, notes)
        hadamard = planner.rotation(first, spec)
        pieces = [planner.piece(p, fmt, i * rows, hadamard=hadamard) for i, p in enumerate(members)]
        inexact = next((pc for pc in pieces if pc.method == "encode"), None)
        if override is not None and inexact is not None:
            p = next(m for m in members if m.name == inexact.parameter)
            notes.append(f"bank {oid}: {p.name}: {planner.why_not_exact(p, fmt)}: requantized into {fmt} "
                         f"({override.flag})")
    obj = planner.tensor(oid, shape, fmt, divisors, pieces, spec.encoder, members, notes,
                         rule=f"{rule} (expert bank)")
    obj.bank_rows = rows
    return obj


def _exact_pieces(planner, oid: str, members: list, rows: int, *, keep: bool = False) -> tuple[str, list]:
    """``format: exact`` (or ``prequantized: keep``) per bank: every expert's form must be the same format."""
    forms = {}
    pieces = []
    for i, p in enumerate(members):
        fmt, piece = keep_piece(planner, p) if keep else planner.exact_piece(p)
        if piece.deferred_columns is not None:
            raise ConversionError(f"bank {oid}: {p.name} would keep its columns in source order (input_columns); "
                                  "an expert bank has one use per expert and no column permutation",
                                  file=p.where, rule="bank_columns")
        forms.setdefault(fmt, p.name)
        pieces.append(dataclasses.replace(piece, row_start=i * rows))
    if len(forms) != 1:
        raise ConversionError(f"bank {oid}: the experts' sources have different exact forms "
                              f"({', '.join(f'{f} for {n}' for f, n in forms.items())}); one bank has one format",
                              file=members[0].where, rule="bank_exact_format")
    return next(iter(forms)), pieces


def stream_bank(blocks: Callable[[object], Iterator], obj, stats, fresh_stats: Callable[[], object]) -> Iterator:
    """The bytes of bank ``obj`` in payload order, plane-major (module docstring).

    ``blocks(stats)`` yields the object's row blocks (``produce.Block``: rows ``[r0, r1)`` encoded as a
    small object of the same format) in row order; the first pass accumulates ``stats`` (measured error),
    later passes a throwaway ``fresh_stats()``."""
    planes = codecs.planes(obj.format, obj.layout, obj.shape, obj.divisors)
    cursor = 0
    first = 0
    while first < len(planes):
        held, budget = [], TAIL_BUDGET
        for j in range(first + 1, len(planes)):
            if planes[j].size > budget:
                break
            budget -= planes[j].size
            held.append(j)
        buffers = {j: np.zeros(planes[j].size, dtype=np.uint8) for j in held}
        if planes[first].offset > cursor:
            yield np.zeros(planes[first].offset - cursor, dtype=np.uint8)
        cursor = planes[first].offset
        for block in blocks(stats if first == 0 else fresh_stats()):
            for j, (part, off) in _plane_parts(obj, block, [first, *held]):
                if j == first:
                    if off != cursor:
                        raise ConversionError(f"{obj.id}: row blocks out of order at row {block.r0}",
                                              rule="plane_geometry")
                    yield part
                    cursor += part.size
                else:
                    rel = off - planes[j].offset
                    buffers[j][rel:rel + part.size] = part
        if cursor != planes[first].offset + planes[first].size:
            raise ConversionError(f"{obj.id}: rows cover {cursor - planes[first].offset} of {planes[first].size} "
                                  f"bytes of plane {planes[first].name}", rule="plane_geometry")
        for j in held:
            if planes[j].offset > cursor:
                yield np.zeros(planes[j].offset - cursor, dtype=np.uint8)
            yield buffers.pop(j)
            cursor = planes[j].offset + planes[j].size
        first = (held[-1] if held else first) + 1


def place_bank(blocks: Callable[[object], Iterator], obj, stats, *, gaps: bool = True) -> Iterator[Placed]:
    """The bytes of bank ``obj`` in one pass over its experts, for a writer that takes chunks at any position
    (the in-process writer, docs/io-speed.md §Write path): every plane part of every row block is placed at
    its offset as soon as it is made, so nothing is held and no plane needs a pass of its own. ``blocks``
    may yield only some experts' blocks (a share, :func:`bank_shares`); ``gaps``: place the zero bytes
    between planes too (exactly one share of a bank does)."""
    planes = codecs.planes(obj.format, obj.layout, obj.shape, obj.divisors)
    cursor = 0
    for p in planes:  # the zero bytes between planes
        if gaps and p.offset > cursor:
            yield Placed(cursor, np.zeros(p.offset - cursor, dtype=np.uint8))
        cursor = p.offset + p.size
    every = list(range(len(planes)))
    for block in blocks(stats):
        for _, (part, off) in _plane_parts(obj, block, every):
            yield Placed(off, part)


def bank_shares(obj, parts: int) -> list[tuple]:
    """Bank ``obj``'s pieces (one per expert, in row order) cut into at most ``parts`` runs of consecutive
    experts, equal in count within one, so that several workers write one bank at once: with 3 banks on 2
    workers no bank is left to one worker at the end (docs/io-speed.md §Write path). One share when the
    bank cannot be cut: a format encoded whole with one divisor for the whole bank."""
    pieces = tuple(obj.pieces)
    whole = codecs.codec_traits(obj.format).whole_object and not (1 < obj.divisors == len(pieces))
    n = 1 if whole else max(1, min(parts, len(pieces)))
    cuts = [len(pieces) * i // n for i in range(n + 1)]
    return [pieces[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def _plane_parts(obj, block, wanted: list[int]) -> Iterator[tuple[int, tuple[np.ndarray, int]]]:
    """``(plane index, (bytes, parent offset))`` of the wanted planes of one row block."""
    view = codecs.row_view(obj.format, obj.layout, obj.shape, block.r0, block.r1, obj.divisors)
    data = np.frombuffer(block.data, dtype=np.uint8) if isinstance(block.data, bytes | bytearray) \
        else np.asarray(block.data).reshape(-1).view(np.uint8)
    small = codecs.planes(obj.format, obj.layout, block.shape, block.divisors)
    for j in wanted:
        sp, (_, off, size) = small[j], view[j]
        if sp.size != size:
            raise ConversionError(f"{obj.id}: rows [{block.r0}, {block.r1}) of plane {sp.name} are {sp.size} bytes, "
                                  f"the parent's row view {size}", rule="plane_geometry")
        if j == 0 and getattr(block, "code_ranges", None) is not None:  # source file ranges (place_bank only)
            if sum(r.length for r in block.code_ranges) != size:
                raise ConversionError(f"{obj.id}: rows [{block.r0}, {block.r1}) do not match their source file "
                                      "ranges", rule="plane_geometry")
            for r in block.code_ranges:
                yield j, (r, off)
                off += r.length
            continue
        yield j, (data[sp.offset:sp.offset + sp.size], off)
