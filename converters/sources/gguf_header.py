"""Strict, bounded parser of a GGUF header: version and byte order, typed metadata, tensor directory,
data offset and the byte range of every tensor.

Why not ``gguf.GGUFReader``: it parses eagerly into one numpy view per array element (≈300k arrays for a
150k vocabulary), fails on truncation with numpy reshape messages, multiplies dims in ``uint64`` and does
not bound ``n_dims``. This parser reads through :class:`HeaderReader` (never past
the header, hashing as it goes), bounds every count against the bytes left before allocating, uses
Python ints for every size, and raises :class:`SourceFormatError` naming the field and the rule.

Rules (GGUF spec; llama.cpp ``gguf.cpp``; docs/inspect.md §Facts and queries, §Boundaries):

- magic ``GGUF``; little-endian v2/v3 and big-endian v3 accepted; big-endian v2 rejected; any other
  version rejected with its four bytes, both ``uint32`` readings and "byte order unknown" (never a
  big-endian guess from an unrecognised little-endian value);
- keys: UTF-8, unique, lower-case ASCII alphanumeric components separated by ``.``, ``_`` or ``-``
  (hyphens as written by llama.cpp v0.7.0's ``gpt-oss.*`` and ``wavtokenizer-dec.*`` keys);
- metadata values: read exactly; a string that is not UTF-8 or a BOOL byte other than 0/1 is kept and
  noted (``MetaEntry.notes``), not refused, because ggml loads it (docs/inspect.md §Non-canonical
  metadata values);
- ``general.alignment``: ``UINT32``, a positive multiple of 8 (not necessarily a power of two), default 32;
  1, 2 and 4, which ggml accepts (any power of two), are accepted and noted (``alignment_below_spec``);
- tensors: unique non-empty UTF-8 names shorter than 64 bytes (ggml's ``GGML_MAX_NAME``), at most 4 dims,
  element count within ``INT64_MAX`` unless the tensor is empty, a known byte length within ``INT64_MAX``,
  the first dim holding whole blocks of the type, relative offsets multiples of the alignment, known byte
  ranges inside the file and not overlapping the next tensor;
- data offset: the directory end aligned up; a file ending exactly at the directory end has its data
  offset there; a file ending inside the alignment gap (a *partial* gap) is rejected;
- ``allow_meta_only``: a file that ends exactly at its aligned data offset although it declares tensor
  bytes is what ggml writes with ``only_meta`` (docs/inspect.md §Metadata-only files); when allowed
  (inspection) its directory is checked without the file-end bounds and ``data_present`` is false;
  otherwise (the converters, which read tensors) it is refused as before (``gguf_tensor_range``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gguf.constants import GGUFValueType

from converters.errors import SourceFormatError
from converters.sources.fileio import HeaderReader, OpenFile
from converters.sources.gguf_types import GGMLType, byte_length, ggml_type, resolve_q2_0
from converters.sources.gguf_values import (
    MIN_VALUE_BYTES,
    ValueNotes,
    check_value_type,
    read_string,
    read_value,
)
from converters.sources.limits import ENTRY_COST, GGUF_MAX_DIMS, I64_MAX, ROW_COST, RetainedBudget

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
KEY_RE = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*\Z")
MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, one key byte, value type, smallest value
MIN_TENSOR_INFO_BYTES = 8 + 1 + 4 + 4 + 8  # name length, one name byte, n_dims, type, offset
SECTION = "GGUF spec / docs/inspect.md §Facts and queries"
GGML_MAX_NAME = 64  # ggml's tensor name buffer, NUL included: names are at most 63 bytes
SPEC_ALIGNMENT_MULTIPLE = 8
BELOW_SPEC_ALIGNMENTS = (1, 2, 4)  # powers of two ggml accepts that the GGUF spec's "multiple of 8" does not


@dataclass
class MetaEntry:
    """One metadata key/value: scalars complete, arrays as ``gguf_values.ArrayPreview``."""

    index: int
    key: str
    vtype: int
    value: Any
    value_offset: int  # file offset of the value (after its type tag)
    value_end: int
    notes: ValueNotes = field(default_factory=ValueNotes)


@dataclass
class TensorInfo:
    """One tensor directory row and what the header fixes about its storage."""

    index: int
    name: str
    dims: tuple[int, ...]  # GGUF order, fastest first
    type_id: int
    gtype: GGMLType
    rel_offset: int
    elements: int
    file_offset: int = 0
    byte_length: int | None = None
    block: tuple[int, int] | None = None
    type_name: str = ""
    storage_validation: str = "unknown"
    data_range: int | None = None  # bytes from the start to the next tensor's start or the file end
    q2_0_reason: str | None = None

    @property
    def ne0(self) -> int:
        return self.dims[0] if self.dims else 1


@dataclass
class GGUFHeader:
    version: int
    byte_order: str  # "little" | "big"
    file_size: int
    metadata: list[MetaEntry] = field(default_factory=list)
    tensors: list[TensorInfo] = field(default_factory=list)
    alignment: int = DEFAULT_ALIGNMENT
    alignment_source: str = "default"
    header_length: int = 0
    data_offset: int = 0
    header_sha256: str = ""
    bytes_read: int = 0
    ranges_read: list = field(default_factory=list)
    retained_bytes: int = 0
    hasher: Any = None  # SHA-256 state after the header bytes (a full-file hash continues from it)
    data_present: bool = True  # False: a metadata-only file (ggml only_meta), tensor bytes declared, none held

    @property
    def struct_order(self) -> str:
        return "<" if self.byte_order == "little" else ">"


def _reject(f: OpenFile, what: str, msg: str, rule: str) -> SourceFormatError:
    return SourceFormatError(msg, file=str(f.path), json_path=what, rule=rule, section=SECTION)


def _read_version(f: OpenFile, reader: HeaderReader) -> tuple[int, str]:
    magic = reader.take(4, "magic")
    if magic != MAGIC:
        raise _reject(f, "magic", f"expected 47 47 55 46 ('GGUF'), found {magic.hex(' ')}", "gguf_magic")
    raw = reader.take(4, "version")
    le, be = int.from_bytes(raw, "little"), int.from_bytes(raw, "big")
    if le in (2, 3):
        return le, "little"
    if be == 3:
        return 3, "big"
    if be == 2:
        raise _reject(f, "version", "big-endian GGUF v2 is not supported (bytes 00 00 00 02)",
                      "gguf_big_endian_v2")
    raise _reject(f, "version", f"unsupported GGUF version: bytes {raw.hex(' ')}, uint32 little-endian {le}, "
                  f"uint32 big-endian {be}; byte order unknown", "gguf_version")


def parse_gguf(f: OpenFile, *, budget: RetainedBudget | None = None, allow_meta_only: bool = False) -> GGUFHeader:
    """Parse and validate the header of the open GGUF file ``f`` (reads exactly the header bytes);
    ``allow_meta_only`` accepts a metadata-only file (see the module docstring)."""
    budget = budget or RetainedBudget(str(f.path))
    reader = HeaderReader(f)
    reader.promise(24)
    version, order = _read_version(f, reader)
    reader.order = "<" if order == "little" else ">"
    n_tensors = reader.u64("tensor_count")
    n_kv = reader.u64("metadata_kv_count")
    room = min(f.size, reader.cap) - reader.pos
    if n_kv * MIN_KV_BYTES + n_tensors * MIN_TENSOR_INFO_BYTES > room:
        raise _reject(f, "tensor_count/metadata_kv_count",
                      f"{n_tensors} tensors and {n_kv} metadata entries cannot fit in the {room} bytes "
                      "left in the file and header cap", "gguf_count_bound")
    budget.charge(n_kv * ENTRY_COST + n_tensors * ROW_COST, "metadata and tensor rows")
    tensors_tail = n_tensors * MIN_TENSOR_INFO_BYTES
    reader.promise(reader.pos + n_kv * MIN_KV_BYTES + tensors_tail)
    hdr = GGUFHeader(version=version, byte_order=order, file_size=f.size)

    seen: set[str] = set()
    for i in range(n_kv):
        tail = (n_kv - i - 1) * MIN_KV_BYTES + tensors_tail
        what = f"metadata[{i}]"
        key = read_string(reader, f"{what}.key", keep=True, budget=budget, tail=4 + 1 + tail)
        if not KEY_RE.match(key):
            raise _reject(f, f"{what}.key", f"key {key!r} is not lower-case ASCII alphanumeric components "
                          "separated by '.', '_' or '-'", "gguf_key_spelling")
        if key in seen:
            raise _reject(f, f"{what}.key", f"duplicate key {key!r}", "gguf_duplicate_key")
        seen.add(key)
        vtype = reader.u32(f"{key} value type")
        check_value_type(reader, vtype, key)
        reader.promise(reader.pos + MIN_VALUE_BYTES[vtype] + tail)
        start = reader.pos
        notes = ValueNotes()
        value = read_value(reader, vtype, key, budget=budget, tail=tail, notes=notes)
        hdr.metadata.append(MetaEntry(i, key, vtype, value, start, reader.pos, notes))
        if key == ALIGNMENT_KEY:
            if vtype != GGUFValueType.UINT32:
                raise _reject(f, key, f"must be UINT32, is {GGUFValueType(vtype).name}", "gguf_alignment_type")
            if (value <= 0 or value % SPEC_ALIGNMENT_MULTIPLE) and value not in BELOW_SPEC_ALIGNMENTS:
                raise _reject(f, key, f"alignment {value} is not a positive multiple of 8 (nor 1, 2 or 4, "
                              "the smaller powers of two ggml accepts)", "gguf_alignment")
            hdr.alignment, hdr.alignment_source = value, "metadata"

    names: set[str] = set()
    for i in range(n_tensors):
        hdr.tensors.append(_read_tensor_info(f, reader, hdr, i, n_tensors, names, budget))

    hdr.header_length = reader.pos
    hdr.header_sha256 = reader.hasher.hexdigest()
    hdr.hasher = reader.hasher
    hdr.bytes_read = reader.bytes_read
    hdr.ranges_read = reader.ranges_read()
    hdr.retained_bytes = budget.used
    _place_data(f, hdr, allow_meta_only)
    return hdr


def _read_tensor_info(f, reader, hdr, i, n_tensors, names, budget) -> TensorInfo:
    what = f"tensor_infos[{i}]"
    tail = (n_tensors - i - 1) * MIN_TENSOR_INFO_BYTES
    name = read_string(reader, f"{what}.name", keep=True, budget=budget, tail=4 + 4 + 8 + tail)
    if not name:
        raise _reject(f, f"{what}.name", "empty tensor name", "gguf_tensor_name")
    if len(name.encode("utf-8")) >= GGML_MAX_NAME:
        raise _reject(f, f"{what}.name", f"tensor name {name[:GGML_MAX_NAME]!r}… is {len(name.encode('utf-8'))} "
                      f"bytes; ggml holds at most {GGML_MAX_NAME - 1}", "gguf_tensor_name_length")
    if name in names:
        raise _reject(f, f"{what}.name", f"duplicate tensor name {name!r}", "gguf_duplicate_tensor")
    names.add(name)
    n_dims = reader.u32(f"{name}: n_dims")
    if n_dims > GGUF_MAX_DIMS:
        raise _reject(f, f"{what}.n_dims", f"{name}: {n_dims} dims, GGUF allows at most {GGUF_MAX_DIMS}",
                      "gguf_n_dims")
    reader.promise(reader.pos + 8 * n_dims + 12 + tail)
    budget.charge(16 * n_dims, f"{what}.dims")
    dims = tuple(reader.u64(f"{name}: dims[{j}]") for j in range(n_dims))
    type_id = reader.u32(f"{name}: type")
    rel = reader.u64(f"{name}: offset")
    elements = 1
    for d in dims:
        elements *= d
    if elements > I64_MAX:
        raise _reject(f, f"{what}.dims", f"{name}: element count {elements} exceeds INT64_MAX",
                      "gguf_element_overflow")
    gtype = ggml_type(type_id)
    t = TensorInfo(i, name, dims, type_id, gtype, rel, elements, type_name=gtype.name)
    if t.ne0 % gtype.row_multiple:
        raise _reject(f, f"{what}.dims", f"{name}: first dim {t.ne0} is not a multiple of "
                      f"{gtype.row_multiple}, the block of {gtype.name}", "gguf_row_blocks")
    if rel % hdr.alignment:
        raise _reject(f, f"{what}.offset", f"{name}: relative offset {rel} is not a multiple of the alignment "
                      f"{hdr.alignment}", "gguf_tensor_alignment")
    if gtype.known:
        t.byte_length, t.block, t.storage_validation = byte_length(gtype.block, elements), gtype.block, "consistent"
        if rel + t.byte_length > I64_MAX:
            raise _reject(f, f"{what}.dims", f"{name}: {t.byte_length} bytes at relative offset {rel} end past "
                          "INT64_MAX, the largest file offset", "gguf_byte_length_overflow")
    elif elements == 0 and gtype.status != "unknown":
        t.byte_length, t.storage_validation = 0, "consistent"
    return t


def _place_data(f: OpenFile, hdr: GGUFHeader, allow_meta_only: bool = False) -> None:
    """Data offset, absolute tensor offsets, data ranges, id-42 resolution and range checks."""
    end = hdr.header_length
    aligned = -(-end // hdr.alignment) * hdr.alignment
    if allow_meta_only and f.size == aligned and any(t.elements for t in hdr.tensors):
        _place_meta_only(f, hdr, aligned)
        return
    if f.size == end:
        hdr.data_offset = end
    elif f.size < aligned:
        raise _reject(f, "data_offset", f"file ends at byte {f.size}, inside the alignment gap "
                      f"[{end}, {aligned})", "gguf_partial_alignment_gap")
    else:
        hdr.data_offset = aligned
    for t in hdr.tensors:
        t.file_offset = hdr.data_offset + t.rel_offset
        if t.file_offset > f.size:
            raise _reject(f, f"tensor_infos[{t.index}].offset", f"{t.name}: data starts at byte "
                          f"{t.file_offset}, past the end of the file ({f.size})", "gguf_tensor_range")
    # the data range of a non-empty tensor ends at the next non-empty tensor's start (or the file end)
    occupied = sorted((t for t in hdr.tensors if t.elements), key=lambda t: (t.file_offset, t.index))
    for k, t in enumerate(occupied):
        nxt = occupied[k + 1] if k + 1 < len(occupied) else None
        if nxt is not None and nxt.file_offset == t.file_offset:
            raise _reject(f, f"tensor_infos[{nxt.index}].offset", f"{nxt.name} starts at the same byte as "
                          f"{t.name} ({t.file_offset})", "gguf_tensor_overlap")
        t.data_range = (nxt.file_offset if nxt else f.size) - t.file_offset
        if t.data_range <= 0:
            raise _reject(f, f"tensor_infos[{t.index}].offset", f"{t.name}: no data bytes at {t.file_offset}",
                          "gguf_tensor_range")
        if t.gtype.status == "q2_0":
            _resolve_q2_0(f, hdr, t)
        if t.byte_length is not None and t.byte_length > t.data_range:
            rule = "gguf_tensor_overlap" if nxt is not None else "gguf_tensor_range"
            limit = f"the next tensor {nxt.name} at {nxt.file_offset}" if nxt else f"the file end ({f.size})"
            raise _reject(f, f"tensor_infos[{t.index}]", f"{t.name}: {t.byte_length} bytes from "
                          f"{t.file_offset} run past {limit}", rule)
    last = occupied[-1] if occupied else None
    if last is not None and last.byte_length is not None:
        # the data section is padded to the alignment after every tensor, the last one included (ggml's
        # writer does so and its loader reads the padded section whole): a file cut inside that padding is
        # truncated (docs/inspect.md §Agreement with llama.cpp's GGUF tests)
        padded_end = hdr.data_offset + -(-(last.rel_offset + last.byte_length) // hdr.alignment) * hdr.alignment
        if f.size < padded_end:
            raise _reject(f, f"tensor_infos[{last.index}]", f"{last.name}: the file ends at byte {f.size}, "
                          f"{padded_end - f.size} byte(s) before the end of the data section padded to "
                          f"{hdr.alignment} ({padded_end}): truncated", "gguf_data_padding")


def _place_meta_only(f: OpenFile, hdr: GGUFHeader, data_offset: int) -> None:
    """A metadata-only file: offsets at the aligned directory end, declared ranges checked against each
    other only (no data range, so id 42 stays unresolved)."""
    hdr.data_offset, hdr.data_present = data_offset, False
    for t in hdr.tensors:
        t.file_offset = data_offset + t.rel_offset
    occupied = sorted((t for t in hdr.tensors if t.elements), key=lambda t: (t.file_offset, t.index))
    for t, nxt in zip(occupied, occupied[1:], strict=False):
        if nxt.file_offset == t.file_offset:
            raise _reject(f, f"tensor_infos[{nxt.index}].offset", f"{nxt.name} starts at the same byte as "
                          f"{t.name} ({t.file_offset})", "gguf_tensor_overlap")
        if t.byte_length is not None and t.file_offset + t.byte_length > nxt.file_offset:
            raise _reject(f, f"tensor_infos[{t.index}]", f"{t.name}: {t.byte_length} bytes from {t.file_offset} "
                          f"run past the next tensor {nxt.name} at {nxt.file_offset}", "gguf_tensor_overlap")
    for t in occupied:
        if t.gtype.status == "q2_0":
            t.q2_0_reason = "no_data_section"


def _resolve_q2_0(f: OpenFile, hdr: GGUFHeader, t: TensorInfo) -> None:
    res = resolve_q2_0(t.ne0, t.elements, t.data_range, hdr.alignment)
    t.q2_0_reason = res.reason
    if res.reason == "no_fit":
        raise _reject(f, f"tensor_infos[{t.index}]", f"{t.name}: type 42 (Q2_0) with {t.elements} elements "
                      f"fits neither layout (128/34 or 64/18) in its {t.data_range}-byte data range",
                      "gguf_q2_0_range")
    if res.layout is not None:
        t.type_name, t.block = "Q2_0", res.block
        t.byte_length = byte_length(res.block, t.elements)
        t.storage_validation = "consistent"
