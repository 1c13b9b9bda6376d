"""What a path holds, detected by content, and the one message every command gives for the wrong kind.

:func:`detect_kind` never trusts a name or extension:

===============  ==========================================================================================
``gguf``         a file starting with ``GGUF``
``safetensors``  a file whose first eight bytes are a little-endian header length followed by ``{``
``hf``           a directory that is not a calbin package (an HF checkpoint: ``config.json``, shards)
``calbin``       a directory shaped like a calbin package (:func:`is_calbin_package`), complete or not
``ninfer``       a file starting with ``NINFER\\0``: the entry file of a ``.ninfer`` artifact
``ninfer_part``  a file starting with ``NINPRT\\0``: a continuation part (docs/format/container.md, §3.2)
``json``         a file starting with ``{`` or ``[``: a stored Evidence record, a scale-out plan file
``unknown``      anything else
===============  ==========================================================================================

A command handed a kind it does not read raises :func:`wrong_kind`'s error: what the path is, what the
command reads, and which command reads what was given.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from converters.errors import SourceError
from converters.sources.fileio import OpenFile, is_directory
from ninfer_core.container.framing import ENTRY_MAGIC, PART_MAGIC

CALBIN_RUNTIME_META = "model_memory_reserved_info.txt"  # the file that marks a calbin package directory
CALBIN_SUBMODEL_META = "submodel_memory_reserved_info.txt"  # … and each of its submodel directories
CHECKPOINT_FILES = frozenset({"config.json", "model.safetensors.index.json"})  # an HF checkpoint's

DESCRIPTION = {
    "gguf": "a GGUF file",
    "safetensors": "a safetensors file",
    "hf": "a checkpoint directory",
    "calbin": "a calbin package (a directory with model_memory_reserved_info.txt and a root <model>.yaml)",
    "ninfer": "a .ninfer artifact",
    "ninfer_part": "a .ninfer continuation part",
    "json": "a JSON file",
    "unknown": "a file of no kind this tool reads",
}

#: the commands that read each kind (``convert <command>``), named in the wrong-kind message.
READ_BY = {
    "gguf": "gguf2ninfer to convert it, or inspect",
    "safetensors": "inspect, or st2ninfer on its checkpoint directory",
    "hf": "st2ninfer to convert it, or inspect",
    "calbin": "validate or inspect",
    "ninfer": "verify, validate, repack or inspect",
    "ninfer_part": "the entry file it belongs to",
    "json": "inspect for a stored Evidence record, encode / seal for a plan file",
}


def is_calbin_package(path: str | Path) -> bool:
    """A directory shaped like a calbin package (docs/calbin.md): no checkpoint file (``config.json``, the
    safetensors index, ``*.safetensors``), and ``model_memory_reserved_info.txt``, or a submodel directory
    holding ``submodel_memory_reserved_info.txt``, or a root ``<model>.yaml`` (not ``hparam.yaml``) beside
    parameter blocks ``param_blk<N>.bin``. A package missing its root manifest or its runtime metadata is
    still a package, and its validator reports what is missing (``FS_REQUIRED_MISSING``)."""
    p = Path(path)
    try:
        if not p.is_dir():
            return False
        children = list(p.iterdir())
        names = {f.name for f in children}
        if names & CHECKPOINT_FILES or any(n.endswith(".safetensors") for n in names):
            return False
        if CALBIN_RUNTIME_META in names:
            return True
        if any(f.is_dir() and (f / CALBIN_SUBMODEL_META).is_file() for f in children):
            return True
        manifest = any(f.suffix in (".yaml", ".yml") and f.name != "hparam.yaml" and f.is_file() for f in children)
        return manifest and any(n.startswith("param_blk") and n.endswith(".bin") for n in names)
    except OSError:  # unreadable: not recognisably a calbin package
        return False


def sniff(path: str | Path) -> str:
    """The kind of file at ``path`` from its first bytes: ``gguf``, ``safetensors``, ``ninfer``,
    ``ninfer_part``, ``json`` or ``unknown``; ``directory`` for a directory (raises a typed error for
    unusable paths). The magic is matched without its version byte, so another container version is
    still named a ``.ninfer`` file and its reader says which version it is."""
    p = Path(path)
    if is_directory(p):
        return "directory"
    with OpenFile(p) as f:
        head = f.pread(min(f.size, 9), 0) if f.size else b""
    if head.startswith(b"GGUF"):
        return "gguf"
    if head.startswith(ENTRY_MAGIC[:7]):
        return "ninfer"
    if head.startswith(PART_MAGIC[:7]):
        return "ninfer_part"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    if head[:1] in (b"{", b"["):
        return "json"
    return "unknown"


def detect_kind(path: str | Path) -> str:
    """The kind of ``path`` (table above), from its content; a missing or unusable path raises
    :class:`~converters.errors.SourceError` (``target_unavailable``)."""
    p = Path(path)
    if is_directory(p):
        return "calbin" if is_calbin_package(p) else "hf"
    return sniff(p)


def wrong_kind(path: str | Path, kind: str, accepted: Iterable[str], *, command: str | None,
               rule: str = "source_kind") -> SourceError:
    """The error for ``convert <command>`` given ``path`` of ``kind`` where it reads ``accepted`` kinds
    (``command=None``: where any model source is read)."""
    names = [DESCRIPTION[k] for k in accepted]
    wanted = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    reader = f"convert {command} reads" if command is not None else "a model source is"
    hint = f"; use {READ_BY[kind]}" if kind in READ_BY else ""
    return SourceError(f"{Path(path).name} is {DESCRIPTION[kind]} (detected by content); {reader} {wanted}{hint}",
                       file=str(path), code="target_unavailable", category="unsupported_target",
                       rule="ninfer_entry" if kind == "ninfer_part" else rule)


def require_kind(path: str | Path, accepted: Iterable[str], *, command: str, rule: str = "source_kind",
                 pass_unrecognised: bool = False) -> str:
    """:func:`detect_kind` of ``path``, or :func:`wrong_kind`'s error when ``command`` does not read it.

    ``pass_unrecognised``: a continuation part or a file of no known kind is returned, not refused — for
    the commands that read ``.ninfer`` artifacts, whose reader or validator then reports what is wrong
    with a damaged one (a refusal here would hide that report)."""
    accepted = tuple(accepted)
    kind = detect_kind(path)
    if kind not in accepted and not (pass_unrecognised and kind in ("ninfer_part", "unknown")):
        raise wrong_kind(path, kind, accepted, command=command, rule=rule)
    return kind
