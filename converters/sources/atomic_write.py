"""Report files published whole and never over an existing file (``validate -o``, ``inspect --evidence-output``).

The rule is the artifact writer's (docs/format/container.md, §11.4): the bytes go to a hidden temporary
beside the target (``.<name>.<random>.tmp``), are flushed to disk, and the temporary is then hard-linked
to the target's name, which fails if that name exists — also when another process created it meanwhile.
On a file system without hard links the name is checked, then the temporary renamed (a race with another
writer remains possible there). The temporary is removed on every path, so a failure or Ctrl-C leaves
neither a partial report nor a leftover. :func:`replace_file` is the same for a file that is updated in
place (an artifact's acceptance record): the temporary is renamed over it.

Each caller names the error it raises for an existing target (``exists``): its message and rule are part
of that command's contract. Any other failure to write (a missing directory, a read-only or full file
system, an I/O error) is an :class:`OutputWriteError` naming the target and the reason (rule
``output_write``), with nothing left behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from converters.errors import ConverterError
from ninfer_core.container.tempfiles import temp_stem


class OutputWriteError(ConverterError, OSError):
    """A report, evidence or plan file could not be written; nothing was published."""

    kind = "output"


def output_write_error(path: str | Path, exc: OSError, action: str = "write") -> OutputWriteError:
    """The typed error for an ``OSError`` met while writing the output ``path``."""
    reason = exc.strerror or str(exc)
    return OutputWriteError(f"cannot {action} the output file: {reason}", file=str(path), rule="output_write")


def current_umask() -> int:
    """The process umask (read by setting it and putting it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def refuse_existing(path: str | Path, exists: Callable[[], Exception]) -> None:
    """Raise ``exists()`` when ``path`` names anything, a dangling link included."""
    if os.path.lexists(path):
        raise exists()


def _flushed_temporary(path: Path, data: bytes) -> str:
    """A hidden temporary beside ``path`` holding ``data``, flushed to disk, with the mode ``open()`` gives."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{temp_stem(path.name)}.", suffix=".tmp",
                                   dir=path.parent if str(path.parent) else ".")
    except OSError as exc:
        raise output_write_error(path, exc, "create") from None
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o666 & ~current_umask())  # as open() would: mkstemp makes it 0600
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
    except BaseException as exc:  # Ctrl-C included: no temporary is left behind
        _remove(tmp)
        if isinstance(exc, OSError):
            raise output_write_error(path, exc) from None
        raise
    return tmp


def _remove(tmp: str) -> None:
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    except OSError:
        pass


def write_new_file(path: str | Path, data: bytes, *, exists: Callable[[], Exception]) -> Path:
    """Publish ``data`` as the new file ``path`` (see the module docstring); ``exists()`` is raised when the
    name is taken, before or while writing."""
    path = Path(path)
    refuse_existing(path, exists)
    tmp = _flushed_temporary(path, data)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise exists() from None
        except OSError:  # a file system without hard links
            refuse_existing(path, exists)
            os.replace(tmp, path)
    except OutputWriteError:
        raise
    except OSError as exc:
        if isinstance(exc, ConverterError):  # the caller's ``exists()`` error
            raise
        raise output_write_error(path, exc) from None
    finally:
        _remove(tmp)
    return path


def replace_file(path: str | Path, data: bytes) -> Path:
    """Publish ``data`` as ``path``, replacing what is there in one rename (a reader sees the old file or the
    new one, never a part): for a file that is updated, such as an artifact's acceptance record."""
    path = Path(path)
    tmp = _flushed_temporary(path, data)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise output_write_error(path, exc) from None
    finally:
        _remove(tmp)
    return path


def write_new_json(path: str | Path, doc: Any, *, exists: Callable[[], Exception], indent: int = 2,
                   ensure_ascii: bool = True) -> Path:
    """:func:`write_new_file` of ``doc`` as JSON (``indent``, ``ensure_ascii`` as :func:`json.dumps`) plus a
    final newline."""
    text = json.dumps(doc, indent=indent, ensure_ascii=ensure_ascii) + "\n"
    return write_new_file(path, text.encode("utf-8"), exists=exists)
