"""Running regression cases: generate the fixture, convert, verify, digest, compare (or update).

Per case (:func:`run_case`):

1. the fixture is generated under the work directory (:mod:`converters.regress.fixtures`);
2. it is converted with the case's recipe and options (:func:`converters.pipeline.convert.convert`, a fixed
   ``artifact_id`` — the digest does not depend on it, the determinism tests cover it);
3. ``convert verify`` (:func:`converters.acceptance.gates.verify.verify`) runs every gate against the source; anything
   but ``pass`` fails the case whatever the digest says;
4. the artifact's digest (:mod:`converters.regress.digest`) is compared with the checked-in expectation
   ``recipes/regression/expected/<case>.json``. Any difference fails the case, listing what changed.

With ``update`` the expectation is rewritten instead (after a passing verify only: an artifact the gates
reject is never pinned as expected), and the changes it makes are reported the same way.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from converters.regress.cases import EXPECTED_DIR, Case
from converters.regress.digest import SCHEMA, Change, artifact_digest, compare
from converters.regress.fixtures import ensure_fixture
from ninfer_core.errors import NinferError

log = logging.getLogger(__name__)
ARTIFACT_ID = "00000000000000000000000000000009"
RESULTS = ("pass", "updated", "changed", "verify_failed", "missing_expectation", "error")


@dataclass
class CaseResult:
    case: Case
    result: str  # one of RESULTS
    changes: list[Change] = field(default_factory=list)
    objects: int = 0
    verify: str | None = None
    verify_failures: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.result in ("pass", "updated")

    def to_json(self) -> dict:
        return {"case": self.case.name, "fixture": self.case.fixture.name, "recipe": self.case.recipe,
                "options": self.case.options, "result": self.result, "objects": self.objects,
                "verify": self.verify, "verify_failures": self.verify_failures, "error": self.error,
                "changes": [c.to_json() for c in self.changes], "seconds": round(self.seconds, 3)}


def expectation(case: Case, digest: dict) -> dict:
    return {"schema": SCHEMA, "case": case.name, "fixture": {"name": case.fixture.name, **case.fixture.to_json()},
            "recipe": Path(case.recipe).name if "/" in case.recipe else case.recipe, "options": case.options,
            **digest}


def expectation_text(value: dict) -> str:
    """JSON with one line per object, binding and component, so a review diff shows exactly what moved."""
    def one(v) -> str:
        return json.dumps(v, separators=(", ", ": "), ensure_ascii=False)

    lines = []
    for key, v in value.items():
        if isinstance(v, dict) and key in ("objects", "bindings", "components") and v:
            items = [f"  {one(k)}: {one(x)}" for k, x in v.items()]
            lines.append(f" {one(key)}: {{\n" + ",\n".join(items) + "\n }")
        else:
            lines.append(f" {one(key)}: {one(v)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def run_case(case: Case, workdir: Path, *, expected_dir: Path = EXPECTED_DIR, update: bool = False,
             workers: int | None = 2) -> CaseResult:
    """Run one case (see the module docstring); never raises for a failing case, only reports it."""
    from converters.acceptance.gates.verify import verify
    from converters.pipeline.convert import convert

    started = time.perf_counter()
    out_dir = Path(workdir) / "cases" / case.name
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    components = tuple(case.options.get("components", ["text"]))
    try:
        source = ensure_fixture(case.fixture, workdir)
        artifact = out_dir / f"{case.name}.ninfer"
        convert(source, artifact, recipe=case.recipe, artifact_id=ARTIFACT_ID, workers=workers,
                max_file_bytes=case.options.get("max_file_bytes"),
                components=components)
        report = verify(artifact, source)
        digest = artifact_digest(artifact, source, components=components)
    except NinferError as exc:
        return CaseResult(case, "error", error=str(exc), seconds=time.perf_counter() - started)
    res = CaseResult(case, "pass", objects=len(digest["objects"]), verify=report.result)
    res.verify_failures = [f"gate {g.number} {g.title}: {i.code} {i.evidence}" for g in report.gates
                           for i in g.issues if i.severity == "ERROR"]
    path = case.expected_path(expected_dir)
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    res.changes = compare(old, digest) if old is not None else []
    if report.result != "pass":
        res.result = "verify_failed"
    elif update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(expectation_text(expectation(case, digest)), encoding="utf-8")
        res.result = "updated"
    elif old is None:
        res.result = "missing_expectation"
    elif res.changes:
        res.result = "changed"
    res.seconds = time.perf_counter() - started
    return res


def run_cases(cases: list[Case], *, workdir: Path | None = None, expected_dir: Path = EXPECTED_DIR,
              update: bool = False, workers: int | None = 2, keep: bool = False,
              on_result=None) -> list[CaseResult]:
    """Run ``cases`` sharing one work directory (fixtures generated once); removed afterwards unless ``keep``."""
    own = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="ninfer-regress-")) if own else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for case in cases:
            r = run_case(case, workdir, expected_dir=expected_dir, update=update, workers=workers)
            results.append(r)
            if on_result is not None:
                on_result(r)
    finally:
        if own and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return results


def stale_expectations(cases: list[Case], expected_dir: Path = EXPECTED_DIR) -> list[Path]:
    """Expectation files that no case uses any more."""
    names = {c.name for c in cases}
    return sorted(p for p in Path(expected_dir).glob("*.json") if p.stem not in names)
