"""Source readers: one strict parser per format, shared by ``convert inspect`` and the converters.

``open_source(path)`` detects the kind by content, never by extension (:mod:`converters.sources.kind`): a
directory that is no calbin package is an HF checkpoint; a file starting with ``GGUF`` is GGUF; a file
whose first eight bytes are a little-endian length followed by ``{`` is safetensors. A GGUF that is a
shard of a gguf-split set opens the whole set (:mod:`converters.sources.gguf_split`). NInfer artifacts
are read by ``ninfer_core``, not here.

Beside the readers: :mod:`converters.sources.kind` (what any path a command is given holds, and the one
wrong-kind message) and :mod:`converters.sources.atomic_write` (report files published whole, never over
an existing file).
"""

from __future__ import annotations

from converters.errors import SourceError
from converters.sources.base import Source, SourceTensor
from converters.sources.fileio import SourceIOError, os_error
from converters.sources.gguf import GGUFSource, GGUFSplitSource, open_gguf
from converters.sources.hf import HFCheckpoint, open_hf_dir
from converters.sources.kind import detect_kind, sniff, wrong_kind
from converters.sources.safetensors import SafetensorsSource, open_safetensors


def open_source(path) -> Source:
    """Open a GGUF file, a safetensors file or an HF checkpoint directory, detected by content
    (:func:`converters.sources.kind.detect_kind`)."""
    kind = detect_kind(path)
    if kind == "hf":
        return open_hf_dir(path)
    if kind == "gguf":
        return open_gguf(path)
    if kind == "safetensors":
        return open_safetensors(path)
    raise wrong_kind(path, kind, ("gguf", "safetensors", "hf"), command=None)


__all__ = [
    "GGUFSource", "GGUFSplitSource", "HFCheckpoint", "SafetensorsSource", "Source", "SourceError", "SourceIOError",
    "SourceTensor", "open_gguf", "open_hf_dir", "open_safetensors", "open_source", "os_error", "sniff",
]
