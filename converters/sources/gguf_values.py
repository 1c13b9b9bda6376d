"""GGUF metadata values: the streaming reader used while parsing the header, and the full decoder.

GGUF spec ("GGUF file structure"): a value is a ``uint32`` type tag then the value; strings are a
``uint64`` byte length and UTF-8 bytes; arrays are an element type, a ``uint64`` count and the elements
(arrays of arrays allowed). docs/inspect.md §Facts and queries adds: arrays keep their element type, count and at most eight
preview elements with an explicit ``preview_complete``; nesting is limited to 32 levels; strings must be
UTF-8. Booleans other than 0/1 are rejected (ggml's ``gguf_type_size`` reads them as ``int8``; we are
stricter because a flag that is neither is not a boolean).

The parse only keeps previews (charged to the retained budget before a string is expanded); the full
value of a key (e.g. the 150k-entry ``tokenizer.ggml.tokens``) is decoded on request from the memory-mapped
header by :func:`decode_full`, vectorized for numeric arrays.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from gguf.constants import GGUFValueType

from converters.errors import SourceFormatError
from converters.sources.limits import MAX_NESTING

# fixed-size scalar types: struct code, byte size
SCALAR_FORMATS: dict[int, tuple[str, int]] = {
    GGUFValueType.UINT8: ("B", 1),
    GGUFValueType.INT8: ("b", 1),
    GGUFValueType.UINT16: ("H", 2),
    GGUFValueType.INT16: ("h", 2),
    GGUFValueType.UINT32: ("I", 4),
    GGUFValueType.INT32: ("i", 4),
    GGUFValueType.FLOAT32: ("f", 4),
    GGUFValueType.BOOL: ("B", 1),
    GGUFValueType.UINT64: ("Q", 8),
    GGUFValueType.INT64: ("q", 8),
    GGUFValueType.FLOAT64: ("d", 8),
}
NUMPY_CODES = {GGUFValueType.UINT8: "u1", GGUFValueType.INT8: "i1", GGUFValueType.UINT16: "u2",
               GGUFValueType.INT16: "i2", GGUFValueType.UINT32: "u4", GGUFValueType.INT32: "i4",
               GGUFValueType.FLOAT32: "f4", GGUFValueType.UINT64: "u8", GGUFValueType.INT64: "i8",
               GGUFValueType.FLOAT64: "f8", GGUFValueType.BOOL: "u1"}
PREVIEW = 8
MIN_VALUE_BYTES = {**{t: s for t, (_, s) in SCALAR_FORMATS.items()},
                   GGUFValueType.STRING: 8, GGUFValueType.ARRAY: 12}


def type_name(vtype: int) -> str:
    return GGUFValueType(vtype).name


@dataclass
class ArrayPreview:
    """An array value as the header parse keeps it (docs/inspect.md §Facts and queries: element type, count, ≤ 8 elements)."""

    element_type: int
    count: int
    preview: list
    preview_complete: bool


def _bad(msg: str, reader, what: str, rule: str) -> SourceFormatError:
    return SourceFormatError(msg, file=str(reader.f.path), json_path=what, rule=rule, section="GGUF spec")


def read_string(reader, what: str, *, keep: bool, budget=None, tail: int = 0) -> str | None:
    """Read a GGUF string; return it decoded when ``keep`` (charged to ``budget`` first), else skip."""
    n = reader.u64(f"{what} length")
    reader.promise(reader.pos + n + tail)
    if n > reader.cap:
        raise _bad(f"string length {n} exceeds the header cap", reader, what, "header_cap")
    if n > reader.f.size - reader.pos:
        raise _bad(f"string of {n} bytes runs past the end of the file", reader, what, "truncated")
    if keep and budget is not None:
        budget.charge(n, what)
    raw = reader.take(n, what)  # checked even when not kept: Source.metadata decodes it later
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"string is not valid UTF-8 ({exc.reason} at byte {exc.start})", reader, what,
                   "gguf_string_utf8") from None
    return value if keep else None


def _read_scalar(reader, vtype: int, what: str) -> Any:
    code, _ = SCALAR_FORMATS[vtype]
    (v,) = reader.unpack(code, what)
    if vtype == GGUFValueType.BOOL:
        if v > 1:
            raise _bad(f"boolean byte is {v}, not 0 or 1", reader, what, "gguf_bool")
        return bool(v)
    return v


def check_value_type(reader, vtype: int, what: str) -> None:
    if vtype not in MIN_VALUE_BYTES:
        raise _bad(f"unknown value type {vtype}", reader, what, "gguf_value_type")


def read_value(reader, vtype: int, what: str, *, budget, tail: int, depth: int = 0, keep: bool = True):
    """Read one value at the reader's position: a scalar/string (kept when ``keep``) or an
    :class:`ArrayPreview`. ``tail`` is the minimum number of header bytes that follow this value."""
    check_value_type(reader, vtype, what)
    if vtype == GGUFValueType.STRING:
        return read_string(reader, what, keep=keep, budget=budget, tail=tail)
    if vtype != GGUFValueType.ARRAY:
        return _read_scalar(reader, vtype, what)
    if depth >= MAX_NESTING:
        raise _bad(f"array nesting deeper than {MAX_NESTING} levels", reader, what, "gguf_array_nesting")
    etype = reader.u32(f"{what} element type")
    check_value_type(reader, etype, f"{what} element type")
    count = reader.u64(f"{what} count")
    min_elem = MIN_VALUE_BYTES[etype]
    if count * min_elem > reader.cap:
        raise _bad(f"array of {count} {type_name(etype)} cannot fit in the header cap", reader, what,
                   "header_cap")
    if count * min_elem > reader.f.size - reader.pos:
        raise _bad(f"array of {count} {type_name(etype)} runs past the end of the file", reader, what, "truncated")
    reader.promise(reader.pos + count * min_elem + tail)
    preview = []
    n_prev = min(count, PREVIEW) if keep else 0
    for i in range(n_prev):
        rest = (count - i - 1) * min_elem + tail
        # nested arrays keep their own preview only one level down (bounds the preview at 8 x 8)
        preview.append(read_value(reader, etype, f"{what}[{i}]", budget=budget, tail=rest,
                                  depth=depth + 1, keep=etype != GGUFValueType.ARRAY or depth == 0))
    remaining = count - n_prev
    if remaining:
        if etype in SCALAR_FORMATS:
            size = SCALAR_FORMATS[etype][1]
            if etype == GGUFValueType.BOOL:
                raw = reader.take(remaining * size, what)
                if raw and max(raw) > 1:
                    raise _bad("boolean element is neither 0 nor 1", reader, what, "gguf_bool")
            else:
                reader.skip(remaining * size, what)
        elif etype == GGUFValueType.STRING:
            _skip_strings(reader, remaining, what, tail)
        else:
            for i in range(n_prev, count):
                rest = (count - i - 1) * min_elem + tail
                read_value(reader, etype, f"{what}[{i}]", budget=None, tail=rest, depth=depth + 1, keep=False)
    complete = len(preview) == count and all(
        not isinstance(p, ArrayPreview) or p.preview_complete for p in preview)
    return ArrayPreview(etype, count, preview, preview_complete=complete)


def _skip_strings(reader, count: int, what: str, tail: int) -> None:
    """Skip ``count`` strings (each still read and hashed); UTF-8 is checked by :func:`decode_full`
    only when the value is requested, and here on the skipped bytes in bulk."""
    size = 8
    for i in range(count):
        (n,) = reader.unpack("Q", what)
        if n > reader.cap:
            raise _bad(f"element {i}: string length {n} exceeds the header cap", reader, what, "header_cap")
        reader.promise(reader.pos + n + (count - i - 1) * size + tail)
        raw = reader.take(n, what)
        if not raw.isascii():
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _bad(f"element {i} is not valid UTF-8", reader, what, "gguf_string_utf8") from None


# -- full decoding from memory (Source.metadata) --------------------------------------------------


def decode_full(buf, pos: int, vtype: int, order: str, depth: int = 0) -> tuple[Any, int]:
    """Decode the value of type ``vtype`` at ``buf[pos:]`` completely; returns ``(value, end)``.

    The header parse already validated this byte range, so this only converts it.
    """
    if vtype in SCALAR_FORMATS:
        code, size = SCALAR_FORMATS[vtype]
        (v,) = struct.unpack_from(order + code, buf, pos)
        return (bool(v) if vtype == GGUFValueType.BOOL else v), pos + size
    if vtype == GGUFValueType.STRING:
        (n,) = struct.unpack_from(order + "Q", buf, pos)
        return bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8"), pos + 8 + n
    etype, count = struct.unpack_from(order + "IQ", buf, pos)
    pos += 12
    if etype in NUMPY_CODES:
        dt = np.dtype(order + NUMPY_CODES[etype])
        arr = np.frombuffer(buf, dtype=dt, count=count, offset=pos)
        values = arr.astype(bool).tolist() if etype == GGUFValueType.BOOL else arr.tolist()
        return values, pos + count * dt.itemsize
    out = []
    if etype == GGUFValueType.STRING:
        unpack = struct.Struct(order + "Q").unpack_from
        for _ in range(count):
            (n,) = unpack(buf, pos)
            out.append(bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8"))
            pos += 8 + n
        return out, pos
    for _ in range(count):
        v, pos = decode_full(buf, pos, etype, order, depth + 1)
        out.append(v)
    return out, pos
