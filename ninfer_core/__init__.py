"""ninfer_core: the NInfer v3 format — container reader, writer, splitter, validator, and the codecs.

Knows nothing about GGUF sources or model architectures (see ``converters/`` for those).

Reading: ``open_artifact(path) -> Artifact``; checking: ``validate(path) -> list[Finding]``; writing:
``ArtifactWriter``; re-splitting: ``repack``. Codecs: :mod:`ninfer_core.codecs`.
"""

from ninfer_core.container import (
    Artifact,
    ArtifactWriter,
    Binding,
    Component,
    Directory,
    FileEntry,
    Part,
    Proposal,
    ResourceObject,
    TensorObject,
    Use,
    cleanup_temporaries,
    open_artifact,
    repack,
    validate,
)
from ninfer_core.findings import Finding

__all__ = [
    "Artifact",
    "ArtifactWriter",
    "Binding",
    "Component",
    "Directory",
    "FileEntry",
    "Finding",
    "Part",
    "Proposal",
    "ResourceObject",
    "TensorObject",
    "Use",
    "cleanup_temporaries",
    "open_artifact",
    "repack",
    "validate",
]
