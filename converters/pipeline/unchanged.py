"""Pieces whose bytes the artifact stores exactly as the source file holds them (docs/io-speed.md §Unchanged bytes).

A ``transcode`` piece into a GGML passthrough format (``gguf_<type>``: the blocks as they are), or from
BF16 / F32 into ``bf16`` / ``fp32``, copies the source's bytes row for row (layout spec §6: the
transcode is a copy). When its columns stay in source order and its rows are one run of the source
tensor — or a few long runs — the writer copies those file ranges in the kernel
(:class:`~ninfer_core.container.filecopy.FileRange`) instead of mapping, copying and writing them
through Python buffers. Anything else (reordered columns, many short row runs, stacked sources, a
big-endian GGUF) keeps the vectorised copy of :meth:`converters.pipeline.produce.Producer.transcode_block`;
both give the same bytes.
"""

from __future__ import annotations

import numpy as np

from converters.pipeline.planned import Piece, PlannedTensor
from converters.sources.rows import TensorRows
from ninfer_core import codecs
from ninfer_core.container.filecopy import FileRange

#: (source type, target format) pairs whose exact transcode is a byte copy (besides ``gguf_*`` passthrough)
COPIED = {("BF16", "bf16"), ("F32", "fp32")}
#: a piece in several row runs shorter than this on average is gathered in user space (one vectorised copy
#: beats many calls); one run is always copied in the kernel
MIN_RUN_BYTES = 256 * 1024


def is_copy(source_type: str, fmt: str) -> bool:
    """Whether the exact transcode of ``source_type`` into ``fmt`` stores the source bytes unchanged."""
    traits = codecs.codec_traits(fmt)
    return (source_type, fmt) in COPIED or (traits.ggml_passthrough and traits.ggml_type == source_type)


def unchanged_ranges(obj: PlannedTensor, pc: Piece, rows) -> list[FileRange] | None:
    """The source file ranges that hold piece ``pc`` of ``obj`` byte for byte, in order, or None."""
    if pc.method != "transcode" or not isinstance(rows, TensorRows) or rows.big_endian:
        return None
    if not is_copy(pc.source_type, obj.format) or len(codecs.planes(obj.format, obj.layout, obj.shape,
                                                                      obj.divisors)) != 1:
        return None
    chain = pc.source.chain
    if (chain.columns is not None and pc.deferred_columns is None) or pc.column_groups is not None:
        return None  # columns move
    row_bytes = rows.storage.row_bytes
    if row_bytes is None or pc.rows == 0:
        return None
    ids = chain.row_ids(0, pc.rows)
    if isinstance(ids, slice):
        starts, lengths = np.array([ids.start]), np.array([ids.stop - ids.start])
    else:
        ids = np.asarray(ids, dtype=np.int64)
        cut = np.flatnonzero(np.diff(ids) != 1) + 1
        starts = ids[np.concatenate(([0], cut))]
        lengths = np.diff(np.concatenate(([0], cut, [len(ids)])))
    if len(lengths) > 1 and lengths.sum() * row_bytes < MIN_RUN_BYTES * len(lengths):
        return None
    t = rows.tensor
    if int((starts + lengths).max()) > rows.storage.rows or int(starts.min()) < 0:
        return None  # not rows of this tensor: let the mapped read report it
    return [FileRange(t.file, t.file_offset + int(s) * row_bytes, int(n) * row_bytes)
            for s, n in zip(starts, lengths, strict=True)]
