"""Numeric helpers shared by the prequantized conventions (docs/prequantized.md §Value relations).

- :func:`component_rows`: rows ``[r0, r1)`` of a component tensor, memory-mapped per read (never the whole
  file; the map goes with the array, as in :mod:`converters.sources.rows`); a read of at most
  :data:`SMALL_READ` bytes (the per-module scalars, channel scales, a row block's NVFP4 block scales) is a
  ``pread`` instead: the first touch of a map makes the kernel read around the page (the device's read-ahead
  window, 8 MiB on the benchmark VM), so the 560 scalars of a 4 GiB NVFP4 checkpoint read through maps cost
  1.8 s from a cold page cache and 0.14 s read, and making a map costs more than reading a few hundred KiB
  (docs/io-speed.md §Prequantized bench);
- :func:`to_dtype` / :func:`torch_op`: the rounding the libraries do, in numpy — an elementwise op of two
  ``bfloat16`` / ``float16`` operands is computed in float32 and rounded once to the operands' dtype
  (round to nearest even), float32 ops are IEEE float32 ops;
- :func:`ulp_distance`: the distance the exactness table states (docs/prequantized.md §Ulp distance).
"""

from __future__ import annotations

from collections.abc import Iterator

import ml_dtypes
import numpy as np

from converters.errors import SourceError, SourceFormatError
from converters.sources.rows import read_tensor_bytes

#: component reads of at most this many bytes use ``pread``, not a memory map (component_rows)
SMALL_READ = 1024 * 1024

SECTION = "docs/prequantized.md §Component tensors"

