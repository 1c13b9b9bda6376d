"""Importance files written as llama.cpp writes them (docs/imatrix.md §File forms).

``write_gguf_imatrix`` uses gguf-py's GGUFWriter the way llama.cpp's ``convert_legacy_imatrix_to_gguf.py``
does (no ``general.architecture``; ``general.type = imatrix``; per weight ``<name>.in_sum2`` F32
``[nmat, K]`` and ``<name>.counts`` F32 ``[nmat, 1]`` in numpy order); ``write_dat_imatrix`` packs the
legacy binary form with ``struct`` as ``llama-imatrix --output-format dat`` writes it (values are the mean
squared activation times ``ncall``).
"""

from __future__ import annotations

import struct
from pathlib import Path

import gguf
import numpy as np


class _ImatrixWriter(gguf.GGUFWriter):
    def add_architecture(self) -> None:  # imatrix files carry no architecture
        pass


def write_gguf_imatrix(path: Path, entries: dict[str, np.ndarray], counts: dict[str, np.ndarray] | None = None, *,
                       datasets: tuple[str, ...] = ("calib.txt",), chunk_count: int = 10,
                       chunk_size: int = 512) -> Path:
    """``entries``: name → mean squared activations ``(nmat, K)`` or ``(K,)``; written as in_sum2 = mean ×
    count with ``counts`` (default: chunk_count × chunk_size tokens per matrix)."""
    w = _ImatrixWriter(path=None, arch="")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", list(datasets))
    w.add_uint32("imatrix.chunk_count", chunk_count)
    w.add_uint32("imatrix.chunk_size", chunk_size)
    for name, mean in entries.items():
        m = np.atleast_2d(np.asarray(mean, dtype=np.float32))
        c = np.asarray(counts[name], dtype=np.float32).reshape(-1) if counts and name in counts \
            else np.full(m.shape[0], chunk_count * chunk_size, dtype=np.float32)
        sums = m * c[:, None] if c.size == m.shape[0] else m  # a mismatched count (tests of the reader)
        w.add_tensor(name + ".in_sum2", sums.astype(np.float32))
        w.add_tensor(name + ".counts", c.reshape(-1, 1).astype(np.float32))
    w.write_header_to_file(path=path)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def dat_bytes(entries: dict[str, np.ndarray], *, ncall: int = 10, chunk_count: int | None = 10,
              dataset: str = "calib.txt") -> bytes:
    """The legacy ``.dat`` bytes (``chunk_count=None``: the older files without the trailer)."""
    out = [struct.pack("<i", len(entries))]
    for name, mean in entries.items():
        v = (np.asarray(mean, dtype=np.float32).reshape(-1) * np.float32(ncall)).astype("<f4")
        raw = name.encode()
        out += [struct.pack("<i", len(raw)), raw, struct.pack("<ii", ncall, v.size), v.tobytes()]
    if chunk_count is not None:
        out += [struct.pack("<ii", chunk_count, len(dataset.encode())), dataset.encode()]
    return b"".join(out)


def write_dat_imatrix(path: Path, entries: dict[str, np.ndarray], **kw) -> Path:
    path.write_bytes(dat_bytes(entries, **kw))
    return path
