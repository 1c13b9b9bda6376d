"""Load a YAML data file keeping the line of every value, so rule errors can say ``file:line``.

PyYAML's ``safe_load`` forgets where a value came from and silently keeps the last of two equal keys.
Mapping and recipe files are rules with evidence: an error must point at the line that is wrong, and a
duplicated key is a mistake to report, not to resolve. So the file is *composed* into nodes
(``yaml.SafeLoader.get_single_node``), scalars are built with the safe constructor, and the marks are
kept in :class:`Located` — the plain Python value plus a ``path -> line`` table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

#: Largest data file accepted (mappings and recipes are a few kB; refuse a runaway input before parsing).
MAX_FILE_BYTES = 4 * 1024 * 1024

Path_ = tuple[str | int, ...]
#: libyaml's composer when PyYAML has it (the same safe constructor and marks, about 7x faster: the shipped
#: mappings and recipes compose in 0.07 s instead of 0.54 s, a fixed cost of every conversion)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LocatedError(ValueError):
    """YAML that is not well-formed for a rules file: ``line`` says where (1-based)."""

    def __init__(self, message: str, line: int | None):
        self.line = line
        super().__init__(message)


@dataclass
class Located:
    """A parsed YAML document: ``data`` (dicts, lists, scalars) and the 1-based line of each path."""

    file: str
    data: object
    lines: dict[Path_, int] = field(default_factory=dict)

    def line(self, path: Path_) -> int | None:
        """Line of ``path``, or of its nearest ancestor that has one."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def where(self, path: Path_) -> str:
        return f"{self.file}:{self.line(path)}"


def load_located(path: str | Path) -> Located:
    """Read (:func:`~converters.sources.fileio.read_bounded`: a regular file of at most
    :data:`MAX_FILE_BYTES`) and compose ``path``; raises :class:`LocatedError` for syntax errors and
    duplicate keys."""
    from converters.sources.fileio import read_bounded

    return parse_located(read_bounded(path, MAX_FILE_BYTES, what="YAML file").decode("utf-8"), str(path))


def parse_located(text: str, file: str) -> Located:
    """Compose ``text``; any YAML error (a syntax error, or a character YAML does not allow, such as a control
    character: PyYAML's ``ReaderError``, which has a position, not a mark) is a :class:`LocatedError`."""
    try:
        loader = _LOADER(text)
    except yaml.reader.ReaderError as exc:  # the pure-Python reader checks the characters at once
        raise _reader_error(exc, text) from None
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise LocatedError(f"YAML syntax: {exc.problem or exc}", mark.line + 1 if mark else None) from None
        except yaml.reader.ReaderError as exc:
            raise _reader_error(exc, text) from None
        located = Located(file=file, data=None)
        if node is None:
            raise LocatedError("empty document", 1)
        try:
            located.data = _build(node, (), located, loader)
        except LocatedError:
            raise
        except yaml.MarkedYAMLError as exc:  # a tag no safe constructor knows (!foo)
            mark = exc.problem_mark or exc.context_mark
            raise LocatedError(f"YAML value: {exc.problem or exc}", mark.line + 1 if mark else None) from None
        except (ValueError, OverflowError) as exc:  # a scalar its constructor refuses (a timestamp of day 30 Feb)
            raise LocatedError(f"YAML value: {exc}", None) from None
        except RecursionError:
            raise LocatedError("YAML nested too deep", None) from None
        return located
    finally:
        loader.dispose()


def _reader_error(exc: yaml.reader.ReaderError, text: str) -> LocatedError:
    where = exc.position if isinstance(exc.position, int) and 0 <= exc.position <= len(text) else None
    code = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
    return LocatedError(f"YAML does not allow the character #x{code:04x} ({exc.reason})",
                        text.count("\n", 0, where) + 1 if where is not None else None)


def _build(node: yaml.Node, path: Path_, located: Located, loader: yaml.SafeLoader) -> object:
    located.lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, object] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise LocatedError("mapping keys must be plain strings", key_node.start_mark.line + 1)
            key = loader.construct_object(key_node)
            if key == "<<":
                raise LocatedError("YAML merge keys (<<) are not accepted", key_node.start_mark.line + 1)
            if not isinstance(key, str):
                key = str(key_node.value)
            if key in out:
                raise LocatedError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
            out[key] = _build(value_node, (*path, key), located, loader)
            located.lines[(*path, key)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), located, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)
