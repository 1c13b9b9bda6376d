"""Temporary files of a writer, their stale-leftover cleanup, and no-overwrite publishing (§11.4).

A writer creates every file of an artifact as a hidden temporary in the target directory::

    .<final name>.tmp-<pid>-<token>      e.g. .model.ninfer.part-0001.tmp-4242-9f3c0a1b

(a final name too long for that to fit the file system's 255-byte name limit is carried as ``~`` and 16 hex
digits of its entry name's SHA-256, then its ``.part-NNNN``: :func:`temp_stem`)
and publishes each by linking it to its final name, which fails if that name exists (no overwrite,
even against a concurrent writer), then removing the temporary. A writer that dies without running
its cleanup (``SIGKILL``, power loss) leaves temporaries behind but never a published artifact.
:func:`cleanup_temporaries` removes the temporaries of an entry name whose writing process no longer
exists; every :class:`~ninfer_core.ArtifactWriter` runs it for its target before starting.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import stat
from pathlib import Path

from ninfer_core.container.framing import ENTRY_MAGIC, PART_MAGIC
from ninfer_core.errors import ArtifactExistsError, WriterError

log = logging.getLogger(__name__)


#: bytes a temporary's name adds to its stem: ".", ".tmp-", a pid (at most 7 digits on Linux), "-", 8 hex
TEMP_EXTRA = 22
NAME_MAX = 255
_PART_SUFFIX = re.compile(r"\.part-\d{4,}\Z")


def _hashed_stem(entry_name: str) -> str:
    return "~" + hashlib.sha256(os.fsencode(entry_name)).hexdigest()[:16]


def temp_stem(final_name: str) -> str:
    """The final name as its temporary carries it: whole when ``.<name>.tmp-<pid>-<token>`` fits
    :data:`NAME_MAX` bytes, else ``~<16 hex of the entry name's SHA-256>[.part-NNNN]`` — so an output name
    that itself fits is never refused for its temporary's length."""
    if len(os.fsencode(final_name)) + TEMP_EXTRA <= NAME_MAX:
        return final_name
    m = _PART_SUFFIX.search(final_name)
    entry, part = (final_name[:m.start()], m.group(0)) if m else (final_name, "")
    return _hashed_stem(entry) + part


def temp_name(final_name: str, token: str) -> str:
    return f".{temp_stem(final_name)}.tmp-{os.getpid()}-{token}"


def new_token() -> str:
    return secrets.token_hex(4)


def _stems(entry_name: str) -> str:
    """A regex of the stems an entry's temporaries may carry (:func:`temp_stem`)."""
    return f"(?:{re.escape(entry_name)}|{re.escape(_hashed_stem(entry_name))})"


def _pattern(entry_name: str) -> re.Pattern:
    return re.compile(r"\." + _stems(entry_name) + r"(?:\.part-\d{4,})?\.tmp-(\d+)-[0-9a-f]+\Z")


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, owned by someone else
        return True
    return True


def stale_temporaries(entry: str | os.PathLike) -> list[Path]:
    """Temporaries of writers of ``entry`` (any of its files) whose process has ended."""
    entry = Path(entry)
    pattern = _pattern(entry.name)
    try:
        names = os.listdir(entry.parent if str(entry.parent) else ".")
    except OSError:
        return []
    out = []
    for name in sorted(names):
        m = pattern.match(name)
        if m and not _process_alive(int(m.group(1))):
            out.append(entry.parent / name)
    return out


def head_artifact_id(path: Path, magic: bytes) -> bytes | None:
    """The ``artifact_id`` in the 32-byte header of the regular file ``path`` when it starts with ``magic``
    (§3.1, §3.2); None for anything else (missing, not a regular file, short, other magic, all-zero ID)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.pread(fd, 32, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) < 32 or raw[:8] != magic or raw[16:32] == bytes(16):
        return None
    return raw[16:32]


def orphan_parts(entry: str | os.PathLike) -> list[Path]:
    """Published parts of ``entry`` left by a writer that died between publishing its parts and its entry.

    The writer publishes the parts, then the entry, and removes its entry temporary only once the entry is
    published (docs/format/container.md §11.4). So while the entry does not exist, a dead writer's entry
    temporary records the ``artifact_id`` its published parts carry: a final-named part
    ``<entry>.part-NNNN`` whose header holds that ID is an orphan. Nothing is returned when the entry
    exists, and a part whose ID is also held by a live writer's temporary is never returned.
    """
    entry = Path(entry)
    if os.path.lexists(entry):
        return []
    directory = entry.parent if str(entry.parent) else Path(".")
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    temp = re.compile(r"\." + _stems(entry.name) + r"\.tmp-(\d+)-[0-9a-f]+\Z")
    part = re.compile(re.escape(entry.name) + r"\.part-\d{4,}\Z")
    dead, live = set(), set()
    for name in names:
        m = temp.match(name)
        if m:
            artifact_id = head_artifact_id(directory / name, ENTRY_MAGIC)
            if artifact_id is not None:
                (live if _process_alive(int(m.group(1))) else dead).add(artifact_id)
    dead -= live
    if not dead:
        return []
    return [entry.parent / name for name in sorted(names)
            if part.match(name) and head_artifact_id(directory / name, PART_MAGIC) in dead]


def cleanup_temporaries(entry: str | os.PathLike) -> list[Path]:
    """Remove the leftovers of dead writers of ``entry``; return what was removed.

    Only hidden files named ``.<entry name>[.part-NNNN].tmp-<pid>-<hex>`` whose ``<pid>`` is not a live
    process are touched, and the parts such a writer had already published when it died before its
    entry (:func:`orphan_parts`, found from its entry temporary before that is removed); other published
    files and live writers' temporaries are never removed.
    """
    removed = []
    for path in orphan_parts(entry) + stale_temporaries(entry):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot remove stale temporary %s: %s", path, exc)
            continue
        log.info("removed leftover of a dead writer: %s", path)
        removed.append(path)
    return removed


def publish_noreplace(temp: Path, final: Path) -> None:
    """Give ``temp`` the name ``final`` unless ``final`` exists (then :class:`ArtifactExistsError`)."""
    try:
        os.link(temp, final)
    except FileExistsError:
        raise ArtifactExistsError(f"{final.name} appeared while writing; it is not overwritten", file=str(final),
                                  section="§11.4", rule="target_exists") from None
    except OSError:
        # File systems without hard links: check, then rename (a race with another writer remains possible).
        if os.path.lexists(final):
            raise ArtifactExistsError(f"{final.name} appeared while writing; it is not overwritten",
                                      file=str(final), section="§11.4", rule="target_exists") from None
        try:
            os.rename(temp, final)
        except OSError as exc:
            raise WriterError(f"cannot publish {final.name}: {exc.strerror}", file=str(final), section="§11.4",
                              rule="publish_failed") from None
        return
    os.unlink(temp)


def fsync_directory(directory: Path) -> None:
    """Make the names published in ``directory`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
