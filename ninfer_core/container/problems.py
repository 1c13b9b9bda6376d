"""Collecting rule violations instead of stopping at the first one.

The directory checks report every problem into a :class:`Problems` list as typed
:class:`~ninfer_core.errors.NinferError` values. ``open_artifact`` raises the first of them;
``validate`` turns all of them into :class:`~ninfer_core.findings.Finding` records. One check, two uses,
so the reader and the validator can never disagree about a rule.
"""

from __future__ import annotations

from ninfer_core.errors import NinferError
from ninfer_core.findings import Finding


class Problems:
    """An ordered list of typed errors found in one artifact (all about ``file`` unless stated)."""

    def __init__(self, file: str | None = None) -> None:
        self.file = file
        self.errors: list[NinferError] = []
        self.warnings: list[NinferError] = []

    def add(self, cls: type[NinferError], message: str, *, json_path: str | None, section: str, rule: str,
            file: str | None = None) -> None:
        self.errors.append(cls(message, file=file or self.file, json_path=json_path, section=section, rule=rule))

    def warn(self, cls: type[NinferError], message: str, *, json_path: str | None, section: str, rule: str,
             file: str | None = None) -> None:
        self.warnings.append(cls(message, file=file or self.file, json_path=json_path, section=section,
                                 rule=rule))

    def extend(self, error: NinferError) -> None:
        self.errors.append(error)

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_first(self) -> None:
        """Raise the first error, saying how many more were found (``validate`` lists them all)."""
        if not self.errors:
            return
        first = self.errors[0]
        more = len(self.errors) - 1
        if more:
            first.message = f"{first.message} (and {more} more problem{'s' if more > 1 else ''}; " \
                            f"`convert validate` lists all)"
            first.args = (str(first),)
        raise first

    def findings(self) -> list[Finding]:
        return [to_finding(e, "ERROR") for e in self.errors] + [to_finding(w, "WARNING") for w in self.warnings]


def to_finding(error: NinferError, severity: str = "ERROR") -> Finding:
    """A typed error as a :class:`Finding` (rule, severity, JSON path, message, section, file)."""
    return Finding(rule=error.rule or error.kind, severity=severity, json_path=error.json_path or "$",
                   message=error.message, section=error.section, file=error.file)
