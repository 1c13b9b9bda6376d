"""Retained evidence: the validated Evidence records a session holds until released, and the history
query object ``{"source": …, "view": …}`` that pages them (docs/inspect.md §Retained evidence).

Pages read the retained facts only: the model is never reopened, there is no live file cache and no
freshness claim. A record is charged against the 32 MiB retained-representation budget before it is
indexed; the session holds at most :data:`SESSION_BUDGET` bytes in all.
"""

from __future__ import annotations

from converters.inspect.bundle import retained_size, verify_bundle
from converters.inspect.evidence import load_evidence, verify_record
from converters.inspect.rejections import InspectionRejected, invalid_input
from converters.inspect.views import parse_view, select
from converters.sources.limits import RETAINED_BUDGET

SESSION_BUDGET = 8 * RETAINED_BUDGET
#: bytes of warning messages one page carries (the view budget); the rest is linked to the parent
VIEW_WARNING_BYTES = 4096
SOURCE_KINDS = ("retained-evidence", "evidence-file")


class EvidenceStore:
    """The validated records of one session (one MCP connection, one CLI run), by ``evidence_id``."""

    def __init__(self, budget: int = SESSION_BUDGET) -> None:
        self.budget = budget
        self.used = 0
        self._records: dict[str, tuple[dict, int]] = {}

    def _charge(self, sizes: list[int]) -> None:
        need = sum(sizes)
        if self.used + need > self.budget:
            raise InspectionRejected(f"retaining {need} more bytes would exceed the session's {self.budget}-byte "
                                     f"retained-evidence budget ({self.used} held); release evidence first",
                                     code="resource_exhausted", category="execution_failure",
                                     rule="session_budget",
                                     diagnostics={"held_bytes": self.used, "requested_bytes": need,
                                                  "budget_bytes": self.budget})

    def retain(self, record: dict) -> str:
        """Hold one (already checked) record; returns its ``evidence_id``."""
        return self.retain_all([record])[0]

    def retain_all(self, records: list[dict]) -> list[str]:
        new = {r["evidence_id"]: r for r in records if r["evidence_id"] not in self._records}
        sizes = {eid: retained_size(r) for eid, r in new.items()}
        self._charge(list(sizes.values()))
        for eid, rec in new.items():
            self._records[eid] = (rec, sizes[eid])
            self.used += sizes[eid]
        return [r["evidence_id"] for r in records]

    def import_bundle(self, value, *, file: str | None = None) -> list[str]:
        """Check every record of a bundle against its integrity digest, then index them all (nothing is indexed on a rejection)."""
        return self.retain_all(verify_bundle(value, file=file))

    def get(self, evidence_id) -> dict:
        if not isinstance(evidence_id, str) or evidence_id not in self._records:
            raise InspectionRejected(f"no retained evidence {evidence_id!r} in this session (never retained, or "
                                     "released)", code="evidence_not_found", category="invalid_request",
                                     json_path="source.evidence_id", rule="evidence_retained")
        return self._records[evidence_id][0]

    def release(self, evidence_id) -> dict:
        self.get(evidence_id)
        _, size = self._records.pop(evidence_id)
        self.used -= size
        return {"released": evidence_id, "retained_count": len(self._records), "retained_bytes": self.used}

    def ids(self) -> list[str]:
        return list(self._records)


def resolve_source(source, store: EvidenceStore) -> dict:
    """The Evidence record a query's ``source`` names."""
    if not isinstance(source, dict) or source.get("kind") not in SOURCE_KINDS:
        raise invalid_input(f"source must be an object with kind one of {list(SOURCE_KINDS)}", "source.kind",
                            "query_valid")
    if source["kind"] == "retained-evidence":
        if set(source) - {"kind", "evidence_id"}:
            raise invalid_input(f"unknown source member(s) {sorted(set(source) - {'kind', 'evidence_id'})}",
                                "source", "query_valid")
        return store.get(source.get("evidence_id"))
    extra = set(source) - {"kind", "path", "record"}
    if extra or ("path" in source) == ("record" in source):
        raise invalid_input("an evidence-file source has exactly one of path (an absolute path to one "
                            "Evidence record) or record (the record inline)", "source", "query_valid")
    if "record" in source:
        return verify_record(source["record"], file=None, where="source.record")
    path = source["path"]
    if not isinstance(path, str) or not path.startswith("/"):
        raise invalid_input("source.path must be an absolute path", "source.path", "query_valid")
    return load_evidence(path)


def warnings_within(record: dict, budget: int = VIEW_WARNING_BYTES) -> dict:
    """The record's limitations as compact warnings within the view budget, linking to the parent when
    messages are left out."""
    lims = record.get("limitations", [])
    shown, used = [], 0
    for lim in lims:
        msg = lim.get("message", "")
        if used + len(msg) > budget:
            break
        used += len(msg)
        shown.append({"code": lim.get("code"), "type": lim.get("type"), "message": msg,
                      "tensor_count": len(lim.get("tensors", []))})
    omitted = len(lims) - len(shown)
    return {"count": len(lims), "shown": shown, "omitted": omitted,
            "full_evidence": record.get("evidence_id") if omitted else None}


def page(record: dict, view) -> dict:
    """A selected page plus the compact context every page carries."""
    out = select(record, parse_view(view))
    out["source"]["evidence_id"] = record.get("evidence_id")
    out["source"]["status"] = record.get("status")
    out["header_coverage"] = (record.get("coverage") or {}).get("header")
    out["warnings"] = warnings_within(record)
    return out


def run_query(query, store: EvidenceStore) -> dict:
    """Page a history query object ``{"source": {...}, "view": {"kind": "model-artifact", ...}}``."""
    if not isinstance(query, dict) or set(query) != {"source", "view"}:
        raise invalid_input('a query object has exactly the members "source" and "view"', "query",
                            "query_valid")
    view = query["view"]
    if not isinstance(view, dict) or view.get("kind", "model-artifact") != "model-artifact":
        raise invalid_input('view.kind, when given, must be "model-artifact"', "view.kind", "query_valid")
    record = resolve_source(query["source"], store)
    return page(record, view)


def query_stored(path, bundle_path, view) -> dict:
    """``convert inspect [PATH] [--import-bundle FILE] [--view …]``: index the bundle (and the Evidence of
    ``path``, inspected or stored) in a fresh store, then page it. ``view`` is a query object, or a plain
    selection when exactly one record is held; without a view, the ``evidence_id`` of every record."""
    from converters.inspect import inspect_model_artifact
    from converters.inspect.bundle import load_bundle

    store = EvidenceStore()
    ids = store.retain_all(load_bundle(bundle_path)) if bundle_path is not None else []
    if path is not None:
        ids.append(store.retain(inspect_model_artifact(path, detail="full")))
    if view is None:
        return {"evidence_ids": ids}
    if isinstance(view, dict) and "source" in view:
        return run_query(view, store)
    if len(ids) != 1:
        raise invalid_input(f"{len(ids)} records are held: name one with a query object "
                            '{"source": {"kind": "retained-evidence", "evidence_id": ...}, "view": {...}}',
                            "view", "query_valid")
    return page(store.get(ids[0]), view)
