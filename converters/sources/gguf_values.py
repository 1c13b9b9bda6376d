"""GGUF metadata values: the streaming reader used while parsing the header, and the full decoder.

GGUF spec ("GGUF file structure"): a value is a ``uint32`` type tag then the value; strings are a
``uint64`` byte length and UTF-8 bytes; arrays are an element type, a ``uint64`` count and the elements
(arrays of arrays allowed). docs/inspect.md §Facts and queries adds: arrays keep their element type, count and at most eight
preview elements with an explicit ``preview_complete``; nesting is limited to 32 levels.

Values ggml loads are reported, not refused (docs/inspect.md §Non-canonical metadata values): a string
value that is not UTF-8 is kept as its exact bytes (:class:`NonUTF8String`), a BOOL byte other than 0/1 is
true, as ggml reads it (:class:`NonCanonicalBool` keeps the byte); each is noted on the entry's
:class:`ValueNotes`. Keys and tensor names are identifiers and stay strict UTF-8.

The parse only keeps previews (charged to the retained budget before a string is expanded); the full
value of a key (e.g. the 150k-entry ``tokenizer.ggml.tokens``) is decoded on request from the memory-mapped
header by :func:`decode_full`, vectorized for numeric arrays.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class NonUTF8String:
    """A string value whose bytes are not valid UTF-8, kept exactly (ggml reads strings as bytes).

    ``error_at`` is the offset of the first invalid byte, ``reason`` the decoder's word for it."""

    raw: bytes
    error_at: int
    reason: str

    @classmethod
    def check(cls, raw: bytes) -> str | NonUTF8String:
        """``raw`` decoded, or a :class:`NonUTF8String` when it is not UTF-8."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return cls(bytes(raw), exc.start, exc.reason)


@dataclass(frozen=True)
class NonCanonicalBool:
    """A BOOL byte other than 0 or 1: true, as ggml reads it (non-zero), with the byte kept."""

    raw: int

    def __bool__(self) -> bool:
        return True


NOT_UTF8 = "string_not_utf8"
BOOL_NOT_CANONICAL = "bool_not_canonical"


@dataclass
class ValueNotes:
    """Non-canonical values met while reading one metadata value: per code, how many and the first one
    (``element`` is its index path below the value, ``""`` for a scalar; ``byte`` the first invalid byte
    of a string, ``raw_byte`` a bool's byte). Bounded: one record per code, whatever the array length."""

    found: dict = field(default_factory=dict)

    def note(self, code: str, element: str, **detail) -> None:
        rec = self.found.get(code)
        if rec is None:
            self.found[code] = {"code": code, "count": 1, "first": {"element": element, **detail}}
        else:
            rec["count"] += 1

    def note_many(self, code: str, count: int, element: str, **detail) -> None:
        if count:
            self.note(code, element, **detail)
            self.found[code]["count"] += count - 1


def _bad(msg: str, reader, what: str, rule: str) -> SourceFormatError:
    return SourceFormatError(msg, file=str(reader.f.path), json_path=what, rule=rule, section="GGUF spec")


def read_string(reader, what: str, *, keep: bool, budget=None, tail: int = 0, notes: ValueNotes | None = None,
                element: str = "") -> str | NonUTF8String | None:
    """Read a GGUF string; return it decoded when ``keep`` (charged to ``budget`` first), else skip.

    Without ``notes`` (keys, tensor names) invalid UTF-8 is refused; with ``notes`` (metadata values) it is
    kept as a :class:`NonUTF8String` and noted."""
    n = reader.u64(f"{what} length")
    reader.promise(reader.pos + n + tail)
    if n > reader.cap:
        raise _bad(f"string length {n} exceeds the header cap", reader, what, "header_cap")
    if n > reader.f.size - reader.pos:
        raise _bad(f"string of {n} bytes runs past the end of the file", reader, what, "truncated")
    if keep and budget is not None:
        budget.charge(n, what)
    raw = reader.take(n, what)  # checked even when not kept: Source.metadata decodes it later
    value = NonUTF8String.check(raw)
    if isinstance(value, NonUTF8String):
        if notes is None:
            raise _bad(f"string is not valid UTF-8 ({value.reason} at byte {value.error_at})", reader, what,
                       "gguf_string_utf8")
        notes.note(NOT_UTF8, element, byte=value.error_at)
        if keep and budget is not None:
            budget.charge(n, what)  # the hex form is twice the bytes
    return value if keep else None


def _read_scalar(reader, vtype: int, what: str, notes: ValueNotes, element: str) -> Any:
    code, _ = SCALAR_FORMATS[vtype]
    (v,) = reader.unpack(code, what)
    if vtype == GGUFValueType.BOOL:
        if v > 1:
            notes.note(BOOL_NOT_CANONICAL, element, raw_byte=v)
            return NonCanonicalBool(v)
        return bool(v)
    return v


def check_value_type(reader, vtype: int, what: str) -> None:
    if vtype not in MIN_VALUE_BYTES:
        raise _bad(f"unknown value type {vtype}", reader, what, "gguf_value_type")


def read_value(reader, vtype: int, what: str, *, budget, tail: int, notes: ValueNotes, depth: int = 0,
               keep: bool = True, element: str = ""):
    """Read one value at the reader's position: a scalar/string (kept when ``keep``) or an
    :class:`ArrayPreview`. ``tail`` is the minimum number of header bytes that follow this value;
    non-canonical values are recorded on ``notes`` (``element`` is the index path of this value)."""
    check_value_type(reader, vtype, what)
    if vtype == GGUFValueType.STRING:
        return read_string(reader, what, keep=keep, budget=budget, tail=tail, notes=notes, element=element)
    if vtype != GGUFValueType.ARRAY:
        return _read_scalar(reader, vtype, what, notes, element)
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
        preview.append(read_value(reader, etype, f"{what}[{i}]", budget=budget, tail=rest, notes=notes,
                                  depth=depth + 1, keep=etype != GGUFValueType.ARRAY or depth == 0,
                                  element=f"{element}[{i}]"))
    remaining = count - n_prev
    if remaining:
        if etype in SCALAR_FORMATS:
            size = SCALAR_FORMATS[etype][1]
            if etype == GGUFValueType.BOOL:
                raw = np.frombuffer(reader.take(remaining * size, what), dtype=np.uint8)
                odd = raw > 1
                if odd.any():
                    first = int(np.argmax(odd))
                    notes.note_many(BOOL_NOT_CANONICAL, int(odd.sum()), f"{element}[{n_prev + first}]",
                                    raw_byte=int(raw[first]))
            else:
                reader.skip(remaining * size, what)
        elif etype == GGUFValueType.STRING:
            _skip_strings(reader, remaining, what, tail, notes, element, n_prev)
        else:
            for i in range(n_prev, count):
                rest = (count - i - 1) * min_elem + tail
                read_value(reader, etype, f"{what}[{i}]", budget=None, tail=rest, notes=notes, depth=depth + 1,
                           keep=False, element=f"{element}[{i}]")
    complete = len(preview) == count and all(
        not isinstance(p, ArrayPreview) or p.preview_complete for p in preview)
    return ArrayPreview(etype, count, preview, preview_complete=complete)


def _skip_strings(reader, count: int, what: str, tail: int, notes: ValueNotes, element: str, first: int) -> None:
    """Skip ``count`` strings (each still read and hashed), noting those that are not UTF-8 (elements
    ``first``, ``first + 1``, … of the array at ``element``)."""
    size = 8
    for i in range(count):
        (n,) = reader.unpack("Q", what)
        if n > reader.cap:
            raise _bad(f"element {i}: string length {n} exceeds the header cap", reader, what, "header_cap")
        reader.promise(reader.pos + n + (count - i - 1) * size + tail)
        raw = reader.take(n, what)
        if not raw.isascii():
            value = NonUTF8String.check(raw)
            if isinstance(value, NonUTF8String):
                notes.note(NOT_UTF8, f"{element}[{first + i}]", byte=value.error_at)


# -- full decoding from memory (Source.metadata) --------------------------------------------------


def decode_full(buf, pos: int, vtype: int, order: str, depth: int = 0) -> tuple[Any, int]:
    """Decode the value of type ``vtype`` at ``buf[pos:]`` completely; returns ``(value, end)``.

    The header parse already validated this byte range, so this only converts it. Strings that are not
    UTF-8 come back as :class:`NonUTF8String`; BOOL bytes as ``bool`` (non-zero is true, as in ggml).
    """
    if vtype in SCALAR_FORMATS:
        code, size = SCALAR_FORMATS[vtype]
        (v,) = struct.unpack_from(order + code, buf, pos)
        return (bool(v) if vtype == GGUFValueType.BOOL else v), pos + size
    if vtype == GGUFValueType.STRING:
        (n,) = struct.unpack_from(order + "Q", buf, pos)
        return NonUTF8String.check(bytes(buf[pos + 8:pos + 8 + n])), pos + 8 + n
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
            out.append(NonUTF8String.check(bytes(buf[pos + 8:pos + 8 + n])))
            pos += 8 + n
        return out, pos
    for _ in range(count):
        v, pos = decode_full(buf, pos, etype, order, depth + 1)
        out.append(v)
    return out, pos
