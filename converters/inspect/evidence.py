"""The Evidence record: one JSON document of what an inspection verified, and what stays unknown.

Top level (schema ``ninfer-convert.evidence/1``)::

    schema, evidence_id, status ("complete" | "partial"), format, artifact, hash, body, coverage,
    details, metadata, tensors, types, totals, chat_template, limitations, unknowns, error
    (+ for .ninfer: components, objects, bindings, uses, resources, provenance)

``evidence_id`` is ``sha256:`` of the canonical JSON of the record without it: an **integrity digest**, so a
stored record changed by accident (edited, truncated) is refused before its retained facts are served again
(:func:`load_evidence`). It is unkeyed: anyone can recompute it, so it authenticates nothing — it does not
prove who wrote the record (docs/inspect.md §Bundles). ``artifact.sha256`` and
``body`` are ``null`` in header mode: a header digest is no commitment to the weights (docs/inspect.md §Identity and reading).
Derived totals (parameter count, bytes per type) come from declarations, do not deduplicate shared
weights, and are ``null`` where a byte length is unknown.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from converters.errors import ConverterError, SourceError
from converters.sources.hf import read_json_file

SCHEMA = "ninfer-convert.evidence/1"


class EvidenceError(ConverterError, ValueError):
    """A stored Evidence record that cannot be used (malformed, tampered, or not a single record)."""

    kind = "evidence"


def type_rows(tensors: list[dict]) -> list[dict]:
    groups: dict[tuple, dict] = {}
    for t in tensors:
        g = groups.setdefault((t["type"], t["type_id"]), {
            "index": len(groups), "type": t["type"], "type_id": t["type_id"], "tensor_count": 0,
            "parameter_count": 0, "bytes": 0, "storage_validation": "consistent"})
        g["tensor_count"] += 1
        g["parameter_count"] += int(t["parameter_count"])
        if t["byte_length"] is None:
            g["bytes"] = None
        elif g["bytes"] is not None:
            g["bytes"] += t["byte_length"]
        if t["storage_validation"] != "consistent":
            g["storage_validation"] = "unknown"
    return list(groups.values())


def totals(tensors: list[dict]) -> dict:
    unknown = sum(1 for t in tensors if t["byte_length"] is None)
    return {
        "tensor_count": len(tensors),
        "parameter_count": sum(int(t["parameter_count"]) for t in tensors),
        "bytes": None if unknown else sum(t["byte_length"] for t in tensors),
        "tensors_with_unknown_bytes": unknown,
        "basis": "declarations; shared or duplicated weights are not deduplicated",
    }


def coverage(tensors: list[dict], *, hash_mode: str, digest_done: bool, identity: str) -> dict:
    sizes = "complete" if all(t["byte_length"] is not None for t in tensors) else "partial"
    digest = "not_requested" if hash_mode == "header" else ("complete" if digest_done else "unknown")
    return {"header": "complete", "metadata": "complete", "tensors": "complete", "storage_sizes": sizes,
            "ranges": sizes, "digest": digest, "identity": identity}


def unknowns(record: dict) -> list[str]:
    out = []
    unknown_types = [t["type"] for t in record["types"] if t["bytes"] is None]
    if unknown_types:
        n = record["totals"]["tensors_with_unknown_bytes"]
        out.append(f"byte_length of {n} tensor(s) of type(s) {', '.join(unknown_types)}")
        out.append(f"bytes per type for {', '.join(unknown_types)}")
        out.append("total bytes")
    cov = record["coverage"]
    if cov["digest"] == "not_requested":
        out.append("file sha256 (hash mode header: the header digest is no commitment to the weights)")
    elif cov["digest"] == "unknown":
        out.append("file sha256 (hashing did not complete)")
    elif cov["digest"] == "partial":
        out.append("sha256 of the whole file set (some files could not be read)")
    if cov["identity"] != "verified":
        out.append(f"final file identity ({cov['identity']})")
    return out


def canonical(record: dict) -> bytes:
    body = {k: v for k, v in record.items() if k != "evidence_id"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def seal(record: dict) -> dict:
    """Set ``evidence_id`` from the record's canonical JSON; returns the record."""
    record["evidence_id"] = "sha256:" + hashlib.sha256(canonical(record)).hexdigest()
    return record


def evidence_output_exists(path) -> SourceError:
    """The error for an evidence output that already exists (it is never overwritten)."""
    return SourceError("evidence output already exists; refusing to overwrite", file=str(path),
                       code="target_unavailable", category="output_exists", rule="no_overwrite")


def load_evidence(path) -> dict:
    """Read a stored Evidence record, checking schema, ``evidence_id`` and row identities first."""
    record, _, _ = read_json_file(Path(path), "evidence")
    if isinstance(record, dict) and "records" in record:
        raise EvidenceError("an evidence bundle is not a single record; import it (import_evidence_bundle, "
                            "convert inspect --import-bundle) or save one record as its own file",
                            file=str(path), rule="evidence_single_record")
    return verify_record(record, file=str(path))


def verify_record(record, *, file: str | None, where: str = "$") -> dict:
    """Check one Evidence record (schema, the ``evidence_id`` integrity digest over its content, positional
    indices and unique names / keys / types) before any of its rows is served; ``where`` prefixes the JSON
    paths."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise EvidenceError(f"not an Evidence record of schema {SCHEMA}", file=file, json_path=where,
                            rule="evidence_schema")
    expected = "sha256:" + hashlib.sha256(canonical(record)).hexdigest()
    if record.get("evidence_id") != expected:
        raise EvidenceError("evidence_id, the record's integrity digest, does not match its content (modified or "
                            "truncated; a digest, not a signature)",
                            file=file, json_path=f"{where}.evidence_id", rule="evidence_id")
    for coll, ident in (("tensors", "name"), ("metadata", "key"), ("types", "type")):
        rows = record.get(coll)
        if not isinstance(rows, list):
            raise EvidenceError(f"{coll} is not a list", file=file, json_path=f"{where}.{coll}",
                                rule="evidence_rows")
        seen = set()
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or row.get("index") != i:
                raise EvidenceError(f"{coll}[{i}] does not keep its positional index", file=file,
                                    json_path=f"{where}.{coll}[{i}]", rule="evidence_rows")
            key = (row.get(ident), row.get("type_id")) if coll == "types" else row.get(ident)
            if key in seen:
                raise EvidenceError(f"{coll}[{i}]: duplicate {ident} {row.get(ident)!r}", file=file,
                                    json_path=f"{where}.{coll}[{i}]", rule="evidence_rows")
            seen.add(key)
    return record
