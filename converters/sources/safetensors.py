"""Strict safetensors parser and source.

Why not ``safetensors.safe_open``: it reports every problem as one opaque ``SafetensorError`` string,
accepts what its JSON layer accepts, and has no notion of the retained-representation budget or of
unknown dtypes kept with a limitation. This parser follows the format (safetensors README "Format";
``safetensors/src/tensor.rs`` ``read_metadata``/``validate``) with a typed rejection per rule
(docs/inspect.md §Facts and queries: ``file_format_rejected``, public code ``target_unavailable``):

- 8-byte little-endian header length ``N`` (the JSON bytes, counted apart from the prefix) at most
  100,000,000 and inside the file; the JSON starts with ``{``; strict JSON (:mod:`strict_json`:
  UTF-8, no duplicate keys, 32 levels);
- ``__metadata__``: an object of strings (kept exactly; empty = omitted);
- every other member is a tensor: ``dtype`` string, ``shape`` list of exact uint64, ``data_offsets``
  ``[begin, end]`` uint64 with ``begin <= end``; unknown per-tensor fields are ignored;
- the element count is multiplied in declared order with a uint64 overflow check at each step (a later
  zero does not cancel an earlier overflow); known dtypes: ``bits = count * bitsize`` must be whole
  bytes and equal ``end - begin``; unknown dtypes keep their range with ``storage_validation: unknown``;
- ranges sorted by ``(begin, end)`` tile the data buffer exactly: no gap, no overlap, nothing outside
  the file, no trailing unindexed bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from converters.errors import SourceFormatError
from converters.sources import strict_json
from converters.sources.base import FileMap, Source, SourceTensor, file_identity
from converters.sources.fileio import OpenFile
from converters.sources.limits import HEADER_CAP, ROW_COST, U64_MAX, RetainedBudget, limit_error

# bits per element (safetensors ``Dtype::bitsize``)
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
METADATA_KEY = "__metadata__"
SECTION = "safetensors format / docs/inspect.md §Facts and queries"


@dataclass
class STTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int
    elements: int
    storage_validation: str  # "consistent" | "unknown"
    declared_index: int  # position in the JSON


@dataclass
class STHeader:
    file_size: int
    json_length: int
    metadata: dict[str, str] = field(default_factory=dict)
    tensors: list[STTensor] = field(default_factory=list)  # in data-offset order
    header_sha256: str = ""
    bytes_read: int = 0
    ranges_read: list = field(default_factory=list)
    retained_bytes: int = 0
    hasher: Any = None  # SHA-256 state after the header bytes (a full-file hash continues from it)

    @property
    def header_length(self) -> int:
        return 8 + self.json_length

    @property
    def data_start(self) -> int:
        return 8 + self.json_length


def _reject(f, what: str, msg: str, rule: str) -> SourceFormatError:
    return SourceFormatError(msg, file=str(f.path), json_path=what, rule=rule, section=SECTION)


def _u64(f, value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value <= U64_MAX:
        raise _reject(f, what, f"{value!r} is not an unsigned 64-bit integer", "st_u64")
    return value


def parse_safetensors(f: OpenFile, *, budget: RetainedBudget | None = None) -> STHeader:
    """Parse and validate the header of the open safetensors file ``f`` (reads the header only)."""
    import hashlib

    budget = budget or RetainedBudget(str(f.path))
    if f.size < 8:
        raise _reject(f, "header_length", f"file has {f.size} bytes, fewer than the 8-byte length prefix",
                      "st_header_too_small")
    prefix = f.pread(8, 0)
    n = int.from_bytes(prefix, "little")
    if n > HEADER_CAP:
        raise limit_error(f"header_length: {n} JSON bytes exceed the {HEADER_CAP}-byte header cap",
                          file=str(f.path), rule="header_cap", json_path="header_length")
    if 8 + n > f.size:
        raise _reject(f, "header_length", f"{n} JSON bytes declared, only {f.size - 8} follow the prefix",
                      "st_header_length")
    data = f.pread(n, 8) if n else b""
    hasher = hashlib.sha256(prefix)
    hasher.update(data)
    hdr = STHeader(file_size=f.size, json_length=n, header_sha256=hasher.hexdigest(), bytes_read=8 + n,
                   ranges_read=[[0, 8 + n]], hasher=hasher)
    if not data.startswith(b"{"):
        raise _reject(f, "header", "JSON header does not start with '{'", "st_header_start")
    # the retained rows are bounded by the objects in the text; charge them before parsing
    budget.charge(data.count(b"{") * ROW_COST + n, "safetensors header rows")
    obj = strict_json.loads(data, file=f.path, what="header", rule_prefix="st_json", section=SECTION)
    if not isinstance(obj, dict):
        raise _reject(f, "header", "JSON header is not an object", "st_header_object")
    for i, (name, entry) in enumerate(obj.items()):
        if name == METADATA_KEY:
            hdr.metadata = _metadata(f, entry)
        else:
            hdr.tensors.append(_tensor(f, i, name, entry))
    _check_ranges(f, hdr)
    hdr.retained_bytes = budget.used
    return hdr


def _metadata(f, entry: Any) -> dict[str, str]:
    if entry is None:  # the upstream reader's Option: null is an omitted __metadata__
        return {}
    if not isinstance(entry, dict):
        raise _reject(f, METADATA_KEY, "must be an object of strings", "st_metadata_type")
    for k, v in entry.items():
        if not isinstance(v, str):
            raise _reject(f, f"{METADATA_KEY}.{k}", f"value {v!r} is not a string", "st_metadata_type")
    return dict(entry)


def _tensor(f, i: int, name: str, entry: Any) -> STTensor:
    if not isinstance(entry, dict):
        raise _reject(f, name, "tensor entry is not an object", "st_tensor_entry")
    for fld in ("dtype", "shape", "data_offsets"):
        if fld not in entry:
            raise _reject(f, name, f"missing {fld!r}", "st_tensor_entry")
    dtype = entry["dtype"]
    if not isinstance(dtype, str):
        raise _reject(f, f"{name}.dtype", f"{dtype!r} is not a string", "st_tensor_entry")
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not isinstance(shape, list):
        raise _reject(f, f"{name}.shape", "is not a list", "st_tensor_entry")
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise _reject(f, f"{name}.data_offsets", "is not a [begin, end] pair", "st_tensor_entry")
    dims = tuple(_u64(f, d, f"{name}.shape[{j}]") for j, d in enumerate(shape))
    begin = _u64(f, offsets[0], f"{name}.data_offsets[0]")
    end = _u64(f, offsets[1], f"{name}.data_offsets[1]")
    if begin > end:
        raise _reject(f, f"{name}.data_offsets", f"begin {begin} > end {end}", "st_offsets_order")
    elements = 1
    for j, d in enumerate(dims):  # declared order, checked at every step like the upstream reader
        elements *= d
        if elements > U64_MAX:
            raise _reject(f, f"{name}.shape", f"element count overflows uint64 at dim {j}", "st_shape_overflow")
    validation = "unknown"
    bits = DTYPE_BITS.get(dtype)
    if bits is not None:
        nbits = elements * bits
        if nbits > U64_MAX:
            raise _reject(f, f"{name}.shape", f"{elements} x {bits} bits overflows uint64", "st_shape_overflow")
        if nbits % 8:
            raise _reject(f, name, f"{elements} {dtype} elements are {nbits} bits, not whole bytes",
                          "st_packed_bytes")
        if nbits // 8 != end - begin:
            raise _reject(f, name, f"{dtype} {list(dims)} needs {nbits // 8} bytes, data_offsets give "
                          f"{end - begin}", "st_byte_length")
        validation = "consistent"
    return STTensor(name, dtype, dims, begin, end, elements, validation, i)


def _check_ranges(f, hdr: STHeader) -> None:
    buffer_len = f.size - hdr.data_start
    for t in hdr.tensors:
        if t.end > buffer_len:
            raise _reject(f, f"{t.name}.data_offsets", f"range [{t.begin}, {t.end}) lies outside the "
                          f"{buffer_len}-byte data buffer", "st_range_outside_file")
    hdr.tensors.sort(key=lambda t: (t.begin, t.end, t.name))
    expected, prev = 0, None
    for t in hdr.tensors:
        if t.begin < expected:
            raise _reject(f, f"{t.name}.data_offsets", f"[{t.begin}, {t.end}) overlaps {prev.name} "
                          f"[{prev.begin}, {prev.end})", "st_overlap")
        if t.begin > expected:
            raise _reject(f, f"{t.name}.data_offsets", f"gap [{expected}, {t.begin}) before this tensor",
                          "st_gap")
        expected, prev = t.end, t
    if expected != buffer_len:
        raise _reject(f, "data", f"{buffer_len - expected} trailing bytes after the last tensor "
                      f"(indexed data ends at {expected} of {buffer_len})", "st_trailing_data")


class SafetensorsSource(Source):
    kind = "safetensors"

    def __init__(self, path) -> None:
        super().__init__(path)
        self._file = OpenFile(path)
        try:
            self.header = parse_safetensors(self._file)
        except BaseException:
            self._file.close()
            raise
        self._map = FileMap(self._file)
        start = self.header.data_start
        for t in self.header.tensors:
            self.tensors[t.name] = SourceTensor(
                name=t.name, dtype=t.dtype, type_id=None, shape=t.shape, dims=None, file=self.path,
                file_offset=start + t.begin, byte_length=t.end - t.begin,
                storage_validation=t.storage_validation, read_type=t.dtype, read_length=t.end - t.begin,
                index=t.declared_index)

    @property
    def metadata(self) -> dict[str, str]:
        return self.header.metadata

    @property
    def opened(self) -> OpenFile:
        """The open descriptor (inspection verifies and hashes through it)."""
        return self._file

    def identity(self) -> dict:
        return file_identity(self._file, self.header.header_sha256, self.header.header_length)

    def _map_for(self, t: SourceTensor) -> FileMap:
        return self._map

    def close(self) -> None:
        self._map.close()
        self._file.close()


def open_safetensors(path) -> SafetensorsSource:
    """Open a safetensors file with the strict parser (raises :class:`~converters.errors.SourceError`)."""
    return SafetensorsSource(path)
