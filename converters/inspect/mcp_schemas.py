"""The JSON Schemas the MCP tools declare: each tool's input, and its ``outputSchema`` — the structured
content of a successful call (docs/inspect.md §MCP). A rejection is ``isError`` with ``{"error": …}``
(§Rejections) and is not described by the output schema, as MCP clients validate only successful results.

The Evidence record, the summary (with its page) and the calbin summary keep their one home in
``docs/schemas/``; the output schemas embed them.
"""

from __future__ import annotations

import json

from converters import ROOT
from converters.inspect.roots import MAX_PATH_BYTES

EVIDENCE_ID = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
#: a path argument (its text rules: :func:`converters.inspect.roots.path_argument`)
PATH = {"pattern": "^/", "maxLength": MAX_PATH_BYTES}

_SELECTION = {
    "kind": {"const": "model-artifact", "description": "optional; the only kind"},
    "collection": {"type": "string", "enum": ["tensors", "metadata", "types"]},
    "names": {"type": "array", "items": {"type": "string"}, "description": "exact tensor names (tensors)"},
    "keys": {"type": "array", "items": {"type": "string"}, "description": "exact metadata keys (metadata)"},
    "types": {"type": "array", "items": {"type": "string"},
              "description": "exact type labels, AMBIGUOUS_<id> included (tensors, types)"},
    "storage_validation": {"type": "array", "items": {"type": "string", "enum": ["consistent", "unknown"]}},
    "indexes": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "fields": {"type": "array", "items": {"type": "string"}, "description": "columns; [] = indices only"},
    "offset": {"type": "integer", "minimum": 0, "description": "counts filtered matches"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
}
#: a selection, in both tools: ``kind`` optional (``model-artifact``), ``collection`` required
VIEW_SCHEMA = {"type": "object", "properties": _SELECTION, "required": ["collection"],
               "additionalProperties": False,
               "description": "filters intersect; an omitted filter = all rows, [] = none"}
SOURCE_SCHEMA = {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "retained-evidence"}, "evidence_id": {"type": "string"}},
     "required": ["kind", "evidence_id"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "evidence-file"}, "path": {"type": "string", **PATH},
                                      "record": {"type": "object"}},
     "required": ["kind"], "additionalProperties": False,
     "description": "one Evidence record, its evidence_id checked: path (absolute, inside the roots) or "
                    "record (inline)"},
]}
BUNDLE_SCHEMA = {"type": "object", "properties": {"schema": {"type": "string"},
                                                  "records": {"type": "array", "items": {"type": "object"}}},
                 "required": ["records"]}


def _doc_schema(name: str) -> dict:
    """A ``docs/schemas/`` schema to embed: its ``$schema`` and ``$id`` belong to the file, not the copy."""
    doc = json.loads((ROOT / "docs" / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))
    return {k: v for k, v in doc.items() if k not in ("$schema", "$id")}


def _retained() -> dict:
    return {"retained_count": {"type": "integer", "minimum": 0}, "retained_bytes": {"type": "integer", "minimum": 0}}


def output_schemas() -> dict[str, dict]:
    """Tool name → ``outputSchema``."""
    draft = "https://json-schema.org/draft/2020-12/schema"
    return {
        "inspect_model_artifact": {
            "$schema": draft, "type": "object",
            "description": "detail summary: the summary (with page when a view was given); detail full: the "
                           "Evidence record; a calbin package: its summary",
            "anyOf": [_doc_schema("evidence-summary"), _doc_schema("evidence"), _doc_schema("calbin-evidence")]},
        "inspect_analysis_view": {"$schema": draft, **_doc_schema("evidence-summary")["properties"]["page"]},
        "import_evidence_bundle": {
            "$schema": draft, "type": "object", "required": ["evidence_ids", "retained_count", "retained_bytes"],
            "properties": {"evidence_ids": {"type": "array", "items": EVIDENCE_ID, "minItems": 1}, **_retained()},
            "additionalProperties": False},
        "release_evidence": {
            "$schema": draft, "type": "object", "required": ["released", "retained_count", "retained_bytes"],
            "properties": {"released": EVIDENCE_ID, **_retained()}, "additionalProperties": False},
    }
