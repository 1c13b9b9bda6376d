"""Limits every source parser enforces before it allocates, and the typed errors for them.

``docs/inspect.md`` §Boundaries: a header cap of 100,000,000 bytes (safetensors counts its JSON bytes apart
from the 8-byte length prefix; GGUF counts its whole header), an independent 32 MiB budget for the
retained representation (rows, keys, previewed strings) charged *before* a row is kept or a string
expanded, metadata array nesting at most 32 levels, GGUF tensors at most 4 dimensions. Resource
rejections are typed (:func:`limit_error`), never an empty listing.
"""

from __future__ import annotations

from converters.errors import SourceFormatError

HEADER_CAP = 100_000_000
RETAINED_BUDGET = 32 * 1024 * 1024
MAX_NESTING = 32
GGUF_MAX_DIMS = 4
U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1

# Fixed per-row costs of the retained representation (a conservative estimate of what a row keeps
# besides its variable-length strings).
ROW_COST = 256
ENTRY_COST = 128


def limit_error(message: str, *, file, rule: str, json_path: str | None = None) -> SourceFormatError:
    """A typed resource rejection: ``target_unavailable`` / ``limit_exceeded``."""
    return SourceFormatError(message, file=file, json_path=json_path, rule=rule,
                             section="docs/inspect.md §Boundaries", category="limit_exceeded")


class RetainedBudget:
    """Counts the bytes a parser intends to retain; :meth:`charge` raises before the limit is crossed."""

    def __init__(self, file, limit: int | None = None) -> None:
        self.file = file
        self.limit = RETAINED_BUDGET if limit is None else limit
        self.used = 0

    def charge(self, nbytes: int, what: str) -> None:
        if self.used + nbytes > self.limit:
            raise limit_error(
                f"retained representation would exceed {self.limit} bytes at {what} "
                f"({self.used} used, {nbytes} more)", file=self.file, rule="retained_budget")
        self.used += nbytes
