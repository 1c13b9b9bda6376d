"""llama.cpp importance matrices (``llama-imatrix`` output) read strictly and bounded: :func:`read_imatrix`.

Two published forms (docs/imatrix.md §File forms), told apart by content (a GGUF starts with ``GGUF``):

- the GGUF-based ``.imatrix``: for every weight ``W`` two F32 tensors, ``W.in_sum2`` with GGUF dims
  ``[K, nmat]`` (sum over calibration tokens of the squared input activation, per input column, per
  stacked matrix — experts) and ``W.counts`` with dims ``[1, nmat]`` (tokens seen per matrix); metadata
  ``imatrix.datasets`` (array of strings), ``imatrix.chunk_count`` and ``imatrix.chunk_size`` (u32);
- the legacy binary ``.dat``: little-endian ``int32 n_entries``, then per entry ``int32 len, name[len],
  int32 ncall, int32 nval, float32 values[nval]`` (the mean squared activation times ``ncall``), then
  optionally ``int32 chunk_count, int32 len, dataset[len]``.

The importance of column ``k`` of matrix ``j`` is the mean squared activation: ``in_sum2 / count`` (a
matrix with count 0 gets all ones, as llama-quantize does), ``values / ncall`` for ``.dat``. Everything the
file declares is checked against its size before anything is allocated; a truncated file, a count that does
not divide, a duplicate name, a negative or non-finite importance are :class:`SourceFormatError` naming the
file, the entry and the rule.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from converters.errors import SourceFormatError
from converters.sources.fileio import OpenFile

SECTION = "docs/imatrix.md §File forms"
#: the largest importance file read (a 400B-parameter model's is well under 1 GiB)
MAX_FILE_BYTES = 2 << 30
MAX_NAME_BYTES = 1024
IN_SUM2, COUNTS = ".in_sum2", ".counts"


@dataclass
class Imatrix:
    """One importance file: ``entries`` maps a GGUF tensor name to float32 ``(nmat, K)`` importances."""

    path: Path
    form: str  # "gguf" | "dat"
    sha256: str
    datasets: list[str]
    chunk_count: int | None
    chunk_size: int | None
    entries: dict[str, np.ndarray] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The provenance record (docs/imatrix.md §Provenance)."""
        return {"file": self.path.name, "sha256": self.sha256, "form": self.form, "datasets": list(self.datasets),
                "chunk_count": self.chunk_count, "chunk_size": self.chunk_size, "entries": len(self.entries)}


def _bad(path: Path, message: str, rule: str, where: str | None = None) -> SourceFormatError:
    return SourceFormatError(message, file=str(path), json_path=where, rule=rule, section=SECTION)


def _sha256(f: OpenFile) -> str:
    h = hashlib.sha256()
    for offset in range(0, f.size, 1 << 20):
        h.update(f.pread(min(1 << 20, f.size - offset), offset))
    return h.hexdigest()


def read_imatrix(path) -> Imatrix:
    """Read ``path`` (either form, detected by content); see the module docstring for the checks. The file is
    opened as every source is (a regular file, never blocking: a FIFO is a typed refusal, not a hang)."""
    path = Path(path)
    with OpenFile(path) as f:
        if f.size > MAX_FILE_BYTES:
            raise _bad(path, f"{f.size} bytes is more than the {MAX_FILE_BYTES} an importance file may have",
                       "imatrix_too_large")
        magic = f.pread(4, 0) if f.size >= 4 else b""
        im = _read_gguf(path) if magic == b"GGUF" else _read_dat(path, f.pread(f.size, 0))
        if not im.entries:
            raise _bad(path, "the file holds no importance entries", "imatrix_empty")
        im.sha256 = _sha256(f)
    return im


# -- legacy .dat --------------------------------------------------------------------------------------------

class _Cursor:
    def __init__(self, path: Path, data: bytes) -> None:
        self.path, self.data, self.pos = path, data, 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise _bad(self.path, f"truncated: {what} needs {n} bytes at offset {self.pos}, {self.left()} left",
                       "imatrix_truncated", what)
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i32(self, what: str) -> int:
        return struct.unpack("<i", self.take(4, what))[0]


