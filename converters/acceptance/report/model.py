"""The one acceptance report model: findings, gates, verdict, for check, verify and validate (docs/acceptance.md).

``convert validate`` writes the same report shape for calbin NPU packages and for ``.ninfer`` artifacts; only
the schema name and the kind-specific sections differ. ``convert verify`` and ``convert check`` use the same
:class:`Finding`, :class:`Gate` and :class:`Report`; their JSON layout is the one scripts already read
(:meth:`Report.to_json`, one layout per schema).

Rules implemented here (docs/acceptance.md §One finding model):

- A :class:`Finding` is ``{severity, code, gate, evidence}`` plus ``path``/``file``/``line`` where known and
  an optional structured ``detail``. Severities are ``ERROR``, ``BLOCKED_REPRODUCIBILITY``,
  ``WARNING_<AREA>`` (``WARNING_VENDOR``, ``WARNING_SERVICE``; a ``.ninfer`` artifact may add its own area)
  and ``INFO``. Codes are stable upper-case identifiers, documented in ``docs/validation-codes.md``. The gate
  is a label: a validate gate's letter ``A``–``F``, a verify or check gate's number.
- Each gate's status: ``fail`` when it holds an ``ERROR``; ``skipped`` when it could not run (what it lacked
  is its ``reason``); ``pass_with_warnings`` when it holds any other finding above ``INFO``; ``pass`` when it
  ran at least one check (or holds only ``INFO``); else ``not_run``.
- The verdict: ``fail`` when any ``ERROR``; ``pass_with_warnings`` when any other finding above ``INFO``
  (a ``BLOCKED_REPRODUCIBILITY`` package may still run, it may not be called reproducible); else ``pass``.
  The result (verify, check): ``fail`` when a gate fails, ``incomplete`` when one was skipped, else ``pass``.

A validator usually creates findings through a :class:`CodeTable`, which fixes each code's severity and
gate in one place so the table, the docs and the emitted findings cannot drift apart.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from converters.errors import ConverterError

SCHEMA_CALBIN = "calculet-package-validation/v1"
SCHEMA_NINFER = "ninfer-artifact-validation/v1"
SCHEMA_VERIFY = "ninfer-artifact-verify/v1"
SCHEMA_CHECK = "ninfer-conversion-check/v1"
SCHEMAS = (SCHEMA_CALBIN, SCHEMA_NINFER, SCHEMA_VERIFY, SCHEMA_CHECK)
#: schemas whose JSON lists findings once at report level, and per gate only their counts (validation.json)
VALIDATION_SCHEMAS = (SCHEMA_CALBIN, SCHEMA_NINFER)

#: The validation gates' letters and titles (docs/acceptance.md §Gate registry), in report order.
GATE_TITLES: dict[str, str] = {
    "A": "filesystem",
    "B": "schema",
    "C": "cross_reference",
    "D": "capacity",
    "E": "supply_chain",
    "F": "pre_run",
}

VERDICTS = ("pass", "pass_with_warnings", "fail")
RESULTS = ("pass", "incomplete", "fail")
GATE_STATUSES = ("pass", "pass_with_warnings", "fail", "skipped", "not_run")

_CODE_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")
_LABEL_RE = re.compile(r"^(?:[A-F]|[1-9])$")  # a validate gate's letter, a verify or check gate's number
_WARNING_RE = re.compile(r"^WARNING_[A-Z][A-Z0-9]*$")


class Severity:
    """Severity names and their order (``rank``: higher is worse; docs/acceptance.md §One finding model)."""

    ERROR = "ERROR"
    BLOCKED_REPRODUCIBILITY = "BLOCKED_REPRODUCIBILITY"
    WARNING_VENDOR = "WARNING_VENDOR"
    WARNING_SERVICE = "WARNING_SERVICE"
    INFO = "INFO"

    @staticmethod
    def is_valid(name: str) -> bool:
        return name in (Severity.ERROR, Severity.BLOCKED_REPRODUCIBILITY, Severity.INFO) or bool(
            _WARNING_RE.match(name)
        )

    @staticmethod
    def rank(name: str) -> int:
        """3 = ERROR, 2 = BLOCKED_REPRODUCIBILITY, 1 = any WARNING_*, 0 = INFO."""
        if name == Severity.ERROR:
            return 3
        if name == Severity.BLOCKED_REPRODUCIBILITY:
            return 2
        if _WARNING_RE.match(name):
            return 1
        if name == Severity.INFO:
            return 0
        raise ConverterError(f"unknown severity {name!r}", rule="severity_name", section="docs/acceptance.md")


@dataclass(frozen=True)
class Finding:
    """One observation about a package or artifact, with its evidence: the one finding type of check,
    verify and validate.

    Attributes:
        severity: a :class:`Severity` name.
        code: stable upper-case identifier (``META_SMODEL_TYPE``).
        gate: the reporting gate's label, ``"A"``…``"F"`` or ``"1"``…``"9"``; ``None`` until a report files it
            (a check that verify and validate share makes its findings before it knows which gate runs it).
        evidence: one sentence a reader can act on; never a device address (those go in ``detail``
            under an address key, which the sanitized report drops).
        path: where inside a structured file (``one_model_cfg.x.model_info.batch_num``), if any.
        file: the file concerned, relative to the package root (POSIX separators), if any.
        line: 1-based line in ``file``, if any.
        detail: structured evidence (numbers, lists); keys named like addresses are internal-only.
    """

    severity: str
    code: str
    gate: str | None
    evidence: str
    path: str | None = None
    file: str | None = None
    line: int | None = None
    detail: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not Severity.is_valid(self.severity):
            raise ConverterError(f"unknown severity {self.severity!r}", rule="severity_name")
        if not _CODE_RE.match(self.code):
            raise ConverterError(f"finding code {self.code!r} is not an upper-case identifier", rule="code_form")
        if self.gate is not None and not _LABEL_RE.match(self.gate):
            raise ConverterError(f"unknown gate {self.gate!r} (expected A-F or a gate number)", rule="gate_name")

    @property
    def rank(self) -> int:
        return Severity.rank(self.severity)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"severity": self.severity, "code": self.code}
        if self.gate is not None:
            d["gate"] = self.gate
        d["evidence"] = self.evidence
        for key in ("path", "file", "line"):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        if self.detail:
            d["detail"] = dict(self.detail)
        return d


@dataclass(frozen=True)
class CodeSpec:
    """A documented finding code: its fixed severity and gate, and what it means."""

    code: str
    severity: str
    gate: str
    summary: str


class CodeTable:
    """A validator's table of codes (one per package kind); builds findings with the right severity/gate.

    >>> codes = CodeTable([CodeSpec("META_SMODEL_TYPE", "WARNING_VENDOR", "B", "prefill labelled decode")])
    >>> codes.finding("META_SMODEL_TYPE", "prefill submodel says llm_decode").severity
    'WARNING_VENDOR'
    """

    def __init__(self, specs: Iterable[CodeSpec]):
        self._specs: dict[str, CodeSpec] = {}
        for spec in specs:
            if spec.code in self._specs:
                raise ConverterError(f"code {spec.code} defined twice", rule="code_unique")
            # Validates severity, code form and gate once, at table construction.
            Finding(spec.severity, spec.code, spec.gate, spec.summary)
            self._specs[spec.code] = spec

    def __getitem__(self, code: str) -> CodeSpec:
        try:
            return self._specs[code]
        except KeyError:
            raise ConverterError(f"undocumented finding code {code!r}", rule="code_documented") from None

    def __iter__(self):
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def finding(self, code: str, evidence: str, **where: Any) -> Finding:
        """A :class:`Finding` for ``code`` (severity and gate from the table); ``where`` = path/file/line/detail."""
        spec = self[code]
        return Finding(spec.severity, code, spec.gate, evidence, **where)


@dataclass
class Gate:
    """One gate's machine-readable result: the checks it ran, its findings, and (verify, check) its evidence,
    time and skip reason. ``name`` is its label (``"A"``, ``"4"``), ``title`` what it is (``"filesystem"``,
    ``"values"``), ``id`` its registry id (``"verify.values"``; docs/acceptance.md §Gate registry)."""

    name: str
    title: str
    checks: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    id: str = ""
    skipped: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: True where the JSON lists this gate's findings in the gate (verify, check), False where the report
    #: lists them once and the gate only counts them (validation.json)
    lists_findings: bool = False

    def check(self, *names: str) -> None:
        """Record that the checks ``names`` ran (a gate that ran no check reports ``not_run``)."""
        for name in names:
            if name not in self.checks:
                self.checks.append(name)

    def skip(self, reason: str) -> None:
        """The gate could not run (or not completely): ``reason`` says what it lacked."""
        self.skipped = reason

    @property
    def number(self) -> int:
        """A numbered gate's number (verify, check)."""
        return int(self.name)

    @property
    def issues(self) -> list[Finding]:
        """The findings (verify's earlier name for them)."""
        return self.findings

    @property
    def status(self) -> str:
        worst = max((f.rank for f in self.findings), default=-1)
        if worst == 3:
            return "fail"
        if self.skipped is not None:
            return "skipped"
        if worst >= 1:
            return "pass_with_warnings"
        if self.checks or self.findings:
            return "pass"
        return "not_run"

    def to_dict(self) -> dict[str, Any]:
        if self.lists_findings:
            return self._with_findings()
        counts = Counter(f.severity for f in self.findings)
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "checks": list(self.checks),
            "findings": dict(sorted(counts.items(), key=lambda kv: (-Severity.rank(kv[0]), kv[0]))),
        }

    def _with_findings(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gate": self.number, "name": self.title, "status": self.status}
        if self.skipped is not None:
            out["reason"] = f"skipped: {self.skipped}"
        out["checks"] = list(self.checks)
        out["findings"] = [f.to_dict() for f in self.findings]
        if self.evidence:
            out["evidence"] = self.evidence
        out["seconds"] = round(self.seconds, 3)
        return out


class Report:
    """An acceptance report under construction.

    Usage::

        report = Report(SCHEMA_NINFER, {"name": "model.ninfer", "path": "/abs/model.ninfer"})
        report.section("memory")["kv_bytes"] = 4026531840
        report.gate("A").check("declared_files_present")
        report.add(Finding("ERROR", "FILE_TRUNCATED", "A", "part 2 is 10 bytes short", file="model.ninfer.1"))
        report.verdict            # 'fail'
        report.to_json(sanitized=True)

    ``gates`` are ``(label, title, id)`` triples in report order (default: the validation gates A–F; verify
    and check pass their registered gates, :func:`converters.acceptance.registry.new_report`). Sections are
    kind-specific top-level blocks (``model``, ``components``, ``memory``, ``supply_chain``; verify's
    ``artifact``, ``source``, ``inputs``, ``layers``), emitted in the order first touched, after ``package``
    and before ``gates``.
    """

    def __init__(self, schema: str, package: Mapping[str, Any] | None = None,
                 gates: Iterable[tuple[str, str, str]] | None = None):
        if schema not in SCHEMAS:
            raise ConverterError(f"unknown report schema {schema!r}", rule="schema_name")
        self.schema = schema
        self.package: dict[str, Any] = dict(package or {})
        self.sections: dict[str, Any] = {}
        lists = schema not in VALIDATION_SCHEMAS
        triples = gates if gates is not None else ((n, t, f"validate.{t}") for n, t in GATE_TITLES.items())
        self._gates = {label: Gate(label, title, id=gid, lists_findings=lists) for label, title, gid in triples}
        self._findings: list[Finding] = []

    # -- building ---------------------------------------------------------------------------------
    def section(self, name: str, default: Any = None) -> Any:
        """The kind-specific block ``name``, created (as ``default`` or ``{}``) on first use."""
        if name in ("schema", "package", "gates", "findings", "verdict", "result"):
            raise ConverterError(f"{name!r} is a fixed report field, not a section", rule="section_name")
        if name not in self.sections:
            self.sections[name] = {} if default is None else default
        return self.sections[name]

    def add(self, finding: Finding, gate: str | None = None) -> Finding:
        """Record ``finding`` in the report and in a gate: ``gate`` (the gate that reported it) when given,
        else the finding's own gate; return it as filed."""
        label = gate if gate is not None else finding.gate
        if label is None:
            raise ConverterError(f"finding {finding.code} names no gate", rule="gate_name")
        target = self.gate(label)
        if finding.gate != target.name:
            finding = replace(finding, gate=target.name)
        self._findings.append(finding)
        target.findings.append(finding)
        return finding

    def extend(self, findings: Iterable[Finding], gate: str | None = None) -> None:
        for f in findings:
            self.add(f, gate)

    # -- reading ----------------------------------------------------------------------------------
    def gate(self, name: str | int) -> Gate:
        """The gate labelled ``name`` (a letter, or a verify/check gate's number)."""
        try:
            return self._gates[str(name)]
        except KeyError:
            raise ConverterError(f"unknown gate {name!r} (expected one of {', '.join(self._gates)})",
                                 rule="gate_name") from None

    @property
    def gates(self) -> list[Gate]:
        return list(self._gates.values())

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(self._findings)

    def codes(self, gate: str | int | None = None) -> set[str]:
        """The codes present, in the whole report or in one gate (for tests and callers that branch on a code)."""
        findings = self._findings if gate is None else self.gate(gate).findings
        return {f.code for f in findings}

    def by_code(self, code: str) -> list[Finding]:
        return [f for f in self._findings if f.code == code]

    @property
    def verdict(self) -> str:
        worst = max((f.rank for f in self._findings), default=0)
        if worst == 3:
            return "fail"
        if worst >= 1:
            return "pass_with_warnings"
        return "pass"

    @property
    def result(self) -> str:
        """``fail`` when a gate fails, ``incomplete`` when one was skipped, else ``pass``."""
        statuses = {g.status for g in self._gates.values()}
        if "fail" in statuses:
            return "fail"
        return "incomplete" if "skipped" in statuses else "pass"

    @property
    def ok(self) -> bool:
        return self.result != "fail"

    def counts(self) -> dict[str, int]:
        """Number of findings per severity, worst first."""
        c = Counter(f.severity for f in self._findings)
        return dict(sorted(c.items(), key=lambda kv: (-Severity.rank(kv[0]), kv[0])))

    # -- output -----------------------------------------------------------------------------------
    def to_json(self, sanitized: bool = False) -> dict[str, Any]:
        """The report's JSON document, in its schema's layout (docs/acceptance.md §Output stability).

        Validation (``validation.json``): ``schema``, ``package``, the sections, ``gates`` (finding counts),
        ``findings`` sorted worst first, then by gate, code, file and line, and ``verdict``. Verify: ``schema``,
        the sections, ``gates`` each with its findings, evidence and time, and ``result``.

        ``sanitized=True`` gives the shareable variant: no device addresses, absolute paths or command
        addresses (see :mod:`converters.acceptance.report.sanitize`); every finding, code, gate and the verdict stay.
        """
        doc: dict[str, Any] = {"schema": self.schema}
        if self.package or self.schema in VALIDATION_SCHEMAS:
            doc["package"] = dict(self.package)
        doc.update(self.sections)
        doc["gates"] = [g.to_dict() for g in self._gates.values()]
        if self.schema in VALIDATION_SCHEMAS:
            ordered = sorted(
                self._findings,
                key=lambda f: (-f.rank, f.gate, f.code, f.file or "", f.line or 0, f.path or ""),
            )
            doc["findings"] = [f.to_dict() for f in ordered]
            doc["verdict"] = self.verdict
        else:  # one verdict spelling across commands; ``result`` is its older name, kept for one release
            doc["verdict"] = self.result  # (docs/cli.md §JSON contract)
            doc["result"] = self.result
        doc = _plain(doc)
        if sanitized:
            from converters.acceptance.report.sanitize import sanitize

            doc = sanitize(doc)
        return doc


def _plain(obj: Any) -> Any:
    """Deep-copy into JSON types (tuples → lists, numpy scalars → Python numbers, keys → str)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (str, bool)) or obj is None:
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if hasattr(obj, "item"):  # numpy scalar
        return obj.item()
    if hasattr(obj, "to_dict"):
        return _plain(obj.to_dict())
    raise ConverterError(f"report value of type {type(obj).__name__} is not JSON-representable", rule="json_value")
