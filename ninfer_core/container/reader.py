"""The artifact reader: :func:`open_artifact` and :class:`Artifact` (container spec §3–§5, §7–§11).

Opening reads the entry header and the JSON directory and checks every generic rule (§11.1 steps
1–4) and the entry's length; the first problem is raised as a typed error (``validate`` lists all).
Continuation parts are opened only when a read needs them (§11.1, §11.2). Tensor formats are
interpreted only on demand (:meth:`Artifact.object_bytes`, :meth:`Artifact.object_array`,
:meth:`Artifact.binding_array`), where an unknown format or a wrong encoded size is reported (§11.1).

Example::

    with open_artifact("model.ninfer") as art:
        q = art.binding_array("text/layers/0/attention/query", shape=(2048, 1024))
        template = art.resource(art.components["text"].resources["chat_template.jinja"])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ninfer_core.container.encoding import check_object_encoding
from ninfer_core.container.entry import LoadedEntry, load_entry
from ninfer_core.container.framing import elements
from ninfer_core.container.jsontext import member_path
from ninfer_core.container.payload import PayloadFiles
from ninfer_core.container.records import (
    Binding,
    Component,
    Directory,
    FileEntry,
    PhysicalObject,
    ResourceObject,
    TensorObject,
    Use,
)
from ninfer_core.errors import DirectoryReferenceError, RangeError, ReadError

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def open_artifact(path: str | os.PathLike) -> Artifact:
    """Open an artifact by its entry file; raises the first structural problem as a typed error."""
    loaded = load_entry(path)
    try:
        loaded.problems.raise_first()
    except BaseException:
        loaded.close()
        raise
    return Artifact(loaded)


class Artifact:
    """An open artifact. Use as a context manager, or call :meth:`close`.

    Attributes: ``path`` (entry file), ``artifact_id`` (32 lowercase hex), ``artifact_id_bytes``,
    ``json_bytes``, ``entry_payload_start``, ``directory`` (all records), ``components``, ``objects``
    (in directory order), ``bindings``, ``uses``, ``files`` (with ``location`` on disk), ``metadata``,
    ``provenance`` (empty mappings when omitted, §10), ``payload_bytes``.
    """

    def __init__(self, loaded: LoadedEntry) -> None:
        d = loaded.directory
        if d is None or loaded.problems:
            raise ValueError("Artifact() needs a loaded entry without problems; use open_artifact()")
        self.path: Path = loaded.path
        self.directory: Directory = d
        self.artifact_id_bytes: bytes = loaded.header.artifact_id
        self.artifact_id: str = self.artifact_id_bytes.hex()
        self.json_bytes: int = loaded.header.json_bytes
        self.entry_payload_start: int = loaded.header.payload_start
        self._index = loaded.index
        self._positions = loaded.object_positions
        self._payload = PayloadFiles(d.files, self.artifact_id_bytes, loaded.fd)
        loaded.fd = -1  # owned by the payload files now

    # ---- directory -------------------------------------------------------------------------------

    @property
    def components(self) -> Mapping[str, Component]:
        return self.directory.components

    @property
    def objects(self) -> tuple[PhysicalObject, ...]:
        return self.directory.objects

    @property
    def bindings(self) -> Mapping[str, Binding]:
        return self.directory.bindings

    @property
    def uses(self) -> tuple[Use, ...]:
        return self.directory.uses

    @property
    def files(self) -> tuple[FileEntry, ...]:
        return self.directory.files

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.directory.metadata if self.directory.metadata is not None else _EMPTY

    @property
    def provenance(self) -> Mapping[str, Any]:
        return self.directory.provenance if self.directory.provenance is not None else _EMPTY

    @property
    def payload_bytes(self) -> int:
        return self._payload.payload_bytes

    def object(self, object_id: str) -> PhysicalObject:
        """The object record named ``object_id`` (a :class:`DirectoryReferenceError` if absent)."""
        try:
            return self._index[object_id]
        except KeyError:
            raise DirectoryReferenceError(f"no object {object_id!r}", file=str(self.path), json_path="$.objects",
                                          section="§5.3", rule="reference_missing") from None

    def object_json_path(self, object_id: str) -> str:
        return f"$.objects[{self._positions[object_id]}]"

    # ---- bytes ---------------------------------------------------------------------------------

    def read_range(self, offset: int, length: int) -> memoryview:
        """Bytes ``[offset, offset+length)`` of the logical payload (§11.2).

        Zero-copy (a read-only view of a memory map) when the range lies in one file; a copy when it
        spans files. Only the parts the range touches are opened; a missing, foreign or wrong-length
        part raises :class:`~ninfer_core.errors.ReadError` naming it.
        """
        return self._payload.view(int(offset), int(length))

    def readinto(self, offset: int, buf) -> None:
        """Copy the logical range starting at ``offset`` into the writable buffer ``buf`` (``pread``)."""
        self._payload.readinto(int(offset), memoryview(buf).cast("B"))

    def object_bytes(self, object_id: str) -> memoryview:
        """The encoded bytes of an object, after checking its encoding is known and its size right (§11.1).

        Zero-copy when the object lies in one file; copied when it spans files. For the raw bytes of an
        object whose format this reader does not know, use :meth:`read_range`.
        """
        obj = self.object(object_id)
        check_object_encoding(obj, json_path=self.object_json_path(object_id), file=str(self.path))
        return self.read_range(obj.offset, obj.bytes)

    def resource(self, object_id: str) -> bytes:
        """A resource object's raw bytes (§5.2, §9.1)."""
        obj = self.object(object_id)
        if not isinstance(obj, ResourceObject):
            raise DirectoryReferenceError(f"{object_id!r} is a {obj.kind} object, not a resource",
                                          file=str(self.path), json_path=self.object_json_path(object_id),
                                          section="§5.2", rule="reference_kind")
        return bytes(self.object_bytes(object_id))

    # ---- decoded values ------------------------------------------------------------------------

    def object_array(self, object_id: str) -> np.ndarray:
        """A tensor object decoded to float32 in its own shape, via the codec registry."""
        from ninfer_core import codecs

        obj = self.object(object_id)
        if not isinstance(obj, TensorObject):
            raise DirectoryReferenceError(f"{object_id!r} is a {obj.kind} object, not a tensor",
                                          file=str(self.path), json_path=self.object_json_path(object_id),
                                          section="§5.1", rule="reference_kind")
        data = self.object_bytes(object_id)
        return codecs.decode(obj.format, obj.layout, obj.shape, data, divisors=obj.divisors)

    def binding_array(self, binding: str | Binding, shape: tuple[int, ...] | list[int] | None = None) -> np.ndarray:
        """A logical parameter decoded to float32 (§7.1, §7.2).

        ``binding`` is a binding name (or a :class:`Binding`, e.g. a use's auxiliary). A whole-object
        binding returns the object's values; a parts binding concatenates each part's element range of
        its decoded parent, in order (C-order). The logical shape comes from the architecture: pass
        ``shape`` to get the values in it — the element count must match, else a
        :class:`~ninfer_core.errors.RangeError` (rule ``binding_coverage``, the binder's coverage check).
        Without ``shape`` the result has the object's shape (whole object) or is flat (parts).
        """
        if isinstance(binding, Binding):
            b, where = binding, "binding"
        else:
            b = self.bindings.get(binding)
            where = member_path("$.bindings", binding)
            if b is None:
                raise DirectoryReferenceError(f"no binding named {binding!r}", file=str(self.path),
                                              json_path="$.bindings", section="§7.1", rule="reference_missing")
        if b.object is not None:
            values = self.object_array(b.object)
        else:
            decoded: dict[str, np.ndarray] = {}
            pieces = []
            for part in b.parts or ():
                if part.object not in decoded:
                    decoded[part.object] = self.object_array(part.object).reshape(-1)
                pieces.append(decoded[part.object][part.begin:part.end])
            values = np.concatenate(pieces)
        if shape is None:
            return values
        shape = tuple(int(s) for s in shape)
        if elements(shape) != values.size:
            raise RangeError(f"binding holds {values.size} elements; the logical shape {list(shape)} needs "
                             f"{elements(shape)}", file=str(self.path), json_path=where, section="§7.1",
                             rule="binding_coverage")
        return values.reshape(shape)

    # ---- files -------------------------------------------------------------------------------------

    def check_files(self) -> list[ReadError]:
        """Open and check every continuation part; one :class:`ReadError` per bad part (§3.2)."""
        return self._payload.check_all()

    def close(self) -> None:
        self._payload.close()

    def __enter__(self) -> Artifact:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<Artifact {str(self.path)!r} id={self.artifact_id} objects={len(self.objects)} "
                f"files={len(self.files)} payload={self.payload_bytes}>")