def _read_dat(path: Path, data: bytes) -> Imatrix:
    size = len(data)  # bounded by MAX_FILE_BYTES above
    c = _Cursor(path, data)
    n = c.i32("n_entries")
    if n <= 0 or n * 16 > size:  # each entry has at least len, name byte, ncall, nval... (>= 13 bytes)
        raise _bad(path, f"n_entries {n} is not possible in a file of {size} bytes (legacy .dat form)",
                   "imatrix_entry_count", "n_entries")
    entries: dict[str, np.ndarray] = {}
    for i in range(n):
        where = f"entry {i}"
        ln = c.i32(f"{where} name length")
        if not 0 < ln <= MAX_NAME_BYTES:
            raise _bad(path, f"{where}: name length {ln} is outside 1..{MAX_NAME_BYTES}", "imatrix_name", where)
        raw = c.take(ln, f"{where} name")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(path, f"{where}: the name is not UTF-8", "imatrix_name", where) from None
        where = name
        ncall, nval = c.i32(f"{name} ncall"), c.i32(f"{name} nval")
        if ncall <= 0:
            raise _bad(path, f"{name}: ncall {ncall} must be positive", "imatrix_ncall", name)
        if nval <= 0 or nval * 4 > c.left():
            raise _bad(path, f"{name}: {nval} values do not fit the {c.left()} bytes left", "imatrix_truncated", name)
        if name in entries:
            raise _bad(path, f"{name} appears twice", "imatrix_duplicate", name)
        values = np.frombuffer(c.take(4 * nval, f"{name} values"), dtype="<f4").astype(np.float32)
        entries[name] = _checked(path, name, values / np.float32(ncall)).reshape(1, -1)
    chunk_count, datasets = None, []
    if c.left():
        chunk_count = c.i32("chunk_count")
        ln = c.i32("dataset length")
        if ln < 0 or ln > c.left():
            raise _bad(path, f"dataset name length {ln} does not fit the {c.left()} bytes left", "imatrix_truncated",
                       "dataset")
        datasets = [c.take(ln, "dataset").decode("utf-8", errors="replace")] if ln else []
        if c.left():
            raise _bad(path, f"{c.left()} bytes after the dataset name", "imatrix_trailing_bytes", "dataset")
        if chunk_count < 0:
            raise _bad(path, f"chunk count {chunk_count} is negative", "imatrix_chunk_count", "chunk_count")
    return Imatrix(path, "dat", "", datasets, chunk_count, None, entries)


def _checked(path: Path, name: str, values: np.ndarray) -> np.ndarray:
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        raise _bad(path, f"{name}: importance {values.reshape(-1)[i]} at column {i} is not a finite, non-negative "
                   "mean square", "imatrix_value", name)
    return values


# -- GGUF .imatrix ------------------------------------------------------------------------------------------

def _read_gguf(path: Path) -> Imatrix:
    from converters.sources.gguf import open_gguf

    with open_gguf(path) as src:  # the strict, bounded GGUF parser every GGUF source goes through
        meta = src.metadata
        datasets = meta["imatrix.datasets"] if "imatrix.datasets" in meta else []
        if not isinstance(datasets, list) or not all(isinstance(d, str) for d in datasets):
            raise _bad(path, "imatrix.datasets must be an array of strings", "imatrix_metadata", "imatrix.datasets")
        counts_meta = {}
        for key in ("imatrix.chunk_count", "imatrix.chunk_size"):
            v = meta[key] if key in meta else None
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise _bad(path, f"{key} must be a non-negative integer, got {v!r}", "imatrix_metadata", key)
            counts_meta[key] = v
        names = list(src.tensors)
        sums = {n[: -len(IN_SUM2)] for n in names if n.endswith(IN_SUM2)}
        cnts = {n[: -len(COUNTS)] for n in names if n.endswith(COUNTS)}
        for n in names:
            if not (n.endswith(IN_SUM2) or n.endswith(COUNTS)):
                raise _bad(path, f"tensor {n!r} is neither <weight>.in_sum2 nor <weight>.counts", "imatrix_tensor", n)
        for n in sorted(sums ^ cnts):
            has = IN_SUM2 if n in sums else COUNTS
            raise _bad(path, f"{n}{has} has no {COUNTS if has == IN_SUM2 else IN_SUM2} partner", "imatrix_pair", n)
        entries = {}
        for n in sorted(sums):
            entries[n] = _gguf_entry(path, src, n)
    return Imatrix(path, "gguf", "", list(datasets), counts_meta["imatrix.chunk_count"],
                   counts_meta["imatrix.chunk_size"], entries)


def _gguf_entry(path: Path, src, name: str) -> np.ndarray:
    s, c = src.tensor(name + IN_SUM2), src.tensor(name + COUNTS)
    for t in (s, c):
        if t.dtype != "F32":
            raise _bad(path, f"{t.name} is {t.dtype}; llama-imatrix writes F32", "imatrix_tensor_type", t.name)
    if len(s.dims) > 2 or len(c.dims) > 2:
        raise _bad(path, f"{name}: in_sum2 dims {list(s.dims)} / counts dims {list(c.dims)} have more than 2 axes",
                   "imatrix_shape", name)
    k, nmat = s.dims[0], (s.dims[1] if len(s.dims) > 1 else 1)
    cdims = tuple(c.dims) + (1,) * (2 - len(c.dims))
    if cdims != (1, nmat) or k <= 0:
        raise _bad(path, f"{name}: counts dims {list(c.dims)} do not match in_sum2 dims {list(s.dims)} "
                   f"(expected [1, {nmat}])", "imatrix_shape", name)
    sums = src.array(s.name).reshape(nmat, k)
    counts = src.array(c.name).reshape(nmat)
    if not np.isfinite(counts).all() or (counts < 0).any():
        raise _bad(path, f"{name}: counts {counts.tolist()[:8]} must be finite and non-negative", "imatrix_value",
                   name + COUNTS)
    with np.errstate(divide="ignore", invalid="ignore"):
        imp = np.where(counts[:, None] > 0, sums / np.where(counts > 0, counts, 1)[:, None], np.float32(1.0))
    return _checked(path, name, imp.astype(np.float32))
