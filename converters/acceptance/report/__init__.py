"""The one acceptance report model shared by check, verify and validate of every package kind
(docs/acceptance.md §One finding model).

Public API::

    from converters.acceptance.report import (
        Report, Finding, Gate, Severity, CodeSpec, CodeTable,
        SCHEMA_CALBIN, SCHEMA_NINFER, SCHEMA_VERIFY, SCHEMA_CHECK, GATE_TITLES, render, sanitize,
    )

- :class:`Report` ``(schema, package=None, gates=None)``: ``add(finding, gate=None)``, ``extend(findings)``,
  ``section(name)``, ``gate(label)`` → :class:`Gate` (``.check(name)``, ``.skip(reason)``, ``.status``,
  ``.evidence``), ``findings``, ``codes(gate=None)``, ``by_code(code)``, ``counts()``, ``verdict``,
  ``result``, ``to_json(sanitized=False)``.
- :class:`Finding` ``(severity, code, gate, evidence, path=None, file=None, line=None, detail=None)``.
- :class:`CodeTable` ``([CodeSpec(code, severity, gate, summary), ...])``: ``finding(code, evidence, **where)``.
- :func:`render` ``(report, console, *, sanitized=False)``: rich tables.
- :func:`sanitize` ``(json_doc)``: the shareable copy (no addresses, no absolute paths).
"""

from converters.acceptance.report.model import (
    GATE_STATUSES,
    GATE_TITLES,
    RESULTS,
    SCHEMA_CALBIN,
    SCHEMA_CHECK,
    SCHEMA_NINFER,
    SCHEMA_VERIFY,
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
    "RESULTS",
    "SCHEMAS",
    "SCHEMA_CALBIN",
    "SCHEMA_CHECK",
    "SCHEMA_NINFER",
    "SCHEMA_VERIFY",
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
