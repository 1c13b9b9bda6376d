"""Opening an entry file: header, JSON directory and every directory rule (container spec §3.1, §11.1).

:func:`load_entry` is shared by :func:`ninfer_core.open_artifact` (which raises the first problem) and
:func:`ninfer_core.validate` (which reports all of them). Framing problems that leave no directory to
check (bad magic, a JSON text that does not fit the file, invalid JSON) are raised at once.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ninfer_core.container import jsontext
from ninfer_core.container.framing import HEADER_BYTES, EntryHeader
from ninfer_core.container.payload import file_kind, pread_exact
from ninfer_core.container.problems import Problems
from ninfer_core.container.records import Directory, PhysicalObject
from ninfer_core.container.references import check_directory
from ninfer_core.container.schema import DirectoryParser
from ninfer_core.errors import FramingError, ReadError

MAX_JSON_BYTES = 1 << 30  # reader limit on the directory text (implementation choice, far above real models)
# The parsed directory costs far more than its text: up to ~140 bytes of Python objects per JSON value
# (measured: an object member, its key string and the dict slot), so the text alone does not bound memory.
# Before parsing, the reader estimates the cost from the structural characters (each `,` `:` `[` `{` may
# start a value) and the text length, and refuses a directory whose estimate exceeds the budget, so the
# worst accepted directory stays within 512 MiB of RSS with the rest of a validation (bench: container).
DIRECTORY_VALUE_COST = 160  # bytes per structural character (worst case measured: 133)
DIRECTORY_TEXT_COST = 4  # bytes per text byte: the raw text, its decoded str, string values
DIRECTORY_MEMORY_BUDGET = 384 << 20


def directory_memory_estimate(text: bytes | bytearray) -> int:
    """An upper estimate of the memory the parsed directory ``text`` takes (see the constants above)."""
    structural = text.count(b",") + text.count(b":") + text.count(b"[") + text.count(b"{")
    return DIRECTORY_VALUE_COST * structural + DIRECTORY_TEXT_COST * len(text)


@dataclass
class LoadedEntry:
    """An opened entry file: its descriptor, header, directory (None if unusable) and problems."""

    path: Path
    fd: int
    file_size: int
    header: EntryHeader
    directory: Directory | None
    index: dict[str, PhysicalObject]
    object_positions: dict[str, int]
    object_positions_list: list[int]
    problems: Problems

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_entry_fd(path: Path) -> tuple[int, int]:
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # a FIFO must not block
    except FileNotFoundError:
        raise ReadError("artifact entry file does not exist", file=name, section="§2.1",
                        rule="entry_missing") from None
    except OSError as exc:
        raise ReadError(f"artifact entry file cannot be opened: {exc.strerror}", file=name, section="§2.1",
                        rule="entry_unreadable") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"artifact entry is not a regular file ({file_kind(st.st_mode)})", file=name, section="§2.1",
                            rule="entry_unreadable")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def load_entry(path: str | os.PathLike) -> LoadedEntry:
    """Read and check an entry file. Raises for fatal framing/JSON errors; collects everything else."""
    path = Path(path)
    name = str(path)
    fd, size = open_entry_fd(path)
    try:
        raw = bytearray(min(size, HEADER_BYTES))
        pread_exact(fd, memoryview(raw), 0, file=name)
        header = EntryHeader.unpack(bytes(raw), file=name)
        if header.json_bytes > MAX_JSON_BYTES:
            raise FramingError(f"json_bytes = {header.json_bytes} exceeds this reader's limit of "
                               f"{MAX_JSON_BYTES} bytes", file=name, section="§3.1", rule="json_too_large")
        if header.metadata_end > size:
            raise FramingError(f"json_bytes = {header.json_bytes} runs past the end of the {size}-byte file",
                               file=name, section="§3.1", rule="json_bytes_range")
        text = bytearray(header.json_bytes)
        pread_exact(fd, memoryview(text), HEADER_BYTES, file=name)
        estimate = directory_memory_estimate(text)
        if estimate > DIRECTORY_MEMORY_BUDGET:
            raise FramingError(f"the {header.json_bytes}-byte directory would take an estimated "
                               f"{estimate >> 20} MiB once parsed, above this reader's "
                               f"{DIRECTORY_MEMORY_BUDGET >> 20} MiB budget for the directory", file=name,
                               section="§3.1", rule="json_too_large")
        root = jsontext.decode(text, file=name)
        del text
        problems = Problems(name)
        parser = DirectoryParser(problems, entry_payload_start=header.payload_start, entry_name=path.name,
                                 entry_dir=path.parent)
        directory = parser.parse(root)
        index: dict[str, PhysicalObject] = {}
        positions: dict[str, int] = {}
        positions_list: list[int] = parser.object_positions
        if directory is not None:
            index = check_directory(directory, problems, parser.invalid_object_ids, parser.object_positions)
            for k, obj in enumerate(directory.objects):
                positions.setdefault(obj.id, parser.object_positions[k])
            expected = directory.files[0].file_bytes
            if size != expected:
                problems.add(FramingError, f"entry file is {size} bytes, expected entry_payload_start "
                             f"{header.payload_start} + files[0].payload_bytes {directory.files[0].payload_bytes}"
                             f" = {expected}", json_path="$.files[0].payload_bytes", section="§3.1",
                             rule="entry_length")
    except BaseException:
        os.close(fd)
        raise
    return LoadedEntry(path, fd, size, header, directory, index, positions, positions_list, problems)
