"""Inspection summary of a calbin NPU model package (``docs/calbin.md``), detected by content.

A calbin package is a directory, not a model file, so it has no GGUF-style header digest or tensor
table: its evidence is the static acceptance report of :mod:`converters.acceptance.calbin` — what the package
declares (model geometry, submodels, memory reservations, parameter bytes by chip, supply chain) and the
gate verdict. ``hash="header"`` skips hashing the parameter blocks (the report says so with
``FS_HASH_SKIPPED``); ``hash="full"`` hashes every file.
"""

from __future__ import annotations

from pathlib import Path

from converters.acceptance.calbin.validate import validate_calbin

SCHEMA = "ninfer-convert.calbin-evidence/1"
SECTIONS = ("package", "model", "submodels", "memory", "graph", "tokenizer", "supply_chain")


def inspect_calbin(path: Path, *, hash_mode: str) -> dict:
    """The package's declarations and its gate summary (the full findings are ``convert validate``'s)."""
    report = validate_calbin(path, fast=hash_mode != "full").to_json()
    record = {"schema": SCHEMA, "status": "complete", "format": "calbin", "hash": hash_mode}
    record.update({k: report[k] for k in SECTIONS if k in report})
    record["gates"] = [{"name": g["name"], "title": g["title"], "status": g["status"]} for g in report["gates"]]
    counts: dict[str, int] = {}
    for f in report["findings"]:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    record["finding_counts"] = counts
    record["verdict"] = report["verdict"]
    return record
