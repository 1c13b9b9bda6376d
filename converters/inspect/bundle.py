"""Evidence bundles: ``{"schema": …, "records": [record, …]}``, what ``convert inspect --evidence-output``
writes and ``import_evidence_bundle`` / ``convert inspect --import-bundle`` read (docs/inspect.md §Bundles).

A bundle is not a single Evidence record: every record in it is checked on its own
(:func:`converters.inspect.evidence.verify_record`: schema, the ``evidence_id`` integrity digest, positional
indices, unique names / keys / types) and charged against the retained-representation budget, and the
whole bundle is rejected with a typed input error before any record is indexed.
"""

from __future__ import annotations

from pathlib import Path

from converters.inspect.evidence import EvidenceError, canonical, evidence_output_exists, verify_record
from converters.inspect.rejections import InspectionRejected
from converters.sources.atomic_write import write_new_json
from converters.sources.hf import read_json_file
from converters.sources.limits import RETAINED_BUDGET

SCHEMA = "ninfer-convert.evidence-bundle/1"
#: at most this many records in one bundle (each is a whole inspection)
MAX_RECORDS = 1024


def bundle_of(records: list[dict]) -> dict:
    return {"schema": SCHEMA, "records": records}


def write_bundle(path, records: list[dict]) -> Path:
    """Write a new bundle file (never overwrites; nothing half-written is published)."""
    return write_new_json(path, bundle_of(records), exists=lambda: evidence_output_exists(path), indent=1,
                          ensure_ascii=False)


def retained_size(record: dict) -> int:
    """Bytes of a record's retained representation (its canonical JSON)."""
    return len(canonical(record))


def verify_bundle(value, *, file: str | None) -> list[dict]:
    """Every record of a bundle, checked; raises a typed error before anything is returned."""
    if not isinstance(value, dict) or not isinstance(value.get("records"), list):
        raise EvidenceError('not an Evidence bundle: expected an object with a "records" array', file=file,
                            json_path="$.records", rule="bundle_valid", section="docs/inspect.md §Bundles")
    unknown = sorted(set(value) - {"schema", "records"})
    if unknown or value.get("schema", SCHEMA) != SCHEMA:
        raise EvidenceError(f"not an Evidence bundle of schema {SCHEMA} (members {unknown or ['schema']})",
                            file=file, json_path="$.schema", rule="bundle_valid",
                            section="docs/inspect.md §Bundles")
    records = value["records"]
    if not 1 <= len(records) <= MAX_RECORDS:
        raise EvidenceError(f"a bundle holds 1..{MAX_RECORDS} records, not {len(records)}", file=file,
                            json_path="$.records", rule="bundle_valid", section="docs/inspect.md §Bundles")
    seen: dict[str, int] = {}
    for i, rec in enumerate(records):
        verify_record(rec, file=file, where=f"$.records[{i}]")
        size = retained_size(rec)
        if size > RETAINED_BUDGET:
            raise InspectionRejected(f"record {i}: retained representation of {size} bytes exceeds the "
                                     f"{RETAINED_BUDGET}-byte budget", code="target_unavailable",
                                     category="unsupported_target", file=file, json_path=f"$.records[{i}]",
                                     rule="retained_budget")
        if rec["evidence_id"] in seen:
            raise EvidenceError(f"records {seen[rec['evidence_id']]} and {i} are the same Evidence", file=file,
                                json_path=f"$.records[{i}]", rule="bundle_valid",
                                section="docs/inspect.md §Bundles")
        seen[rec["evidence_id"]] = i
    return records


def load_bundle(path) -> list[dict]:
    """Read and check a bundle file (size bounded by the header cap)."""
    value, _, _ = read_json_file(Path(path), "evidence bundle")
    return verify_bundle(value, file=str(path))


def load_stored(path) -> dict:
    """The one record a stored Evidence file holds: a single record, or a bundle of exactly one record
    (a bundle of several is paged with ``--import-bundle`` and a query naming its ``evidence_id``)."""
    value, _, _ = read_json_file(Path(path), "evidence")
    if isinstance(value, dict) and "records" in value:
        records = verify_bundle(value, file=str(path))
        if len(records) != 1:
            raise EvidenceError(f"the bundle holds {len(records)} records; page one with --import-bundle and a "
                                "query naming its evidence_id", file=str(path), json_path="$.records",
                                rule="evidence_single_record", section="docs/inspect.md §Bundles")
        return records[0]
    return verify_record(value, file=str(path))
