"""Where the MCP server may read: its roots (docs/inspect.md §MCP roots).

A path argument is first checked as text (a string, absolute, no NUL byte, at most 4,096 bytes with no
component over 255 bytes: :func:`path_argument`), then resolved (symlinks followed) and refused unless it
lies inside one of the server's roots (``convert mcp --root DIR``, default the working directory) **and**,
when the client declared MCP roots, inside one of those too: neither side can widen the other. The refusal
(:func:`outside_roots`) is the same whatever the file is — missing, a directory, unreadable — so it reveals
nothing about it.

While a tool reads, :func:`confined` also guards every file the reader opens or lists on its own (an HF
directory's shards, a ``.ninfer`` entry's parts, a calbin package's members): a Python audit hook refuses
an ``open``, ``os.listdir`` or ``os.scandir`` whose resolved path leaves the allowed roots, so a symlink
inside a root that points outside is refused too. Python's own code files (the interpreter importing a
module on first use) stay readable.
"""

from __future__ import annotations

import contextvars
import importlib.machinery
import os
import sys
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

from converters.errors import SourceError
from converters.inspect.rejections import InspectionRejected, invalid_input
from converters.sources.fileio import NAME_MAX, PATH_MAX

#: the longest path argument, in bytes, and the longest component: the Linux limits the readers name too
MAX_PATH_BYTES, MAX_NAME_BYTES = PATH_MAX, NAME_MAX
_CODE_SUFFIXES = tuple(importlib.machinery.all_suffixes())
_GUARDED_EVENTS = {"open", "os.listdir", "os.scandir"}
#: the allowed root sets of the reading in progress (``None``: no confinement)
_ACTIVE: contextvars.ContextVar[tuple[tuple[str, ...], ...] | None] = contextvars.ContextVar("roots", default=None)
_hook_installed = False


def path_argument(path, field: str) -> str:
    """``path`` as a checked path argument (text rules only, nothing is touched on disk)."""
    if not isinstance(path, str):
        raise invalid_input(f"{field} must be a string", field, "path_valid")
    if "\0" in path:
        raise invalid_input(f"{field} contains a NUL byte", field, "path_valid")
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_input(f"{field} is not valid Unicode text (a lone surrogate)", field, "path_valid") from None
    if len(raw) > MAX_PATH_BYTES:
        raise invalid_input(f"{field} is {len(raw)} bytes long; a path has at most {MAX_PATH_BYTES}", field,
                            "path_valid")
    longest = max(len(c) for c in raw.split(b"/"))
    if longest > MAX_NAME_BYTES:
        raise invalid_input(f"{field} has a component of {longest} bytes; a component has at most "
                            f"{MAX_NAME_BYTES}", field, "path_valid")
    if not path.startswith("/"):
        raise invalid_input(f"{field} must be an absolute path", field, "path_valid")
    return path


def _inside(resolved: str, roots: tuple[str, ...]) -> bool:
    return any(resolved == r or resolved.startswith(r.rstrip("/") + "/") for r in roots)


class Roots:
    """The server's roots: existing directories, resolved once at start."""

    def __init__(self, dirs) -> None:
        resolved = []
        for d in dirs:
            path = path_argument(os.path.abspath(os.fspath(d)), "--root")
            real = os.path.realpath(path)
            if not os.path.isdir(real):
                raise SourceError("a root must be an existing directory", file=str(d), category="missing",
                                  rule="root_directory", section="docs/inspect.md §MCP roots")
            resolved.append(real)
        self.dirs = tuple(dict.fromkeys(resolved))

    def allowed(self, client: tuple[str, ...] | None) -> tuple[tuple[str, ...], ...]:
        """The root sets a path must lie inside (every one of them)."""
        return (self.dirs,) if client is None else (self.dirs, client)


def client_root_dirs(uris) -> tuple[str, ...]:
    """The directories of the client's ``file://`` roots, resolved (other schemes allow nothing)."""
    out = []
    for uri in uris:
        parts = urlsplit(str(uri))
        if parts.scheme == "file" and parts.netloc in ("", "localhost"):
            path = unquote(parts.path)
            if path.startswith("/") and "\0" not in path:
                out.append(os.path.realpath(path))
    return tuple(out)


def outside_roots(path: str, field: str | None, allowed: tuple[tuple[str, ...], ...]) -> InspectionRejected:
    """The refusal of a path outside the roots (``field``: the argument; ``None``: a file the reader reached
    on its own); it says nothing about the file."""
    what = field or "a file the inspection reached on its own (a shard, part or member)"
    diagnostics = {"roots": list(allowed[0]), "client_roots": list(allowed[1]) if len(allowed) > 1 else None}
    return InspectionRejected(f"{what} is outside the roots this server may read (convert mcp --root, and the "
                              "client's MCP roots); nothing of it was read", code="target_unavailable",
                              category="unavailable_target", file=path, json_path=field, rule="outside_roots",
                              diagnostics=diagnostics)


def within(path, field: str, allowed: tuple[tuple[str, ...], ...]) -> str:
    """``path`` checked as an argument and inside every root set of ``allowed``; returns it unchanged."""
    path = path_argument(path, field)
    real = os.path.realpath(path)
    if not all(_inside(real, roots) for roots in allowed):
        raise outside_roots(path, field, allowed)
    return path


def _audit(event: str, args: tuple) -> None:
    if event not in _GUARDED_EVENTS:
        return
    allowed = _ACTIVE.get()
    if allowed is None or not args or not isinstance(args[0], str | bytes | os.PathLike):
        return
    path = os.fsdecode(args[0])
    if path.endswith(_CODE_SUFFIXES) or os.path.basename(os.path.dirname(path)) == "__pycache__" or "\0" in path:
        return  # the interpreter importing code (and caching it); a NUL byte fails in the call itself
    real = os.path.realpath(path)
    if not all(_inside(real, roots) for roots in allowed):
        raise outside_roots(path, None, allowed)


@contextmanager
def confined(allowed: tuple[tuple[str, ...], ...]):
    """Inside this block (this thread or task), every file opened or listed must lie inside ``allowed``."""
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True
    token = _ACTIVE.set(allowed)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
