"""The one validation report model shared by every package kind (``specs/validation-report.md``).

Public API::

    from converters.acceptance.report import (
        Report, Finding, Gate, Severity, CodeSpec, CodeTable,
        SCHEMA_CALBIN, SCHEMA_NINFER, GATE_TITLES, render, sanitize,
    )

- :class:`Report` ``(schema, package=None)``: ``add(finding)``, ``extend(findings)``, ``section(name)``,
  ``gate(name)`` → :class:`Gate` (``.check(name)``, ``.status``), ``findings``, ``codes()``,
  ``by_code(code)``, ``counts()``, ``verdict``, ``to_json(sanitized=False)``.
- :class:`Finding` ``(severity, code, gate, evidence, path=None, file=None, line=None, detail=None)``.
- :class:`CodeTable` ``([CodeSpec(code, severity, gate, summary), ...])``: ``finding(code, evidence, **where)``.
- :func:`render` ``(report, console, *, sanitized=False)``: rich tables.
- :func:`sanitize` ``(json_doc)``: the shareable copy (no addresses, no absolute paths).
"""

from converters.acceptance.report.model import (
    GATE_STATUSES,
    GATE_TITLES,
    SCHEMA_CALBIN,
    SCHEMA_NINFER,
    SCHEMAS,
    VERDICTS,
    CodeSpec,
    CodeTable,
    Finding,
    Gate,
    Report,
    Severity,
)
from converters.acceptance.report.render import render
from converters.acceptance.report.sanitize import is_address_key, sanitize, scrub_text

__all__ = [
    "GATE_STATUSES",
    "GATE_TITLES",
    "SCHEMAS",
    "SCHEMA_CALBIN",
    "SCHEMA_NINFER",
    "VERDICTS",
    "CodeSpec",
    "CodeTable",
    "Finding",
    "Gate",
    "Report",
    "Severity",
    "is_address_key",
    "render",
    "sanitize",
    "scrub_text",
]
