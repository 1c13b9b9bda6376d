"""NInfer v3 numeric formats and layouts: sizes, planes, row views, encoders, decoders, checks, transcoders.

Implements ``docs/format/layouts.md`` for the formats and layouts of container §6:

=========================  ===============================  =============================================
layout                     formats                          shapes (container §6.2)
=========================  ===============================  =============================================
``contiguous_le_v1``       bf16, fp32, int32                rank 0..16
``row_split_k128_v1``      q2/q4/q5/q6_g64_fp16,            rank 2 ``[N, K]``
                           q8_g32_fp16, t2_g128_fp16
``block_scale_k16_m128x4_v1``  nvfp4 (``divisors >= 1``)    ``N % 128 == 0``, ``K % 64 == 0``, divisors | N
``row_scale_v1``           fp8_e4m3fn_row_bf16              rank 2
``ggml_blocks_v1``         ``gguf_<type>`` (every GGML      rank 2, ``K % block_size == 0``
                           type gguf-py knows)
``raw_bytes_v1``           (resources; sized by the container)
=========================  ===============================  =============================================

Every function validates the combination first (:func:`validate_combination`) and raises
:class:`~ninfer_core.errors.EncodingError` with a ``rule`` (``unknown_format``, ``unknown_layout``,
``format_layout_mismatch``, ``shape_rank``, ``shape_dims``, ``nvfp4_shape``, ``nvfp4_divisors``,
``divisors_invalid``, ``divisors_not_allowed``, ``ggml_block_shape``, ``encoded_size_mismatch``, …).
Buffers may be ``bytes``, ``memoryview`` or any numpy array (``np.memmap`` included); they are read in
place, in row blocks, on a thread pool (:func:`set_threads`).
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

from ..errors import EncodingError
from ..findings import Finding
from . import contiguous, fp8_row, nvfp4, passthrough, row_split  # noqa: F401  (register the formats)
from .base import (
    ENCODERS,
    FORMATS,
    MAX_RANK,
    RAW_BYTES_ENCODING,
    Codec,
    Geometry,
    Plane,
    as_u8,
    element_count,
    fail,
    get_threads,
    set_threads,
)
from .ggml_types import GGMLType, candidates
from .ggml_types import resolve as resolve_ggml_type
from .traits import CodecTraits, all_traits, codec_traits, formats_with, passthrough_format
from .transcode import TRANSCODES, run_transcode

_ML_FLOATS = (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn)
TENSOR_LAYOUTS = frozenset(c.layout for c in FORMATS.values())
LAYOUTS = TENSOR_LAYOUTS | {RAW_BYTES_ENCODING}

__all__ = [
    "ENCODERS", "FORMATS", "LAYOUTS", "RAW_BYTES_ENCODING", "TENSOR_LAYOUTS", "TRANSCODES", "CodecTraits", "GGMLType",
    "Plane", "all_traits", "check", "codec_traits", "decode", "element_count", "encode", "encoded_size",
    "exact_targets", "formats_with", "get_threads", "is_known", "passthrough_format", "planes", "resolve_ggml_type",
    "row_view", "set_threads", "transcode_ggml", "validate_combination",
]


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        raise fail(f"shape must be a sequence of integers, got {shape!r}", "shape_dims", "container §5.1") from None
    if len(dims) > MAX_RANK:
        raise fail(f"shape rank {len(dims)} exceeds {MAX_RANK}", "shape_rank", "container §5.1")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d <= 0:
            raise fail(f"shape {list(dims)} has a dimension that is not a positive integer: {d!r}",
                       "shape_dims", "container §5.1")
    return tuple(int(d) for d in dims)


def _codec(fmt: str, layout: str, shape: Sequence[int], divisors: int) -> tuple[type[Codec], Geometry]:
    if layout == RAW_BYTES_ENCODING:
        raise fail(f"{RAW_BYTES_ENCODING} is a resource encoding, not a tensor layout (format {fmt!r})",
                   "format_layout_mismatch", "container §6.2")
    if layout not in TENSOR_LAYOUTS:
        raise fail(f"unknown layout {layout!r}", "unknown_layout", "container §6.2")
    codec = FORMATS.get(fmt)
    if codec is None:
        raise fail(f"unknown format {fmt!r}", "unknown_format", "container §6.1")
    if codec.layout != layout:
        raise fail(f"format {fmt!r} is stored in layout {codec.layout!r}, not {layout!r}",
                   "format_layout_mismatch", "container §6.2")
    dims = _shape(shape)
    if isinstance(divisors, bool) or not isinstance(divisors, int | np.integer) or divisors < 1:
        raise fail(f"divisors must be a positive integer, got {divisors!r}", "divisors_invalid", "container §5.1")
    if divisors != 1 and not codec.divisors_per_member:
        allowed = ", ".join(formats_with(divisors_per_member=True))
        raise fail(f"divisors = {divisors} is only allowed for {allowed}, not {fmt}", "divisors_not_allowed",
                   "container §5.1")
    return codec, codec.geometry(dims, int(divisors))


def validate_combination(format: str, layout: str, shape: Sequence[int], divisors: int = 1) -> None:
    """Raise EncodingError unless (format, layout, shape, divisors) is allowed by container §6.2."""
    _codec(format, layout, shape, divisors)


def is_known(format: str, layout: str) -> bool:
    """Whether ``format`` is a known tensor format stored in ``layout`` (shape not considered)."""
    codec = FORMATS.get(format)
    return codec is not None and codec.layout == layout


def encoded_size(format: str, layout: str, shape: Sequence[int], divisors: int = 1) -> int:
    """Exact encoded size in bytes (the object record's ``bytes``)."""
    return _codec(format, layout, shape, divisors)[1].nbytes


def planes(format: str, layout: str, shape: Sequence[int], divisors: int = 1) -> list[Plane]:
    """The planes of the object in order, with object-relative offsets and sizes."""
    return list(_codec(format, layout, shape, divisors)[1].planes)


def row_view(format: str, layout: str, shape: Sequence[int], r0: int, r1: int,
             divisors: int = 1) -> list[tuple[str, int, int]]:
    """``(plane name, object-relative offset, size)`` of the bytes each plane holds for rows ``[r0, r1)``
    (the zero-copy row view of container §7.3; rows are along axis 0)."""
    return [(p.name, *p.rows(r0, r1)) for p in _codec(format, layout, shape, divisors)[1].planes]


def _data(geom: Geometry, data, fmt: str) -> np.ndarray:
    buf = as_u8(data)
    if buf.size != geom.nbytes:
        raise fail(f"{fmt} {list(geom.shape)}: {buf.size} bytes given, the encoded size is {geom.nbytes}",
                   "encoded_size_mismatch", "container §5.3")
    return buf


def decode(format: str, layout: str, shape: Sequence[int], data, *, divisors: int = 1,
           rows: tuple[int, int] | None = None) -> np.ndarray:
    """Decode an encoded object to float32 in its logical shape (``rows=(r0, r1)``: only those rows,
    shape ``[r1 - r0, ...]``). Padding is never returned; codes are not validated (see :func:`check`)."""
    codec, geom = _codec(format, layout, shape, divisors)
    return codec.decode(geom, _data(geom, data, format), rows)


def encode(format: str, layout: str, array, *, encoder: str = "absmax", divisors: int = 1,
           as_array: bool = False, weights=None, decoded: np.ndarray | None = None) -> bytes | np.ndarray:
    """Encode ``array`` (its shape is the object's logical shape) with the named encoder. ``as_array``: the
    uint8 array the bytes were built in, without the ``bytes`` copy (docs/io-speed.md §Write path).
    ``weights``: importance per column ``(K,)`` or per element ``(N, K)`` — the ``mse`` search then minimises
    the weighted squared error (formats whose trait ``importance_weighted`` is true; docs/imatrix.md).
    ``decoded``: a C-contiguous float32 array of the logical shape that receives the values :func:`decode`
    of the result returns, made while encoding (docs/imatrix.md §Requantization speed); equal as numbers (a
    zero may be −0.0 where decode gives +0.0)."""
    x = np.asarray(array)
    if not (x.dtype.kind in "fiu" or x.dtype.type in _ML_FLOATS):
        raise fail(f"cannot encode an array of dtype {x.dtype} as {format}", "input_dtype")
    codec, geom = _codec(format, layout, x.shape, divisors)
    if encoder not in ENCODERS:
        raise fail(f"unknown encoder {encoder!r} (known: {', '.join(ENCODERS)})", "unknown_encoder")
    w = None
    if weights is not None:
        w = np.asarray(weights, dtype=np.float32)
        w = w.reshape(1, -1) if w.ndim == 1 else w.reshape(geom.n_rows, -1)
    if decoded is not None:
        if decoded.dtype != np.float32 or decoded.shape != geom.shape or not decoded.flags.c_contiguous:
            raise fail(f"decoded output must be a C-contiguous float32 array of shape {list(geom.shape)}, got "
                       f"{decoded.dtype} {list(decoded.shape)}", "decoded_shape")
        decoded = decoded.reshape(geom.n_rows, *geom.shape[1:])
    out = codec.encode(geom, x, encoder, w, decoded)
    return out if as_array else out.tobytes()


def check(format: str, layout: str, shape: Sequence[int], data, divisors: int = 1, *,
          json_path: str = "$") -> list[Finding]:
    """Validity findings for an encoded object: invalid codes, non-finite multipliers, bad divisors
    (ERROR); non-zero padding (WARNING). An impossible combination or a wrong length is one ERROR finding."""
    try:
        codec, geom = _codec(format, layout, shape, divisors)
        buf = _data(geom, data, format)
    except EncodingError as exc:
        return [Finding(exc.rule, "ERROR", json_path, exc.message, exc.section)]
    return codec.check(geom, buf, json_path)


def exact_targets(ggml_type: int | str) -> dict[str, str]:
    """The v3 formats a GGML type converts to exactly, with ``bit_exact``/``value_exact``."""
    out: dict[str, str] = {}
    for t in candidates(ggml_type):
        out.update({tgt: p.exactness for (src, tgt), p in TRANSCODES.items() if src == t.name})
    return out


def transcode_ggml(ggml_type: int | str, raw, shape: Sequence[int], target_format: str, *,
                   tensor: str | None = None, as_array: bool = False, inline: bool = False) -> bytes | np.ndarray:
    """Convert a GGML tensor's block bytes to ``target_format`` exactly (storage-layouts §6).

    ``ggml_type``: an id or a name (``"Q8_0"``, ``"TQ1_0"``, ``"PQ2_0"``, ``"Q2_0_G128"``…; id 42 or ``"Q2_0"``
    are resolved from the byte length). ``shape``: the logical shape ``[N, K]`` (any rank for bf16/fp32).
    ``as_array``: return the encoded bytes as the uint8 array they were built in instead of a ``bytes`` copy
    (the copy into fresh pages costs as much as the transcode itself; docs/io-speed.md §Write path).
    ``inline``: transcode every row in the calling thread instead of on the row-block pool — for a caller
    that runs its own workers, such as the converter (docs/io-speed.md §Write path).
    Raises EncodingError naming ``tensor`` and the block for anything the target cannot represent."""
    dims = _shape(shape)
    buf = as_u8(raw, "raw")
    t = resolve_ggml_type(ggml_type, element_count(dims), buf.size, tensor=tensor)
    path = TRANSCODES.get((t.name, target_format))
    if path is None:
        targets = ", ".join(sorted(tgt for (src, tgt) in TRANSCODES if src == t.name)) or "none"
        raise fail(f"no exact conversion from GGML {t.name} to {target_format} (exact targets: {targets})",
                   "no_exact_transcode", "storage-layouts §6", where=tensor)
    codec = FORMATS[target_format]
    _, geom = _codec(target_format, codec.layout, dims, 1)
    if codec.layout == contiguous.ContiguousCodec.layout:
        src = buf.reshape(geom.n_rows, -1)
    else:
        if len(dims) != 2 or dims[1] % t.block_size:
            raise fail(f"GGML {t.name} tensor of shape {list(dims)}: rows must be whole {t.block_size}-element blocks",
                       "ggml_block_shape", "storage-layouts §5", where=tensor)
        src = buf.reshape(dims[0], dims[1] // t.block_size, t.type_size)
    out = run_transcode(path, target_format, src, geom, tensor, inline=inline)
    return out if as_array else out.tobytes()

