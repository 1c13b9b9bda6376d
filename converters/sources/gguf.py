"""GGUF source: the strict header (:mod:`converters.sources.gguf_header`) behind the shared
:class:`~converters.sources.base.Source` surface, with lazily decoded metadata and memory-mapped tensors.

``dtype`` follows the naming of docs/inspect.md §Facts and queries (``Q4_K`` kept for K-quants, ``AMBIGUOUS_<id>`` for ids 16-25, ``Q2_0``
for a resolved id 42). To *read* a tensor whose layout the declaration leaves open (Q8_1, K-quants,
ids 16-25) the source may assume the modern ggml layout (``assume_modern_layouts=True``, the default for
the converters): only when that layout's byte length fits the tensor's data range, and every such
assumption is listed in :attr:`GGUFSource.layout_assumptions` so a converter can record it. Unresolved
id 42 and unknown ids are never assumed.

:func:`open_gguf` given a shard of a gguf-split set opens the whole set as one
:class:`GGUFSplitSource` (the rules: :mod:`converters.sources.gguf_split`, docs/inspect.md §Split GGUF files).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from converters.errors import SourceFormatError
from converters.sources.base import FileMap, ShardedSource, Source, SourceTensor, file_identity
from converters.sources.fileio import OpenFile
from converters.sources.gguf_header import GGUFHeader, MetaEntry, TensorInfo, parse_gguf
from converters.sources.gguf_split import Split, read_set
from converters.sources.gguf_types import byte_length
from converters.sources.gguf_values import NOT_UTF8, decode_full


class GGUFMetadata(Mapping):
    """Typed metadata in file order; each value decoded completely on first access (arrays in full).

    ``metadata[key]`` is text for the converters: a string (or string element) that is not UTF-8 is refused
    with a typed error naming the key, the element and the byte (rule ``gguf_string_utf8``).
    :meth:`exact` returns it as a :class:`NonUTF8String` instead, for a reader that handles bytes
    (docs/inspect.md §Non-canonical metadata values). BOOLs read as ggml reads them (non-zero is true)."""

    def __init__(self, source: GGUFSource) -> None:
        self._source = source
        self._entries = {e.key: e for e in source.header.metadata}
        self._cache: dict[str, Any] = {}

    def entry(self, key: str) -> MetaEntry:
        return self._entries[key]

    def type_of(self, key: str) -> str:
        from converters.sources.gguf_values import type_name

        return type_name(self._entries[key].vtype)

    def exact(self, key: str) -> Any:
        """The decoded value, non-UTF-8 strings kept as :class:`NonUTF8String`."""
        if key not in self._cache:
            e = self._entries[key]
            buf = self._source._map.slice(e.value_offset, e.value_end - e.value_offset)
            self._cache[key], _ = decode_full(memoryview(buf), 0, e.vtype, self._source.header.struct_order)
        return self._cache[key]

    def __getitem__(self, key: str) -> Any:
        value = self.exact(key)
        if NOT_UTF8 in self._entries[key].notes.found:
            rec = self._entries[key].notes.found[NOT_UTF8]
            first = rec["first"]
            raise SourceFormatError(
                f"string is not valid UTF-8 (invalid at byte {first['byte']}; {rec['count']} such string(s) in "
                f"{key}); the converters need this value as text", file=str(self._source.path),
                json_path=f"{key}{first['element']}", rule="gguf_string_utf8",
                section="docs/inspect.md §Non-canonical metadata values")
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries  # without decoding (Mapping's default reads the value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class GGUFSource(Source):
    """One GGUF file. ``allow_meta_only``: a metadata-only file is read as inspection reads it
    (:func:`~converters.sources.gguf_header.parse_gguf`); its tensors then have no bytes to read."""

    kind = "gguf"

    def __init__(self, path, *, assume_modern_layouts: bool = True, allow_meta_only: bool = False) -> None:
        super().__init__(path)
        self._file = OpenFile(path)
        try:
            self.header: GGUFHeader = parse_gguf(self._file, allow_meta_only=allow_meta_only)
        except BaseException:
            self._file.close()
            raise
        self._map = FileMap(self._file)
        self._metadata = GGUFMetadata(self)
        for t in self.header.tensors:
            self.tensors[t.name] = self._row(t, assume_modern_layouts)

    def _row(self, t: TensorInfo, assume_modern: bool) -> SourceTensor:
        read_type, read_length, basis = t.type_name, t.byte_length, "declared"
        if t.gtype.status == "q2_0" and t.block is not None:
            basis = "data_range"
        modern = t.gtype.modern
        if t.byte_length is None and modern is not None:
            name, block = modern
            fits = t.ne0 % block[0] == 0 and byte_length(block, t.elements) <= (t.data_range or 0)
            if not assume_modern:
                read_type, basis = None, "layout_unknown"
            elif fits:
                read_type, read_length, basis = name, byte_length(block, t.elements), "modern_ggml_assumption"
                self.layout_assumptions.append({
                    "tensor": t.name, "type_id": t.type_id, "declared_type": t.type_name,
                    "assumed_type": name, "block": list(block), "byte_length": read_length,
                    "data_range": t.data_range,
                    "reason": "declaration leaves the layout open (docs/inspect.md §Facts and queries); modern ggml layout assumed "
                              "because it fits the tensor's data range"})
            else:
                read_type, basis = None, "modern_layout_does_not_fit"
        elif t.byte_length == 0 and modern is not None:
            read_type = modern[0]
        elif t.byte_length is None:
            read_type, basis = None, "layout_unknown"
        return SourceTensor(
            name=t.name, dtype=t.type_name, type_id=t.type_id, shape=tuple(reversed(t.dims)), dims=t.dims,
            file=self.path, file_offset=t.file_offset, byte_length=t.byte_length, block=t.block,
            storage_validation=t.storage_validation, read_type=read_type, read_length=read_length,
            basis=basis, index=t.index)

    @property
    def metadata(self) -> GGUFMetadata:
        return self._metadata

    @property
    def opened(self) -> OpenFile:
        """The open descriptor (inspection verifies and hashes through it)."""
        return self._file

    def identity(self) -> dict:
        return file_identity(self._file, self.header.header_sha256, self.header.header_length)

    def _map_for(self, t: SourceTensor) -> FileMap:
        return self._map

    def _big_endian(self, t: SourceTensor) -> bool:
        return self.header.byte_order == "big"

    def close(self) -> None:
        self._map.close()
        self._file.close()


class GGUFSplitSource(ShardedSource):
    """A gguf-split shard set read as one model (:mod:`converters.sources.gguf_split`, docs/inspect.md §Split
    GGUF files): ``path`` and ``metadata`` are the first shard's, ``tensors`` every shard's in shard order
    (``index`` their position in the set), each read from its own shard (``SourceTensor.file``)."""

    kind = "gguf"

    def __init__(self, split: Split, shards: list[GGUFSource]) -> None:
        super().__init__(shards[0].path)
        self.split = split
        self.shards = {s.path.name: s for s in shards}
        for s in shards:
            for t in s.tensors.values():
                self.tensors[t.name] = replace(t, index=len(self.tensors))
            self.layout_assumptions += s.layout_assumptions

    @property
    def metadata(self) -> GGUFMetadata:
        return self.shards[self.path.name].metadata

    def _big_endian(self, t: SourceTensor) -> bool:
        return self.shards[t.file.name]._big_endian(t)


def open_gguf(path, *, assume_modern_layouts: bool = True,
              allow_meta_only: bool = False) -> GGUFSource | GGUFSplitSource:
    """Open a GGUF file with the strict parser, or, when it is a shard of a gguf-split set, the whole set
    (:func:`converters.sources.gguf_split.read_set`; raises :class:`~converters.errors.SourceError`)."""
    def one(p) -> GGUFSource:
        return GGUFSource(p, assume_modern_layouts=assume_modern_layouts, allow_meta_only=allow_meta_only)

    named = one(path)
    try:
        found = read_set(named, one)
    except BaseException:
        named.close()
        raise
    return named if found is None else GGUFSplitSource(*found)
