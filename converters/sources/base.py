"""The one surface every source shares: :class:`Source` and :class:`SourceTensor`.

A source is a GGUF file, a safetensors file or an HF checkpoint directory. It knows no architecture:
it lists tensors with their declared type,
logical shape and byte range, memory-maps payloads (``raw``) and decodes them to float32 (``array``).
Headers are indexed eagerly by the strict parsers; payloads are never read until asked for.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from converters.errors import SourceError
from converters.sources.fileio import OpenFile, os_error


@dataclass(frozen=True)
class SourceTensor:
    """One tensor as its source declares it.

    ``dtype`` is the GGML type name for GGUF (``AMBIGUOUS_<id>`` / ``UNKNOWN_<id>`` where the id does not
    fix a name; ``Q2_0`` for a resolved id 42, with ``block``) or the safetensors dtype string; ``shape``
    is the logical row-major shape (GGUF dims reversed); ``dims`` the raw GGUF fastest-first dims
    (``None`` for safetensors); ``byte_length`` is ``None`` where the declaration does not fix it.
    ``read_type``/``read_length`` are what :meth:`Source.raw` and :meth:`Source.array` use: equal to
    ``dtype``/``byte_length`` where those are known, else the modern-ggml layout when the source was
    allowed to assume it (``basis`` says which), else ``None``.
    """

    name: str
    dtype: str
    type_id: int | None
    shape: tuple[int, ...]
    dims: tuple[int, ...] | None
    file: Path
    file_offset: int
    byte_length: int | None
    block: tuple[int, int] | None = None
    storage_validation: str = "consistent"
    read_type: str | None = None
    read_length: int | None = None
    basis: str = "declared"
    index: int = 0

    @property
    def elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class FileMap:
    """Read-only memory maps of byte ranges of one open file (zero-copy tensor slices).

    Each :meth:`slice` maps only its own range (from the allocation-granularity boundary below it), so
    the address space a conversion uses follows the tensors it is reading, not the file size: a model
    larger than an address-space limit (``ulimit -v``) still converts. A map lives as long as the array
    viewing it.
    """

    def __init__(self, f: OpenFile) -> None:
        self.f = f

    def slice(self, offset: int, length: int) -> np.ndarray:
        if length == 0:
            return np.zeros(0, dtype=np.uint8)
        if offset < 0 or offset + length > self.f.size:
            raise SourceError(f"range [{offset}, {offset + length}) outside the file ({self.f.size} bytes)",
                              file=str(self.f.path), rule="range_in_file")
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        try:
            mm = mmap.mmap(self.f.fd, offset + length - start, offset=start, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            if isinstance(exc, OSError):
                raise os_error(exc, self.f.path, "memory-map the file") from None
            raise SourceError(f"cannot memory-map the file: {exc}", file=str(self.f.path),
                              code="execution_failure", category="io_error") from None
        return np.frombuffer(mm, dtype=np.uint8)[offset - start:]

    def close(self) -> None:
        """Nothing to release eagerly: each range's map closes when its last view is dropped."""


