"""Typed errors of the converters: sources, mappings, recipes, transforms, conversion, gates.

Like :mod:`ninfer_core.errors`, each error names the file, the field and the rule. The CLI maps these
(and ``NinferError``) to a one-line message on stderr and a non-zero exit code; anything else is a bug
and is re-raised with its traceback.
"""

from __future__ import annotations

from ninfer_core.errors import NinferError


class ConverterError(NinferError):
    """Base of the converters' errors (shares the file/json_path/section/rule fields)."""

    kind = "converter"


class SourceError(ConverterError):
    """A GGUF/safetensors/HF source is unusable.

    ``code`` follows docs/inspect.md §Facts and queries: ``target_unavailable`` (missing or unusable path, or a
    file the strict parser rejects: ``category`` then says ``file_format_rejected``) or
    ``execution_failure`` (host I/O failure such as EIO/EMFILE, with diagnostics).
    """

    kind = "source"

    def __init__(self, message: str, *, code: str = "target_unavailable", category: str | None = None, **kw):
        self.code = code
        self.category = category
        super().__init__(message, **kw)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(code=self.code, category=self.category)
        return d


class SourceFormatError(SourceError, ValueError):
    """The strict parser rejected the file (``file_format_rejected``)."""

    def __init__(self, message: str, **kw):
        kw.setdefault("code", "target_unavailable")
        kw.setdefault("category", "file_format_rejected")
        super().__init__(message, **kw)


class MappingError(ConverterError, ValueError):
    kind = "mapping"


class RecipeError(ConverterError, ValueError):
    kind = "recipe"


class TransformError(ConverterError, ValueError):
    kind = "transform"


class ConversionError(ConverterError):
    """The conversion cannot proceed (coverage, template, missing component, unrepresentable value)."""

    kind = "conversion"
