"""The records of the JSON directory, as immutable Python values (container spec §3.3, §4, §5, §7–§10).

Each record knows its JSON form (:meth:`to_json`, members in the spec's table order, optional members
left out when they hold their default), so the writer serialises exactly what the reader parses.
Records are built by :mod:`ninfer_core.container.schema`, which checks them first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from ninfer_core.container.framing import PAGE, elements

ACTIVATION_POLICIES = ("A16Only", "AllowA8", "AllowA4")  # §8
PROPOSAL_DOMAINS = ("full", "indexed")  # §9.2
RAW_BYTES = "raw_bytes_v1"  # the one resource encoding (§5.2)


@dataclass(frozen=True)
class TensorObject:
    """A tensor object (§5.1): ``bytes`` encoded bytes at logical payload ``offset``."""

    id: str
    shape: tuple[int, ...]
    format: str
    layout: str
    offset: int
    bytes: int
    divisors: int = 1

    kind: ClassVar[str] = "tensor"
    encoding: ClassVar[None] = None

    @property
    def end(self) -> int:
        return self.offset + self.bytes

    @property
    def elements(self) -> int:
        return elements(self.shape)

    def to_json(self) -> dict:
        d = {"id": self.id, "kind": "tensor", "shape": list(self.shape), "format": self.format,
             "layout": self.layout, "offset": self.offset, "bytes": self.bytes}
        if self.divisors != 1:
            d["divisors"] = self.divisors
        return d


@dataclass(frozen=True)
class ResourceObject:
    """A resource object (§5.2): raw bytes at logical payload ``offset``, alignment 1."""

    id: str
    offset: int
    bytes: int
    encoding: str = RAW_BYTES

    kind: ClassVar[str] = "resource"
    shape: ClassVar[None] = None
    format: ClassVar[None] = None
    layout: ClassVar[None] = None
    divisors: ClassVar[None] = None

    @property
    def end(self) -> int:
        return self.offset + self.bytes

    def to_json(self) -> dict:
        return {"id": self.id, "kind": "resource", "encoding": self.encoding, "offset": self.offset,
                "bytes": self.bytes}


PhysicalObject = TensorObject | ResourceObject


@dataclass(frozen=True)
class Part:
    """An ordered fragment of a binding: logical elements ``[begin, end)`` of a tensor object (§7.1)."""

    object: str
    range: tuple[int, int]

    @property
    def begin(self) -> int:
        return self.range[0]

    @property
    def end(self) -> int:
        return self.range[1]

    @property
    def elements(self) -> int:
        return self.range[1] - self.range[0]

    def to_json(self) -> dict:
        return {"object": self.object, "range": [self.range[0], self.range[1]]}


@dataclass(frozen=True)
class Binding:
    """A logical parameter's representation (§7.1): a whole tensor ``object`` or ordered ``parts``."""

    object: str | None = None
    parts: tuple[Part, ...] | None = None

    @classmethod
    def whole(cls, object_id: str) -> Binding:
        return cls(object=object_id)

    @classmethod
    def of_parts(cls, parts: list[Part] | list[tuple[str, tuple[int, int]]]) -> Binding:
        return cls(parts=tuple(p if isinstance(p, Part) else Part(p[0], tuple(p[1])) for p in parts))

    @property
    def object_ids(self) -> tuple[str, ...]:
        """The tensor objects this binding reads, in order, without repeats."""
        if self.object is not None:
            return (self.object,)
        return tuple(dict.fromkeys(p.object for p in self.parts or ()))

    def to_json(self) -> dict:
        if self.object is not None:
            return {"object": self.object}
        return {"parts": [p.to_json() for p in self.parts or ()]}


@dataclass(frozen=True)
class Use:
    """A use position of a parameter with its activation permission and auxiliaries (§8)."""

    parameter: str
    input: str
    activation_policy: str | None = None
    auxiliaries: Mapping[str, Binding] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "auxiliaries", MappingProxyType(dict(self.auxiliaries)))

    def to_json(self) -> dict:
        d: dict[str, Any] = {"parameter": self.parameter, "input": self.input}
        if self.activation_policy is not None:
            d["activation_policy"] = self.activation_policy
        if self.auxiliaries:
            d["auxiliaries"] = {k: b.to_json() for k, b in self.auxiliaries.items()}
        return d


@dataclass(frozen=True)
class Proposal:
    """``text.proposal`` (§9.2): ``domain`` ``full`` or ``indexed`` (with ``rows``)."""

    domain: str
    rows: int | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"domain": self.domain}
        if self.rows is not None:
            d["rows"] = self.rows
        return d


@dataclass(frozen=True)
class Component:
    """A model component (§4.2): open ``config``, optional ``target``, ``resources``, ``proposal``."""

    config: Mapping[str, Any]
    target: str | None = None
    resources: Mapping[str, str] = field(default_factory=dict)
    proposal: Proposal | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))

    def to_json(self) -> dict:
        d: dict[str, Any] = {"config": dict(self.config)}
        if self.target is not None:
            d["target"] = self.target
        if self.resources:
            d["resources"] = dict(self.resources)
        if self.proposal is not None:
            d["proposal"] = self.proposal.to_json()
        return d


@dataclass(frozen=True)
class FileEntry:
    """One file of the set (§3.3) with its place in the logical payload (§2.2).

    ``path`` is the directory's value (None for the entry); ``location`` the file on disk (None until a
    reader resolves it); ``payload_offset`` is ``P_i``; ``payload_start`` the payload's file offset.
    """

    index: int
    path: str | None
    payload_bytes: int
    payload_offset: int
    payload_start: int
    location: Path | None = None

    @property
    def payload_end(self) -> int:
        return self.payload_offset + self.payload_bytes

    @property
    def file_bytes(self) -> int:
        """The file's exact length: its payload start plus its payload."""
        return self.payload_start + self.payload_bytes

    def to_json(self) -> dict:
        return {"path": self.path, "payload_bytes": self.payload_bytes}


def file_table(sizes: list[int], names: list[str | None], entry_payload_start: int,
               locations: list[Path | None] | None = None) -> tuple[FileEntry, ...]:
    """Build the files with prefix sums ``P_i`` (§2.2) from per-file payload sizes and names."""
    out = []
    offset = 0
    for i, (size, name) in enumerate(zip(sizes, names, strict=True)):
        start = entry_payload_start if i == 0 else PAGE
        out.append(FileEntry(i, name, size, offset, start, None if locations is None else locations[i]))
        offset += size
    return tuple(out)


@dataclass(frozen=True)
class Directory:
    """The whole JSON directory (§4.1) as records; ``payload_bytes`` is the sum of the files' payloads."""

    components: Mapping[str, Component]
    objects: tuple[PhysicalObject, ...]
    bindings: Mapping[str, Binding]
    uses: tuple[Use, ...]
    files: tuple[FileEntry, ...]
    metadata: Mapping[str, Any] | None = None
    provenance: Mapping[str, Any] | None = None

    @property
    def payload_bytes(self) -> int:
        return sum(f.payload_bytes for f in self.files)

    def to_json(self) -> dict:
        root: dict[str, Any] = {
            "components": {k: c.to_json() for k, c in self.components.items()},
            "objects": [o.to_json() for o in self.objects],
            "bindings": {k: b.to_json() for k, b in self.bindings.items()},
            "uses": [u.to_json() for u in self.uses],
            "files": [f.to_json() for f in self.files],
        }
        if self.metadata is not None:
            root["metadata"] = dict(self.metadata)
        if self.provenance is not None:
            root["provenance"] = dict(self.provenance)
        return root
