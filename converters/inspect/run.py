"""Running one inspection: verified header facts, optional full hash, identity re-check, the record.

Order (docs/inspect.md §Identity and reading): the strict parser verifies the header (an error or Ctrl-C before that exposes nothing);
``--hash full`` then streams the rest of every file; finally each open descriptor is checked against its
path. A failure after the header was verified yields *partial* Evidence that keeps the verified facts,
marks the digest and final identity unknown and carries the typed error; a Ctrl-C there raises
:class:`InspectionCancelled` carrying that partial record.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from converters.errors import SourceError
from converters.inspect import evidence as ev
from converters.inspect.hashing import BUFFER_BYTES, stream_sha256
from converters.sources.fileio import FileIdentity, OpenFile


class InspectionCancelled(KeyboardInterrupt):
    """Ctrl-C after the header was verified; ``.evidence`` is the partial record."""

    def __init__(self, evidence: dict) -> None:
        super().__init__("inspection cancelled; partial evidence kept")
        self.evidence = evidence


@dataclass
class InspectedFile:
    """One file of the inspected target and what was read from it."""

    name: str
    role: str
    path: Path
    size: int
    identity: FileIdentity
    header_length: int
    header_sha256: str
    bytes_read: int
    ranges_read: list
    f: OpenFile | None = None  # open descriptor when its remaining bytes can be hashed
    hasher: object | None = None  # SHA-256 state after the header
    sha256: str | None = None  # known when the whole file was read
    identity_status: str = "unverified"

    def to_dict(self) -> dict:
        return {"name": self.name, "role": self.role, "path": str(self.path), "size": self.size,
                "dev": self.identity.dev, "ino": self.identity.ino, "mtime_ns": self.identity.mtime_ns,
                "header_length": self.header_length, "header_sha256": self.header_sha256, "sha256": self.sha256,
                "bytes_read": self.bytes_read, "ranges_read": self.ranges_read, "identity": self.identity_status}

    def verify(self) -> None:
        if self.f is not None:
            self.f.verify_unchanged()
        else:
            try:
                now = FileIdentity.of(os.stat(self.path))
            except OSError:
                now = None
            if now != self.identity:
                raise SourceError("the file changed or vanished while it was inspected", file=str(self.path),
                                  code="target_unavailable", category="target_changed", rule="identity_unchanged")
        self.identity_status = "verified"


def side_file(name: str, role: str, path: Path, info: dict, ident: FileIdentity) -> InspectedFile:
    """A small file read whole (config, index, tokenizer config)."""
    return InspectedFile(name, role, path, info["size"], ident, info["size"], info["sha256"], info["size"],
                         [[0, info["size"]]] if info["size"] else [], sha256=info["sha256"])


def header_file(name: str, role: str, f: OpenFile, hdr) -> InspectedFile:
    """A file whose header (``hdr``: parsed GGUF / safetensors header) was read."""
    return InspectedFile(name, role, f.path, f.size, f.identity, hdr.header_length, hdr.header_sha256,
                         hdr.bytes_read, list(hdr.ranges_read), f=f, hasher=hdr.hasher)


def _hash_full(files: list[InspectedFile], progress, buffer_bytes: int) -> None:
    for fi in files:
        if fi.f is None:
            continue
        h = fi.hasher.copy() if fi.hasher is not None else hashlib.sha256()
        start = fi.header_length if fi.hasher is not None else 0
        n = stream_sha256(fi.f, h, start, buffer_bytes=buffer_bytes, progress=progress)
        fi.sha256 = h.hexdigest()
        fi.bytes_read += n
        fi.ranges_read = [[0, fi.size]] if fi.size else []


@dataclass
class Outcome:
    status: str = "complete"
    error: dict | None = None
    cancelled: bool = False
    digest_done: bool = False
    identity: str = "unverified"
    notes: list = field(default_factory=list)


def finish(path, facts: dict, files: list[InspectedFile], *, hash_mode: str, single: bool,
           progress: Callable[[int], None] | None = None, buffer_bytes: int = BUFFER_BYTES) -> dict:
    """Hash (full mode), re-check identities and assemble the record from verified ``facts``."""
    out = Outcome()
    try:
        if hash_mode == "full":
            _hash_full(files, progress, buffer_bytes)
            out.digest_done = True
        for fi in files:
            fi.verify()
        out.identity = "verified"
    except KeyboardInterrupt:
        out.cancelled, out.status = True, "partial"
        out.error = {"kind": "cancelled", "code": "cancelled", "message": "cancelled (Ctrl-C) after the header "
                     "was verified", "file": str(path)}
    except SourceError as exc:
        out.status, out.error = "partial", exc.to_dict()
        if exc.category == "target_changed":
            out.identity = "changed"
    if out.status != "complete":
        out.digest_done = False
        for fi in files:
            if fi.f is not None:
                fi.sha256 = None
            if out.identity == "changed" and fi.identity_status != "verified":
                fi.identity_status = "changed"
    record = assemble(path, facts, files, hash_mode=hash_mode, single=single, outcome=out,
                      buffer_bytes=buffer_bytes)
    if out.cancelled:
        raise InspectionCancelled(record)
    return record


def _artifact(path, files: list[InspectedFile], *, single: bool, outcome: Outcome) -> dict:
    p = Path(path)
    if single:
        fi = files[0]
        return {"path": str(path), "resolved_path": str(p.resolve()), "kind": "file", "size": fi.size,
                "dev": fi.identity.dev, "ino": fi.identity.ino, "mtime_ns": fi.identity.mtime_ns,
                "header_length": fi.header_length, "header_sha256": fi.header_sha256, "sha256": fi.sha256,
                "bytes_read": fi.bytes_read, "ranges_read": fi.ranges_read, "identity": outcome.identity}
    manifest = hashlib.sha256()
    for fi in files:
        manifest.update(f"{fi.name}\0{fi.header_sha256}\n".encode())
    full = None
    if outcome.digest_done and all(fi.sha256 for fi in files):
        h = hashlib.sha256()
        for fi in files:
            h.update(f"{fi.name}\0{fi.sha256}\n".encode())
        full = h.hexdigest()
    return {"path": str(path), "resolved_path": str(p.resolve()), "kind": "file-set" if p.is_file() else "directory",
            "size": sum(fi.size for fi in files), "header_length": sum(fi.header_length for fi in files),
            "header_sha256": manifest.hexdigest(), "sha256": full,
            "digest_scope": "sha256 over 'name NUL digest LF' lines of the files, in listed order",
            "bytes_read": sum(fi.bytes_read for fi in files), "identity": outcome.identity,
            "files": [fi.to_dict() for fi in files]}


def assemble(path, facts: dict, files: list[InspectedFile], *, hash_mode: str, single: bool,
             outcome: Outcome, buffer_bytes: int) -> dict:
    tensors = facts["tensors"]
    artifact = _artifact(path, files, single=single, outcome=outcome)
    artifact["retained_bytes"] = facts.get("retained_bytes")
    body = None
    if outcome.digest_done:
        body = {"sha256": artifact["sha256"], "bytes_hashed": sum(fi.size for fi in files if fi.f is not None),
                "files": [{"name": fi.name, "sha256": fi.sha256, "size": fi.size} for fi in files]}
    record = {
        "schema": ev.SCHEMA,
        "evidence_id": None,
        "status": outcome.status,
        "format": facts["format"],
        "artifact": artifact,
        "hash": {"mode": hash_mode, "algorithm": "sha256",
                 "buffer_bytes": buffer_bytes * 2 if hash_mode == "full" else None},
        "body": body,
        "coverage": ev.coverage(tensors, hash_mode=hash_mode, digest_done=outcome.digest_done,
                                identity=outcome.identity),
        "details": facts["details"],
        "metadata": facts["metadata"],
        "tensors": tensors,
        "types": ev.type_rows(tensors),
        "totals": ev.totals(tensors),
        "chat_template": facts["chat_template"],
        "limitations": facts["limitations"],
        "unknowns": [],
        "error": outcome.error,
    }
    if facts.get("digest_incomplete") and outcome.digest_done:
        # some files of the set could not be read: no digest of the whole set
        artifact["sha256"] = None
        record["body"]["sha256"] = None
        record["coverage"]["digest"] = "partial"
    for k, v in facts.get("extra", {}).items():
        record[k] = v
    record["unknowns"] = ev.unknowns(record) + facts.get("unknowns", [])
    if record["format"] == "gguf" and outcome.status == "complete":
        from converters.inspect.modern_sizes import interpretations

        block = interpretations(record)  # labelled "evidence": false; absent when every size is known
        if block is not None:
            record["interpretations"] = block
    return ev.seal(record)
