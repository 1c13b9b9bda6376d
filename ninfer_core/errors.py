"""The one exception hierarchy of ``ninfer_core``.

Every error a reader, writer or codec raises for bad input is a :class:`NinferError`: it carries the
file, the JSON path (or object id), the spec section and the rule that was broken, so a user sees
*which* file, *which* field and *which* rule — never a bare ``KeyError``/``struct.error``.

Kinds (container spec §11.3 owners):

- :class:`FramingError` — header magic, lengths, part headers (§3).
- :class:`SchemaError` — JSON syntax, field sets, types, integer ranges, ID and Shape rules (§1, §4–§9).
- :class:`DirectoryReferenceError` — a binding, part, use, resource or target naming something absent
  or of the wrong kind (§7–§9).
- :class:`RangeError` — object byte ranges, ordering, overlap, alignment, part element ranges (§5.3, §7).
- :class:`ReadError` — a range read that cannot be served: missing part, foreign ``artifact_id``,
  wrong length, short read (§11.1–§11.2).
- :class:`EncodingError` — a format/layout that is unknown, not allowed for the shape, or encoded bytes
  that break the storage-layout contract (§6, ``docs/format/layouts.md``).
- :class:`WriterError` — the writer refuses (target exists, limit too small, incomplete coverage) (§11.4).
"""

from __future__ import annotations


class NinferError(Exception):
    """Base of every typed ninfer_core error.

    Attributes:
        file: the file concerned (entry or part path), if known.
        json_path: JSON path (``$.objects[3].shape``) or object id the error is about, if any.
        section: the container/layout spec section that states the rule (``"§5.3"``).
        rule: a short stable identifier of the rule (``"object_overlap"``).
    """

    kind = "error"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        json_path: str | None = None,
        section: str | None = None,
        rule: str | None = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.json_path = json_path
        self.section = section
        self.rule = rule
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.json_path:
            where.append(self.json_path)
        prefix = f"{': '.join(where)}: " if where else ""
        tail = []
        if self.rule:
            tail.append(f"rule {self.rule}")
        if self.section:
            tail.append(f"spec {self.section}")
        suffix = f" [{', '.join(tail)}]" if tail else ""
        return f"{prefix}{self.message}{suffix}"

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "json_path": self.json_path,
            "section": self.section,
            "rule": self.rule,
        }


class FramingError(NinferError, ValueError):
    kind = "framing"


class SchemaError(NinferError, ValueError):
    kind = "schema"


class DirectoryReferenceError(NinferError, ValueError):
    kind = "reference"


class RangeError(NinferError, ValueError):
    kind = "range"


class ReadError(NinferError, OSError):
    kind = "read"


class EncodingError(NinferError, ValueError):
    kind = "encoding"


class ResourceError(NinferError, OSError):
    """The host lacks a resource the work needs (memory, the compiled kernels that memory limits keep from
    loading): one typed line naming it, never a traceback (docs/robustness.md §Promises)."""

    kind = "resource"


class WriterError(NinferError):
    kind = "writer"


class ArtifactExistsError(WriterError, FileExistsError):
    kind = "writer"
