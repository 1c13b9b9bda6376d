"""The regression suite as ``convert regress`` runs it: select cases, run them, list stale expectations.

:func:`run_suite` reads the case file (default ``recipes/regression.yaml``; another file keeps its
expectations in ``regression/expected/`` beside it), keeps the cases named (all when none are; an
unknown name is refused before anything runs), runs them (:func:`converters.regress.runner.run_cases`)
and, when the whole file ran, lists the expectation files no case uses any more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from converters.regress.cases import CASES_FILE, EXPECTED_DIR, CaseError, load_cases
from converters.regress.runner import CaseResult, run_cases, stale_expectations

SCHEMA = "ninfer-regression-report/v1"


@dataclass
class SuiteResult:
    """The cases run, and the stale expectation files (only looked for when every case ran)."""

    cases_file: Path
    update: bool
    results: list[CaseResult]
    stale: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def to_json(self) -> dict:
        """The ``convert regress --json`` report (``verdict``; ``result`` is its older spelling, kept for one
        release: docs/cli.md §JSON contract)."""
        verdict = "pass" if self.ok else "fail"
        return {"schema": SCHEMA, "cases_file": str(self.cases_file), "update": self.update,
                "verdict": verdict, "result": verdict, "stale_expectations": self.stale,
                "cases": [r.to_json() for r in self.results]}


def run_suite(names: list[str] | None = None, *, cases_file: Path | None = None, update: bool = False,
              workers: int | None = 2, workdir: Path | None = None,
              on_result: Callable[[CaseResult], None] | None = None) -> SuiteResult:
    """Run the cases ``names`` (default: all) of ``cases_file``; ``update`` rewrites their expectations,
    ``workdir`` keeps fixtures and artifacts there, ``on_result`` is called after each case."""
    path = cases_file or CASES_FILE
    cases = load_cases(path)
    expected_dir = EXPECTED_DIR if cases_file is None else Path(path).parent / "regression" / "expected"
    if names:
        unknown = sorted(set(names) - {c.name for c in cases})
        if unknown:
            raise CaseError(f"no case named {', '.join(unknown)}", file=str(path), rule="case_unknown")
        cases = [c for c in cases if c.name in set(names)]
    results = run_cases(cases, expected_dir=expected_dir, update=update, workers=workers, workdir=workdir,
                        on_result=on_result)
    stale = [str(p) for p in stale_expectations(load_cases(path), expected_dir)] if not names else []
    return SuiteResult(Path(path), update, results, stale)
