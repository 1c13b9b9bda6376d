"""The recipe regression suite as part of ``make test``: every case of ``recipes/regression.yaml``.

A case fails when ``convert verify`` does not pass or when any per-object digest differs from
``recipes/regression/expected/<case>.json``; the failure message is the table ``convert regress`` prints
(which objects changed, and how). Accept an intended change with ``convert regress --update``.
"""

from __future__ import annotations

import pytest

from converters.regress import load_cases, run_case

CASES = load_cases()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("regress")  # fixtures generated once, shared by the cases


def explain(r) -> str:
    lines = [f"{r.case.name}: {r.result}"]
    if r.error:
        lines.append(r.error)
    lines += r.verify_failures[:10]
    for c in r.changes[:20]:
        absmax, total, vs = c.value_columns()
        lines.append(f"  {c.what}: {c.describe()} | absmax {absmax} | sum {total} | vs source {vs}")
    if r.result == "missing_expectation":
        lines.append(f"  run: convert regress {r.case.name} --update")
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_regression_case(case, workdir):
    r = run_case(case, workdir)
    assert r.result == "pass", explain(r)
    assert r.verify == "pass" and r.objects > 0 and not r.changes
