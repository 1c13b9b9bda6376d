"""Source readers: one strict parser per format, shared by ``convert inspect`` and the converters.

``open_source(path)`` detects the kind by content (never by extension): a directory is an HF checkpoint;
a file starting with ``GGUF`` is GGUF; a file whose first eight bytes are a little-endian length followed
by ``{`` is safetensors. NInfer artifacts are read by ``ninfer_core``, not here.

Beside the readers: :mod:`converters.sources.kind` (what any path a command is given holds, and the one
wrong-kind message) and :mod:`converters.sources.atomic_write` (report files published whole, never over
an existing file).
"""

from __future__ import annotations

from pathlib import Path

from converters.errors import SourceError
from converters.sources.base import Source, SourceTensor
from converters.sources.fileio import OpenFile, SourceIOError, os_error
from converters.sources.gguf import GGUFSource, open_gguf
from converters.sources.hf import HFCheckpoint, open_hf_dir
from converters.sources.safetensors import SafetensorsSource, open_safetensors

NINFER_MAGIC = b"NINFER\x00\x03"
NINFER_PART_MAGIC = b"NINPRT\x00\x03"


def sniff(path) -> str:
    """The kind of file at ``path`` from its first bytes: ``gguf``, ``safetensors``, ``ninfer``,
    ``ninfer_part``, ``json`` or ``unknown`` (raises a typed error for unusable paths)."""
    p = Path(path)
    if p.is_dir():
        return "directory"
    with OpenFile(p) as f:
        head = f.pread(min(f.size, 9), 0) if f.size else b""
    if head.startswith(b"GGUF"):
        return "gguf"
    if head.startswith(b"NINFER\x00"):
        return "ninfer"
    if head.startswith(b"NINPRT\x00"):
        return "ninfer_part"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] in (b"{", b"["):
        return "json"
    return "unknown"


def open_source(path) -> Source:
    """Open a GGUF file, a safetensors file or an HF checkpoint directory, detected by content."""
    kind = sniff(path)
    if kind == "directory":
        return open_hf_dir(path)
    if kind == "gguf":
        return open_gguf(path)
    if kind == "safetensors":
        return open_safetensors(path)
    raise SourceError(f"not a GGUF file, safetensors file or HF checkpoint directory (detected: {kind})",
                      file=str(path), code="target_unavailable", category="unsupported_target",
                      rule="source_kind")


__all__ = [
    "GGUFSource", "HFCheckpoint", "SafetensorsSource", "Source", "SourceError", "SourceIOError",
    "SourceTensor", "open_gguf", "open_hf_dir", "open_safetensors", "open_source", "os_error", "sniff",
]
