"""The compact summary of an Evidence record (``--detail summary``; docs/inspect.md §Summary).

Counts, short header metadata (scalar values only, short strings; long or compound values stay reachable
through a metadata view), chat-template presence, derived totals, a bounded list of warnings that links to
the full parent Evidence when messages are left out, and the selected view page if one was asked for.
"""

from __future__ import annotations

SCHEMA = "ninfer-convert.evidence-summary/1"
SHORT_VALUE = 80
MAX_HEADER_METADATA = 32
MAX_WARNINGS = 8


def _short(row: dict) -> bool:
    if "value" not in row:
        return False
    v = row["value"]
    return not isinstance(v, dict | list) and not (isinstance(v, str) and len(v) > SHORT_VALUE)


def summarize(record: dict, *, page: dict | None = None, evidence_output=None) -> dict:
    art = record["artifact"]
    header_md = [{"key": r["key"], "type": r["type"], "value": r["value"]}
                 for r in record.get("metadata", []) if _short(r)][:MAX_HEADER_METADATA]
    lims = record.get("limitations", [])
    shown = [{"code": lim["code"], "type": lim.get("type"), "message": lim["message"],
              "tensor_count": len(lim.get("tensors", [])),
              **({"metadata_count": len(lim["metadata"])} if "metadata" in lim else {})}
             for lim in lims[:MAX_WARNINGS]]
    out = {
        "schema": SCHEMA,
        "parent_evidence_id": record["evidence_id"],
        "status": record["status"],
        "format": record["format"],
        "artifact": {k: art.get(k) for k in ("path", "size", "header_length", "header_sha256", "sha256",
                                              "bytes_read", "identity")},
        "counts": {"tensors": len(record.get("tensors", [])), "metadata": len(record.get("metadata", [])),
                   "types": len(record.get("types", []))},
        "header_metadata": header_md,
        "chat_template": record.get("chat_template"),
        "totals": record.get("totals"),
        "coverage": record.get("coverage"),
        "warnings": {"count": len(lims), "shown": shown, "omitted": max(0, len(lims) - MAX_WARNINGS),
                     "full_evidence": str(evidence_output) if evidence_output else None},
        "unknowns": record.get("unknowns", []),
        "evidence_output": str(evidence_output) if evidence_output else None,
        "error": record.get("error"),
    }
    if page is not None:
        out["page"] = page
    return out
