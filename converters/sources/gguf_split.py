"""gguf-split shard sets: which files make one model, and the rules that make them agree.

llama.cpp's ``llama-gguf-split --split`` and gguf-py's ``GGUFWriter(split_max_tensors=…, split_max_size=…)``
write one model as shards ``<prefix>-00001-of-00004.gguf`` …: each a complete GGUF holding some of the
tensors and the keys ``split.no`` (UINT16, from 0), ``split.count`` (UINT16) and ``split.tensors.count``
(INT32, the tensors of the whole set); the first shard holds the model's metadata. Rules
(docs/inspect.md §Split GGUF files; llama.cpp ``llama_split_path`` and ``llama_model_loader``):

- a file is a shard when it declares ``split.count`` above 1 (a count of 0 or 1 — ``--merge`` leaves 0 —
  is one file); the split keys have the types above, as llama.cpp reads them;
- its name is ``<prefix>-<split.no + 1, 5 digits>-of-<split.count, 5 digits>.gguf``; the set is the
  ``split.count`` files of that prefix in its directory: each exists, and no other file there is named
  as a shard of that prefix;
- every shard is a GGUF the strict parser accepts, with the first shard's version and byte order, the
  ``split.no`` its name gives and the first shard's ``split.count``; a key a later shard repeats has the
  first shard's type and value (``split.no`` aside);
- no tensor name is in two shards, and the shards hold ``split.tensors.count`` tensors together.

A shard is read through whatever opened it (:class:`~converters.sources.gguf.GGUFSource`): these checks
see its path (``.path``), header (``.header``) and open descriptor (``.opened``) only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gguf.constants import GGUFValueType, Keys

from converters.errors import SourceError, SourceFormatError
from converters.sources.fileio import READ_CHUNK
from converters.sources.gguf_values import type_name

SPLIT_NO = Keys.Split.LLM_KV_SPLIT_NO
SPLIT_COUNT = Keys.Split.LLM_KV_SPLIT_COUNT
SPLIT_TENSORS = Keys.Split.LLM_KV_SPLIT_TENSORS_COUNT
KEY_TYPES = {SPLIT_NO: GGUFValueType.UINT16, SPLIT_COUNT: GGUFValueType.UINT16, SPLIT_TENSORS: GGUFValueType.INT32}
SHARD_SUFFIX = re.compile(r"-(\d{5})-of-(\d{5})\.gguf\Z")
SECTION = "docs/inspect.md §Split GGUF files"


@dataclass(frozen=True)
class Split:
    """What one shard declares: its position ``no`` (from 0), the shard ``count`` and the set's tensor count."""

    no: int
    count: int
    tensors: int | None

    def name(self, prefix: str, no: int | None = None) -> str:
        """The file name of shard ``no`` (default: this one) of the set with ``prefix``."""
        return f"{prefix}-{(self.no if no is None else no) + 1:05d}-of-{self.count:05d}.gguf"


def _error(path, key: str | None, message: str, rule: str, **kw) -> SourceFormatError:
    return SourceFormatError(message, file=str(path), json_path=key, rule=rule, section=SECTION, **kw)


def _value(path, hdr, key: str):
    """The integer value of split key ``key`` (None when absent), refused unless it has llama.cpp's type."""
    entry = next((e for e in hdr.metadata if e.key == key), None)
    if entry is None:
        return None
    if entry.vtype != KEY_TYPES[key]:
        raise _error(path, key, f"{key} is {type_name(entry.vtype)}; llama.cpp reads it as "
                     f"{KEY_TYPES[key].name}", "gguf_split_key_type")
    return entry.value


def declared(path, hdr) -> Split | None:
    """The split declaration of a parsed header, or None for a single file (no ``split.count``, or one
    of 0 or 1)."""
    count = _value(path, hdr, SPLIT_COUNT)
    if count is None or count <= 1:
        return None
    no = _value(path, hdr, SPLIT_NO)
    if no is None:
        raise _error(path, SPLIT_NO, f"split.count is {count} but split.no is missing: the shard's position "
                     "in its set is unknown", "gguf_split_key")
    if no >= count:
        raise _error(path, SPLIT_NO, f"split.no {no} is not below split.count {count} (shards count from 0)",
                     "gguf_split_no")
    return Split(no, count, _value(path, hdr, SPLIT_TENSORS))


def prefix_of(path: Path, split: Split) -> str:
    """The set's name prefix from the name of the shard at ``path`` declaring ``split``; raises when that
    name is not the one llama.cpp gives the shard."""
    suffix = split.name("")
    if not path.name.endswith(suffix) or len(path.name) == len(suffix):
        raise _error(path, SPLIT_NO, f"declares split.no {split.no} of split.count {split.count}, so its name must "
                     f"end in {suffix!r} (llama.cpp's shard naming): the other shards are found by that name",
                     "gguf_split_name")
    return path.name[: -len(suffix)]


