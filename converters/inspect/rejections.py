"""The public rejection classes of inspection (docs/inspect.md §Rejections): one ``code`` and ``category``
per class, shared by the MCP tools and the CLI's ``ninfer-error/v1`` document.

A typed error of the readers keeps its internal ``category`` (the *constraint* it broke, e.g.
``file_format_rejected``); :func:`public_rejection` maps it onto the public pair:

===================  ======================  =================================================================
code                 category                when
===================  ======================  =================================================================
target_unavailable   unsupported_target      the strict parser rejected the file (``file_format_rejected``)
                                             or a reader limit (``limit_exceeded``)
target_unavailable   unavailable_target      the selected path is missing, not regular, not permitted,
                                             changed while read, or an output that exists
execution_failure    execution_failure       host I/O or resource failure (EIO, EMFILE …): details.diagnostics
invalid_input        invalid_request         arguments, views, query objects, Evidence records and bundles
evidence_not_found   invalid_request         an ``evidence_id`` this session does not hold (or released)
provider_busy        busy                    another inspection of this provider is still running
resource_exhausted   execution_failure       the session's retained-evidence budget is spent
===================  ======================  =================================================================
"""

from __future__ import annotations

from ninfer_core.errors import NinferError

SECTION = "docs/inspect.md §Rejections"
_UNSUPPORTED = {"file_format_rejected", "limit_exceeded"}


class InspectionRejected(NinferError):
    """A rejection raised by the inspection service itself (busy, unknown evidence, session budget)."""

    kind = "inspection"

    def __init__(self, message: str, *, code: str, category: str, diagnostics: dict | None = None, **kw):
        self.code = code
        self.category = category
        self.diagnostics = diagnostics
        kw.setdefault("section", SECTION)
        super().__init__(message, **kw)


def _public_pair(exc: BaseException) -> tuple[str, str, str | None]:
    """``(code, category, constraint)`` of ``exc``."""
    code = getattr(exc, "code", None)
    internal = getattr(exc, "category", None)
    if isinstance(exc, InspectionRejected):
        return exc.code, exc.category, exc.rule
    if code == "execution_failure":
        return "execution_failure", "execution_failure", internal
    if code == "target_unavailable":
        return ("target_unavailable", "unsupported_target" if internal in _UNSUPPORTED else "unavailable_target",
                internal or "target_usable")
    if getattr(exc, "kind", None) in ("view", "evidence"):
        return "invalid_input", "invalid_request", getattr(exc, "rule", None)
    return code or getattr(exc, "kind", "error"), internal or getattr(exc, "kind", "error"), None


def public_rejection(exc: BaseException) -> dict:
    """The public rejection document of a typed error (docs/inspect.md §Rejections)."""
    code, category, constraint = _public_pair(exc)
    diagnostics = getattr(exc, "diagnostics", None)
    return {"code": code, "category": category, "constraint": constraint, "rule": getattr(exc, "rule", None),
            "file": getattr(exc, "file", None), "field": getattr(exc, "json_path", None),
            "section": getattr(exc, "section", None), "message": getattr(exc, "message", None) or str(exc),
            "details": {"diagnostics": diagnostics} if diagnostics is not None else {}}


def invalid_input(message: str, field: str, rule: str = "arguments_valid") -> InspectionRejected:
    """A typed input error about one argument."""
    return InspectionRejected(message, code="invalid_input", category="invalid_request", json_path=field,
                              rule=rule)


def public_fields(exc: BaseException) -> dict:
    """For an inspection rejection, the public ``code``, ``category``, ``constraint`` (and ``details`` when
    there are diagnostics) that the CLI's error document carries; ``{}`` for any other error."""
    if not (isinstance(exc, InspectionRejected) or getattr(exc, "kind", None) in ("view", "evidence")
            or getattr(exc, "code", None) in ("target_unavailable", "execution_failure")):
        return {}
    doc = public_rejection(exc)
    out = {k: doc[k] for k in ("code", "category", "constraint")}
    if doc["details"]:
        out["details"] = doc["details"]
    return out