#: safetensors dtype → numpy dtype of the component tensors this package reads
NP_DTYPES = {
    "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "I32": np.dtype("<i4"), "I64": np.dtype("<i8"), "F64": np.dtype("<f8"), "F8_E8M0": np.dtype("u1"),
}
#: library output dtypes by name (float32 widening is exact for each)
OUT_DTYPES = {"float32": np.dtype("<f4"), "bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype("<f2")}
ST_TO_OUT = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
E2M1 = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
E4M3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


def component_rows(t, r0: int, r1: int) -> np.ndarray:
    """Rows ``[r0, r1)`` (along axis 0) of component tensor ``t``, a mapped view in its numpy dtype; a rank-0
    tensor is returned whole as shape ``(1,)``."""
    dt = _dtype(t)
    shape = tuple(t.shape) or (1,)
    row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    r0, r1 = max(0, r0), min(shape[0], r1)
    if r1 <= r0 or row == 0:
        return np.zeros((0, *shape[1:]), dtype=dt)
    if (r1 - r0) * row * dt.itemsize <= SMALL_READ:
        return _read_small(t, dt, r0 * row * dt.itemsize, (r1 - r0) * row).reshape(r1 - r0, *shape[1:])
    try:
        mm = np.memmap(t.file, dtype=dt, mode="r", offset=t.file_offset + r0 * row * dt.itemsize,
                       shape=((r1 - r0) * row,))
    except (OSError, ValueError) as exc:
        raise SourceError(f"{t.name}: cannot map rows [{r0}, {r1}): {exc}", file=str(t.file), json_path=t.name,
                          code="execution_failure", category="io_error", rule="read_tensor") from None
    return mm.reshape(r1 - r0, *shape[1:])


def _dtype(t) -> np.dtype:
    dt = NP_DTYPES.get(t.dtype)
    if dt is None:
        raise SourceFormatError(f"{t.name}: dtype {t.dtype} is not one a quantized component can have",
                                file=str(t.file), json_path=f"{t.name}.dtype", rule="prequantized_component_dtype",
                                section=SECTION)
    return dt


def _read_small(t, dt: np.dtype, at: int, count: int) -> np.ndarray:
    """``count`` elements of ``t`` from byte ``at`` of its data, read with ``pread`` (module docstring)."""
    return read_tensor_bytes(t, at, np.empty(count * dt.itemsize, dtype=np.uint8)).view(dt)


def component_bytes(t, size: int = 16 << 20) -> Iterator[np.ndarray]:
    """The bytes of component tensor ``t`` in order, in pieces of at most ``size`` read with ``pread`` into one
    reused buffer (valid until the next piece): a scan of a whole tensor reads it sequentially, where its
    memory map would read around each first-touched page instead."""
    total = int(np.prod(tuple(t.shape), dtype=np.int64)) * _dtype(t).itemsize
    if total == 0:
        return
    buf = np.empty(min(size, total), dtype=np.uint8)
    for at in range(0, total, buf.size):
        yield read_tensor_bytes(t, at, buf[:min(buf.size, total - at)])


def as_f32(a) -> np.ndarray:
    """``a`` widened to float32 (exact for bfloat16, float16, E4M3 and integers; bfloat16 by a bit shift)."""
    a = np.asarray(a)
    if a.dtype == OUT_DTYPES["bfloat16"]:
        return (a.view("<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.asarray(a, dtype=np.float32)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 ``x`` rounded once to ``dtype`` (nearest even; NaN stays NaN), returned as float32 values."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float32":
        return x
    if dtype == "float16":
        with np.errstate(over="ignore", invalid="ignore"):  # beyond 65504: infinity, as the libraries give
            return x.astype(np.float16).astype(np.float32)
    u = x.view(np.uint32)
    r = np.right_shift(u, np.uint32(16))  # u + 0x7FFF + (bit 16 of u), then cut: nearest even
    r &= np.uint32(1)
    r += np.uint32(0x7FFF)
    r += u
    r &= np.uint32(0xFFFF0000)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = (u[nan] | np.uint32(0x00400000)) & np.uint32(0xFFFF0000)
    return r.view(np.float32)


def torch_op(a: np.ndarray, b: np.ndarray, op: str, dtype: str) -> np.ndarray:
    """``a op b`` as the libraries compute it in ``dtype`` (a name of :data:`OUT_DTYPES`): operands rounded to
    ``dtype``, computed in float32, rounded once to ``dtype`` (a float32 op for float32). Returns the float32
    values."""
    fa, fb = round_to(as_f32(a), dtype), round_to(as_f32(b), dtype)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # IEEE results, as the libraries get
        r = {"mul": np.multiply, "div": np.divide, "sub": np.subtract}[op](fa, fb, dtype=np.float32)
    return round_to(r, dtype)


def promote(a: str, b: str) -> str:
    """torch's type promotion of two float dtype names of dimensioned tensors (``float16`` with ``bfloat16``
    gives ``float32``)."""
    if a == b:
        return a
    return "float32"


#: the distance reported when one side is NaN and the other is not
NAN_MISMATCH = 1 << 30


def _ordinal(x: np.ndarray) -> np.ndarray:
    """Monotone integer of each value's bit pattern (``-0.0`` and ``+0.0`` both 0)."""
    bits = x.view(f"<i{x.dtype.itemsize}").astype(np.int64)
    mag = bits & ((1 << (8 * x.dtype.itemsize - 1)) - 1)
    return np.where(bits < 0, -mag, mag)


def ulp_distance(v3: np.ndarray, library: np.ndarray, dtype: str) -> int:
    """Largest distance, in units in the last place of ``dtype`` (the library's output dtype), between the
    v3 values rounded once to ``dtype`` and the library's values (docs/prequantized.md §Ulp distance).
    0 means: the library's value is the v3 value rounded to the library's dtype."""
    dt = OUT_DTYPES[dtype]
    a = np.asarray(v3, dtype=np.float32).astype(dt)
    b = np.asarray(library, dtype=np.float32).astype(dt)
    if a.size == 0:
        return 0
    na, nb = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    if (na != nb).any():
        return NAN_MISMATCH
    d = np.abs(_ordinal(a) - _ordinal(b))
    return int(np.where(na, 0, d).max())
