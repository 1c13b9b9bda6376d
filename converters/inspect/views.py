"""Selected pages of an Evidence record (docs/inspect.md §Facts and queries).

A view is ``{"collection": "tensors" | "metadata" | "types", <filters>, "fields", "offset", "limit"}``:

- filters (exact matches, intersected; omitted = all rows, ``[]`` = no row): ``names`` (tensors),
  ``keys`` (metadata), ``types`` (tensors, types; matches the reported label, ``AMBIGUOUS_<id>``
  included), ``storage_validation`` (tensors: ``consistent`` / ``unknown``), ``indexes`` (any);
- ``fields``: the columns to return (``[]`` = only the index; omitted = every recorded column);
- ``offset``/``limit`` page over the *filtered* matches while every row keeps its original index.

Each page carries the source identity, header coverage, array elisions, unknowns and the parent
``evidence_id``. Pages read retained facts only; the model is not reopened.
"""

from __future__ import annotations

from typing import Any

from converters.errors import ConverterError

DEFAULT_LIMIT = 32
MAX_LIMIT = 1000
FILTERS = {
    "tensors": {"names": "name", "types": "type", "storage_validation": "storage_validation", "indexes": "index"},
    "metadata": {"keys": "key", "indexes": "index"},
    "types": {"types": "type", "indexes": "index"},
}
VIEW_KEYS = {"kind", "collection", "fields", "offset", "limit"} | {k for f in FILTERS.values() for k in f}


class ViewError(ConverterError, ValueError):
    """An invalid view selection (typed input error, raised before any row is selected)."""

    kind = "view"


def _bad(msg: str, field: str) -> ViewError:
    return ViewError(msg, json_path=f"view.{field}", rule="view_valid",
                     section="docs/inspect.md §Facts and queries")


def parse_view(view: Any) -> dict:
    """Validate a view selection; returns a normalised copy."""
    if not isinstance(view, dict):
        raise _bad("a view must be a JSON object", "")
    unknown = sorted(set(view) - VIEW_KEYS)
    if unknown:
        raise _bad(f"unknown view member(s) {unknown}", unknown[0])
    if view.get("kind", "model-artifact") != "model-artifact":
        raise _bad(f"kind must be 'model-artifact', not {view['kind']!r}", "kind")
    coll = view.get("collection")
    if not isinstance(coll, str) or coll not in FILTERS:
        raise _bad(f"collection must be one of {sorted(FILTERS)}, not {coll!r}", "collection")
    out: dict = {"collection": coll, "filters": {}}
    for name in sorted(VIEW_KEYS - {"kind", "collection", "fields", "offset", "limit"}):
        if name not in view:
            continue
        if name not in FILTERS[coll]:
            raise _bad(f"filter {name!r} does not apply to collection {coll!r}", name)
        values = view[name]
        item_type = int if name == "indexes" else str
        if not isinstance(values, list) or not all(type(v) is item_type for v in values):
            raise _bad(f"{name} must be a list of {item_type.__name__}s", name)
        out["filters"][name] = values
    fields = view.get("fields")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) for f in fields)):
        raise _bad("fields must be a list of strings", "fields")
    out["fields"] = fields
    offset, limit = view.get("offset", 0), view.get("limit", DEFAULT_LIMIT)
    if type(offset) is not int or offset < 0:
        raise _bad("offset must be a non-negative integer", "offset")
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise _bad(f"limit must be an integer in 1..{MAX_LIMIT}", "limit")
    out["offset"], out["limit"] = offset, limit
    return out


def select(record: dict, view: dict) -> dict:
    """The page of ``record`` that the (already parsed or raw) ``view`` selects."""
    spec = view if "filters" in view else parse_view(view)
    coll = spec["collection"]
    rows = record.get(coll) or []
    columns = {k for r in rows for k in r}
    if spec["fields"] is not None:
        unknown = sorted(set(spec["fields"]) - columns - {"index"})
        if unknown and rows:
            raise _bad(f"unknown field(s) {unknown} for collection {coll!r}", "fields")
    matches = rows
    for name, values in spec["filters"].items():
        col, wanted = FILTERS[coll][name], set(values)
        matches = [r for r in matches if r.get(col) in wanted]
    page = matches[spec["offset"]:spec["offset"] + spec["limit"]]
    if spec["fields"] is None:
        out_rows = [dict(r) for r in page]
    else:
        out_rows = [{"index": r["index"], **{f: r[f] for f in spec["fields"] if f in r and f != "index"}}
                    for r in page]
    end = spec["offset"] + len(page)
    elisions = [{"index": r["index"], "key": r["key"], "count": r["count"], "previewed": len(r["preview"])}
                for r in page if coll == "metadata" and r.get("preview_complete") is False]
    art = record.get("artifact", {})
    return {
        "kind": "model-artifact-page",
        "collection": coll,
        "filters": spec["filters"],
        "fields": spec["fields"],
        "offset": spec["offset"],
        "limit": spec["limit"],
        "total_rows": len(rows),
        "matches": len(matches),
        "returned": len(out_rows),
        "next_offset": end if end < len(matches) else None,
        "rows": out_rows,
        "array_elisions": elisions,
        "source": {"path": art.get("path"), "format": record.get("format"),
                   "header_sha256": art.get("header_sha256"), "sha256": art.get("sha256")},
        "coverage": record.get("coverage"),
        "unknowns": record.get("unknowns", []),
        "parent_evidence_id": record.get("evidence_id"),
    }
