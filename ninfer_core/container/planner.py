"""Writer planning: object placement, the files table and the JSON reservation (§2.3, §3.1, §5.3, §11.4).

Objects are placed in declaration order: tensors at the next multiple of 256, resources at the next
byte; the payload ends at the last object's end (§5.3: a regular writer leaves gaps only for
alignment and truncates after the last object).

The files table depends on ``entry_payload_start``, which depends on the JSON length, which depends
on the files table. §11.4 step 4 resolves this by reservation: choose ``json_bytes`` (the JSON text
plus trailing spaces, §3.1), derive ``entry_payload_start`` and the split (§2.3), serialise, and if the
text outgrew the reservation, enlarge it and split again. The reservation only grows, so the number
of files only grows, and the loop ends. By default ``json_bytes`` is chosen so that the JSON ends
exactly on a 4096 boundary (no alignment zone), e.g. 65504 for a payload starting at 65536.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from ninfer_core.container import jsontext
from ninfer_core.container.framing import (
    HEADER_BYTES,
    PAGE,
    TENSOR_ALIGNMENT,
    U64_MAX,
    align_up,
    part_name,
    split_payload,
)
from ninfer_core.container.records import file_table
from ninfer_core.errors import SchemaError, WriterError

_MAX_ROUNDS = 64


@dataclass(frozen=True)
class FilePlan:
    """The final framing of an artifact: JSON text (padded), per-file sizes and names."""

    json_text: bytes  # exactly json_bytes long, trailing spaces included
    json_bytes: int
    entry_payload_start: int
    sizes: tuple[int, ...]
    names: tuple[str | None, ...]  # None for the entry (files[0].path is null)
    root: dict  # the directory as written

    @property
    def payload_bytes(self) -> int:
        return sum(self.sizes)

    def file_bytes(self, index: int) -> int:
        return self.payload_start(index) + self.sizes[index]

    def payload_start(self, index: int) -> int:
        """Where file ``index``'s share of the payload begins inside that file (§3.1 entry, §3.2 parts)."""
        return self.entry_payload_start if index == 0 else PAGE

    @functools.cached_property
    def file_offsets(self) -> tuple[int, ...]:
        """The logical payload offset at which each file's share begins (§11.2)."""
        return (0, *itertools.accumulate(self.sizes))[:len(self.sizes)]

    def file_spans(self, offset: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        """The logical payload range ``[offset, end)`` cut at file boundaries (§11.2), as a writer maps
        it: per file touched, ``(index, start, stop, file_offset)`` — the logical sub-range
        ``[start, stop)`` and where it begins in file ``index``. The caller checks the range lies in the
        payload."""
        offsets = self.file_offsets
        i = bisect.bisect_right(offsets, offset) - 1
        pos = offset
        while pos < end:
            stop = min(end, offsets[i] + self.sizes[i])
            if stop > pos:
                yield i, pos, stop, self.payload_start(i) + (pos - offsets[i])
                pos = stop
            i += 1


def place(offset: int, kind: str) -> int:
    """Where the next object goes: tensors 256-aligned, resources at any byte (§5.3)."""
    return align_up(offset, TENSOR_ALIGNMENT) if kind == "tensor" else offset


def plan_files(root_without_files: dict, payload_bytes: int, entry_name: str, *,
               max_file_bytes: int | None = None, reserve_json_bytes: int | None = None) -> FilePlan:
    """Fix ``json_bytes`` and the files table together (§11.4 steps 3–4).

    ``root_without_files`` is the directory JSON with a placeholder ``files`` member (its position in
    the member order is kept). ``reserve_json_bytes`` is a minimum ``json_bytes``.
    """
    if payload_bytes <= 0 or payload_bytes > U64_MAX:
        raise WriterError(f"payload of {payload_bytes} bytes cannot be written (positive U64 needed)",
                          section="§2.2", rule="payload_size")
    if max_file_bytes is not None and max_file_bytes <= 0:
        raise WriterError(f"max file size {max_file_bytes} must be positive", section="§2.3",
                          rule="limit_too_small")
    reserve = max(1, reserve_json_bytes or 1)
    sizes = [payload_bytes]
    for _ in range(_MAX_ROUNDS):
        names = [None] + [part_name(entry_name, i) for i in range(1, len(sizes))]
        root = dict(root_without_files)
        root["files"] = [f.to_json() for f in file_table(sizes, names, 0)]
        text = jsontext.encode(root)
        if len(text) > reserve:
            reserve = max(reserve, align_up(HEADER_BYTES + len(text), PAGE) - HEADER_BYTES)
        entry_payload_start = align_up(HEADER_BYTES + reserve, PAGE)
        new_sizes = split_payload(payload_bytes, max_file_bytes, entry_payload_start)
        if new_sizes == sizes and len(text) <= reserve:
            if entry_payload_start + sizes[0] > U64_MAX:
                raise SchemaError("entry file size leaves U64", section="§1", rule="u64_overflow")
            return FilePlan(jsontext.pad(text, reserve), reserve, entry_payload_start, tuple(sizes),
                            tuple(names), root)
        sizes = new_sizes
    raise WriterError("the files table and JSON reservation did not settle", section="§11.4",
                      rule="plan_unstable")