class Source:
    """Base of GGUF, safetensors and HF sources (a context manager).

    Subclasses set ``kind``, ``path``, ``tensors`` (in file or directory order) and implement
    ``metadata``, ``identity``, ``close`` and the memory map lookup.
    """

    kind = ""

    def __init__(self, path) -> None:
        self.path = Path(path)
        self.tensors: dict[str, SourceTensor] = {}
        # explicit layout assumptions made to read historically ambiguous GGML types (for provenance)
        self.layout_assumptions: list[dict] = []
        # virtual tensor name -> QuantizedWeight of a prequantized checkpoint (docs/prequantized.md)
        self.quantized_weights: dict = {}
        self.quantization = None  # its QuantizationConfig

    @property
    def metadata(self) -> Mapping:
        raise NotImplementedError

    def tensor(self, name: str) -> SourceTensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise SourceError(f"no tensor named {name!r}", file=str(self.path), json_path=name,
                              rule="tensor_exists") from None

    def quantized(self, name: str):
        """The :class:`~converters.sources.prequantized.QuantizedWeight` behind virtual tensor ``name`` of a
        prequantized checkpoint, or None for an ordinary tensor (docs/prequantized.md §Source-layer contract)."""
        return self.quantized_weights.get(name)

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a zero-copy ``uint8`` view of the memory-mapped file."""
        t = self.tensor(name)
        if name in self.quantized_weights:
            raise SourceError(f"{name} is a prequantized {t.dtype} weight stored as several component tensors; "
                              "its bytes are read through source.quantized(name) (docs/prequantized.md)",
                              file=str(t.file), json_path=name, rule="prequantized_raw")
        if t.read_length is None:
            raise SourceError(
                f"the byte length of {t.dtype} (type id {t.type_id}) is not fixed by the declaration "
                f"(storage_validation {t.storage_validation}, basis {t.basis}); it cannot be read",
                file=str(t.file), json_path=name, rule="storage_length_known")
        return self._map_for(t).slice(t.file_offset, t.read_length)

    def array(self, name: str) -> np.ndarray:
        """The tensor decoded to float32 in its logical row-major shape."""
        from converters.sources.decode import decode_tensor

        t = self.tensor(name)
        qw = self.quantized_weights.get(name)
        if qw is not None:  # the source library's own dequantization (docs/prequantized.md §Value relations)
            return qw.dequantize(0, qw.shape[0]).reshape(t.shape)
        return decode_tensor(t, self.raw(name), big_endian=self._big_endian(t))

    def identity(self) -> dict:
        raise NotImplementedError

    def verify_unchanged(self) -> None:
        """Check each file this source reads still shows the identity recorded when it was opened (device,
        inode, size, mtime): a conversion refuses to publish from a source overwritten or appended to while it
        ran (docs/robustness.md §Promises)."""
        self.opened.verify_unchanged()

    def _map_for(self, t: SourceTensor) -> FileMap:
        raise NotImplementedError

    def _big_endian(self, t: SourceTensor) -> bool:
        return False

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ShardedSource(Source):
    """A model read from several files, each opened as its own source in ``shards`` (file name → source): an
    HF checkpoint directory, a gguf-split set. A tensor is read from the shard that holds it
    (``SourceTensor.file``); identity, the unchanged-check and closing cover every shard and ``side_files``
    (small files read whole: name → ``{sha256, size}``)."""

    shards: dict
    side_files: dict[str, dict] | None = None

    def identity(self) -> dict:
        return file_set_identity(self.path, {n: s.identity() for n, s in self.shards.items()}, self.side_files)

    def verify_unchanged(self) -> None:
        for shard in self.shards.values():
            shard.verify_unchanged()

    def _map_for(self, t: SourceTensor) -> FileMap:
        return self.shards[t.file.name]._map

    def close(self) -> None:
        for s in self.shards.values():
            s.close()


def file_identity(f: OpenFile, header_sha256: str, header_length: int) -> dict:
    """The provenance identity of one open source file."""
    import datetime

    ident = f.identity
    mtime = datetime.datetime.fromtimestamp(ident.mtime_ns / 1e9, tz=datetime.UTC).isoformat()
    return {"path": str(f.path.resolve()), "size": ident.size, "mtime": mtime, "mtime_ns": ident.mtime_ns,
            "dev": ident.dev, "ino": ident.ino, "header_sha256": header_sha256, "header_length": header_length}


def file_set_identity(path, members: dict[str, dict], side_files: dict[str, dict] | None = None) -> dict:
    """The provenance identity of a set of source files read as one model (an HF directory's shards and
    side files, a gguf-split set): ``members`` maps each file name to its :func:`file_identity`,
    ``side_files`` each small file read whole to its ``sha256`` and ``size``. ``header_sha256`` is the
    SHA-256 of ``name NUL digest LF`` over the files in listed order (side files first); size, header
    length and mtime are the members'."""
    import hashlib

    files = [dict(name=n, **v) for n, v in (side_files or {}).items()]
    files += [dict(name=n, **v) for n, v in members.items()]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f['name']}\0{f.get('header_sha256') or f.get('sha256')}\n".encode())
    ids = list(members.values())
    return {"path": str(Path(path).resolve()), "size": sum(i["size"] for i in ids),
            "mtime": max((i["mtime"] for i in ids), default=None),
            "mtime_ns": max((i["mtime_ns"] for i in ids), default=None),
            "header_sha256": digest.hexdigest(), "header_length": sum(i["header_length"] for i in ids),
            "files": files}