def shard_paths(path: Path, split: Split) -> list[Path]:
    """Every shard of the set the shard at ``path`` (declaring ``split``) belongs to, in order; raises when
    its name is not the one llama.cpp gives it, when a shard is missing or when another file in the
    directory is named as a shard of the same prefix."""
    prefix = prefix_of(path, split)
    paths = [path.with_name(split.name(prefix, i)) for i in range(split.count)]
    for i, p in enumerate(paths):
        if not p.is_file():
            raise SourceError(f"shard {i + 1} of {split.count} of the split set named by {path.name} is missing",
                              file=str(p), code="target_unavailable", category="missing", rule="gguf_split_missing",
                              section=SECTION)
    members = {p.name for p in paths}
    try:
        siblings = sorted(e.name for e in path.parent.iterdir())
    except OSError:  # an unlistable directory: the shards themselves were found by name
        siblings = []
    for n in siblings:
        if n not in members and n.startswith(prefix) and SHARD_SUFFIX.fullmatch(n[len(prefix):]):
            raise _error(path.with_name(n), None, f"named as a shard of {prefix!r} but not one of the {split.count} "
                         f"shards of {path.name}'s set (split.count {split.count}): move or rename it",
                         "gguf_split_extra")
    return paths


def check_position(shard, no: int, split: Split, named) -> None:
    """Shard ``no`` declares the position its name gives and the named shard's ``split.count``."""
    mine = declared(shard.path, shard.header)
    if mine is None or mine.count != split.count:
        said = "no split.count above 1" if mine is None else f"split.count {mine.count}"
        raise _error(shard.path, SPLIT_COUNT, f"declares {said}; {named.path.name} declares split.count "
                     f"{split.count}", "gguf_split_count")
    if mine.no != no:
        raise _error(shard.path, SPLIT_NO, f"declares split.no {mine.no}; its name makes it shard {no} (from 0)",
                     "gguf_split_no")


def check_agrees(shard, first) -> None:
    """A later shard has the first shard's version and byte order, and every key it repeats (``split.no``
    aside) has the first shard's type and value."""
    path, hdr, head = shard.path, shard.header, first.header
    if (hdr.version, hdr.byte_order) != (head.version, head.byte_order):
        raise _error(path, "version", f"GGUF v{hdr.version} {hdr.byte_order}-endian, the first shard "
                     f"{first.path.name} is v{head.version} {head.byte_order}-endian", "gguf_split_format")
    entries = {e.key: e for e in head.metadata}
    for e in hdr.metadata:
        ref = entries.get(e.key)
        if e.key == SPLIT_NO or ref is None:
            continue
        if e.vtype != ref.vtype or not _same_bytes(shard.opened, e, first.opened, ref):
            raise _error(path, e.key, f"{e.key} differs from the first shard {first.path.name}'s: the shards are "
                         "not of one model", "gguf_split_metadata")


def _same_bytes(fa, a, fb, b) -> bool:
    """Whether two metadata values are the same bytes (read in bounded chunks)."""
    n = a.value_end - a.value_offset
    if n != b.value_end - b.value_offset:
        return False
    for at in range(0, n, READ_CHUNK):
        k = min(READ_CHUNK, n - at)
        if fa.pread(k, a.value_offset + at) != fb.pread(k, b.value_offset + at):
            return False
    return True


def check_tensors(shards: list, split: Split) -> None:
    """No tensor name in two shards; the first shard's ``split.tensors.count`` tensors in all (llama.cpp
    reads the count there)."""
    owner: dict[str, Path] = {}
    for s in shards:
        for t in s.header.tensors:
            if t.name in owner:
                raise _error(s.path, t.name, f"tensor {t.name!r} is also in {owner[t.name].name}: a tensor is in one "
                             "shard only", "gguf_split_duplicate_tensor")
            owner[t.name] = s.path
    if split.tensors is None:
        raise _error(shards[0].path, SPLIT_TENSORS, "split.tensors.count is missing: the set's tensor count is "
                     "unknown", "gguf_split_key")
    if split.tensors != len(owner):
        counts = ", ".join(f"{s.path.name}: {len(s.header.tensors)}" for s in shards)
        raise _error(shards[0].path, SPLIT_TENSORS, f"split.tensors.count is {split.tensors}, the shards hold "
                     f"{len(owner)} ({counts})", "gguf_split_tensors_count")


def read_set(named, open_shard: Callable[[Path], object]) -> tuple[Split, list] | None:
    """The first shard's declaration and the shards of the set ``named`` (an opened shard) belongs to,
    checked and in order, or None when it is a single file. ``open_shard(path)`` opens another shard the way ``named`` was opened; the shards
    this opened are closed again when a check fails."""
    split = declared(named.path, named.header)
    if split is None:
        return None
    paths = shard_paths(named.path, split)
    shards: list = []
    try:
        for i, p in enumerate(paths):
            shards.append(named if i == split.no else open_shard(p))
            check_position(shards[-1], i, split, named)
        for s in shards[1:]:
            check_agrees(s, shards[0])
        first = declared(shards[0].path, shards[0].header)
        check_tensors(shards, first)
    except BaseException:
        for s in shards:
            if s is not named:
                s.close()
        raise
    return first, shards
