"""The NInfer v3 container: framing, JSON directory, reader, writer, splitter and validator.

Container spec sections: §2–§3 framing and files (:mod:`.framing`, :mod:`.payload`), §1/§4–§10 the
directory (:mod:`.jsontext`, :mod:`.schema`, :mod:`.references`, :mod:`.records`), §11 reading
(:mod:`.entry`, :mod:`.reader`, :mod:`.encoding`, :mod:`.validation`) and writing (:mod:`.planner`,
:mod:`.fileset`, :mod:`.tempfiles`, :mod:`.writer`, :mod:`.repacking`).
"""

from ninfer_core.container.reader import Artifact, open_artifact
from ninfer_core.container.records import (
    Binding,
    Component,
    Directory,
    FileEntry,
    Part,
    Proposal,
    ResourceObject,
    TensorObject,
    Use,
)
from ninfer_core.container.repacking import repack
from ninfer_core.container.tempfiles import cleanup_temporaries
from ninfer_core.container.validation import validate
from ninfer_core.container.writer import ArtifactWriter

__all__ = [
    "Artifact",
    "ArtifactWriter",
    "Binding",
    "Component",
    "Directory",
    "FileEntry",
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
