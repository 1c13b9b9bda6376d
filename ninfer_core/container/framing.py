"""Binary framing of NInfer v3 files: entry and part headers, alignment, split capacities, part names.

Container spec §1 (integer rules), §2.1 (part naming), §2.3 (split capacities), §3.1 (entry header),
§3.2 (part header). Everything here is pure arithmetic on Python ints, so sizes are exact and every
sum, product and alignment is checked against U64 before anyone allocates or seeks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ninfer_core.errors import FramingError, WriterError

U64_MAX = (1 << 64) - 1

HEADER_BYTES = 32
PAGE = 4096  # entry payload alignment and the fixed part payload start (§3.1, §3.2)
TENSOR_ALIGNMENT = 256  # every tensor layout's object alignment (§5.3, §6.2)

MAX_FILES = 100_000  # writer limit on the number of files of one artifact (implementation choice)

ENTRY_MAGIC = b"NINFER\x00\x03"
PART_MAGIC = b"NINPRT\x00\x03"
PART_PAYLOAD_START = PAGE

_HEADER = struct.Struct("<8sQ16s")


def align_up(x: int, a: int) -> int:
    """``ceil_div(x, a) * a`` (§1)."""
    return -(-x // a) * a


def elements(shape: tuple[int, ...] | list[int]) -> int:
    """``elements(shape)``: 1 for a scalar ``[]``, else the product of the dimensions (§1)."""
    n = 1
    for d in shape:
        n *= d
    return n


@dataclass(frozen=True)
class EntryHeader:
    """The 32-byte entry header (§3.1)."""

    json_bytes: int
    artifact_id: bytes

    @property
    def metadata_end(self) -> int:
        return HEADER_BYTES + self.json_bytes

    @property
    def payload_start(self) -> int:
        """``entry_payload_start = align_up(32 + json_bytes, 4096)``."""
        return align_up(self.metadata_end, PAGE)

    def pack(self) -> bytes:
        return _HEADER.pack(ENTRY_MAGIC, self.json_bytes, self.artifact_id)

    @classmethod
    def unpack(cls, raw: bytes, *, file: str | None = None) -> EntryHeader:
        """Parse and check magic and ``json_bytes`` (PositiveU64 by construction of the struct)."""
        if len(raw) < HEADER_BYTES:
            raise FramingError(
                f"entry file is {len(raw)} bytes, shorter than the {HEADER_BYTES}-byte header",
                file=file, section="§3.1", rule="entry_too_short",
            )
        magic, json_bytes, artifact_id = _HEADER.unpack_from(raw)
        if magic != ENTRY_MAGIC:
            hint = " (this is a continuation part; open the entry file)" if magic == PART_MAGIC else ""
            raise FramingError(
                f"bad entry magic {magic.hex(' ')}, expected {ENTRY_MAGIC.hex(' ')}{hint}",
                file=file, section="§3.1", rule="entry_magic",
            )
        if json_bytes == 0:
            raise FramingError("json_bytes is 0; it must be a PositiveU64", file=file, section="§3.1",
                               rule="json_bytes_range")
        return cls(json_bytes, artifact_id)


@dataclass(frozen=True)
class PartHeader:
    """The 32-byte continuation-part header (§3.2); its payload starts at offset 4096."""

    part_index: int
    artifact_id: bytes

    def pack(self) -> bytes:
        return _HEADER.pack(PART_MAGIC, self.part_index, self.artifact_id)

    @classmethod
    def unpack(cls, raw: bytes) -> tuple[bytes, PartHeader] | None:
        """Return ``(magic, header)`` or None when fewer than 32 bytes were given; the caller checks."""
        if len(raw) < HEADER_BYTES:
            return None
        magic, part_index, artifact_id = _HEADER.unpack_from(raw)
        return magic, cls(part_index, artifact_id)


def part_name(entry_name: str, index: int) -> str:
    """Generated continuation name (§2.1): ``<entry>.part-<index>``, zero-padded to four digits."""
    if index < 1:
        raise ValueError(f"part index must be >= 1, got {index}")
    return f"{entry_name}.part-{index:04d}"


@dataclass(frozen=True)
class SplitCapacities:
    """Per-file payload capacities of the current writer for a limit (§2.3)."""

    entry: int
    part: int


def split_capacities(limit: int, entry_payload_start: int) -> SplitCapacities:
    """``entry_capacity = floor((limit - eps)/4096)*4096``, ``part_capacity = floor((limit - 4096)/4096)*4096``.

    Raises :class:`~ninfer_core.errors.WriterError` (rule ``limit_too_small``) when the limit cannot hold
    the headers or either capacity is not positive — §2.3 requires this check before splitting.
    """
    entry = (limit - entry_payload_start) // PAGE * PAGE
    part = (limit - PAGE) // PAGE * PAGE
    if entry <= 0 or part <= 0:
        raise WriterError(
            f"max file size {limit} is too small: entry payload starts at {entry_payload_start} and a part "
            f"payload at {PAGE}, leaving entry capacity {max(entry, 0)} and part capacity {max(part, 0)}; "
            f"both must be positive multiples of {PAGE}",
            section="§2.3", rule="limit_too_small",
        )
    return SplitCapacities(entry, part)


def split_payload(payload_bytes: int, limit: int | None, entry_payload_start: int) -> list[int]:
    """The ``payload_bytes`` of each file for a total payload and an optional limit (§2.3).

    No limit, or ``entry_payload_start + payload_bytes <= limit``: one file. Otherwise the entry and
    every non-final part are filled to capacity and the last part holds the rest.
    """
    if payload_bytes <= 0:
        raise ValueError("payload_bytes must be positive")
    if limit is None or entry_payload_start + payload_bytes <= limit:
        return [payload_bytes]
    cap = split_capacities(limit, entry_payload_start)
    rest = payload_bytes - cap.entry
    full, last = divmod(rest, cap.part)
    count = 1 + full + (1 if last else 0)
    if count > MAX_FILES:
        raise WriterError(
            f"max file size {limit} would split {payload_bytes} payload bytes into {count} files; this writer "
            f"makes at most {MAX_FILES}",
            section="§2.3", rule="too_many_parts",
        )
    sizes = [cap.entry]
    sizes.extend([cap.part] * full)
    if last:
        sizes.append(last)
    return sizes
