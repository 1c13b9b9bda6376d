"""The gate registry and the one finding/report model (docs/acceptance.md §Gate registry, §One finding model):
every gate registered once under one naming scheme and documented with its codes; check, verify and validate
all report ``report.model.Finding`` records in ``report.model.Report`` gates."""

from __future__ import annotations

import re

import pytest

from converters import ROOT
from converters.acceptance import check, validate_ninfer
from converters.acceptance.gates import verify
from converters.acceptance.gates.codes import SPECS, finding
from converters.acceptance.registry import gates_of
from converters.acceptance.report import SCHEMA_VERIFY, Finding, Report
from converters.errors import ConverterError

DOC = (ROOT / "docs" / "acceptance.md").read_text(encoding="utf-8")
LABELS = {"check": ["1", "2", "3"], "verify": [str(n) for n in range(1, 8)], "validate": list("ABCDEF")}
MODULES = {"check": check, "verify": verify, "validate": validate_ninfer}  # each registers its kind's gates


def documented(kind: str) -> dict[str, dict]:
    """``id -> {label, needs, codes}`` from the page's table of ``kind``'s gates."""
    section = DOC.split(f"### §{kind} gates", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        needs = () if kind == "check" or cells[2] == "—" else tuple(n.strip() for n in cells[2].split(","))
        rows[cells[0].strip("`")] = {"label": cells[1], "needs": needs, "codes": set(re.findall(r"`([A-Z_]+)`", cells[-1]))}
    return rows


def assigned(kind: str, label: str) -> set[str]:
    """The codes the code table assigns to a gate."""
    column = {"check": "check_gate", "verify": "verify_gate", "validate": "validate_gate"}[kind]
    return {c.code for c in SPECS if str(getattr(c, column)) == label}


@pytest.mark.parametrize("kind", sorted(LABELS))
def test_each_kind_registers_its_gates_once_in_label_order_under_kind_dot_title(kind):
    specs = gates_of(kind)
    assert [s.label for s in specs] == LABELS[kind]
    assert all(s.id == f"{kind}.{s.title}" and s.kind == kind and s.summary for s in specs)
    assert len({s.id for s in specs}) == len(specs)


@pytest.mark.parametrize("kind", sorted(LABELS))
def test_the_page_lists_every_gate_with_its_label_needs_and_codes(kind):
    docs = documented(kind)
    assert list(docs) == [s.id for s in gates_of(kind)]
    for s in gates_of(kind):
        row = docs[s.id]
        assert row["label"] == s.label, s.id
        if kind != "check":
            assert row["needs"] == s.needs, s.id
        assert assigned(kind, s.label) <= row["codes"], (s.id, assigned(kind, s.label) - row["codes"])
        assert row["codes"] <= {c.code for c in SPECS}, s.id


def test_verify_keeps_its_gate_numbers_and_names():
    assert verify.GATES == ((1, "structure"), (2, "coverage"), (3, "codec_validity"), (4, "values"),
                            (5, "order_probes"), (6, "resources"), (7, "golden_numerics"))


@pytest.fixture
def not_an_artifact(tmp_path):
    path = tmp_path / "junk.ninfer"
    path.write_bytes(b"not a container" * 8)
    return path


def test_verify_files_each_finding_under_the_gate_that_reported_it(not_an_artifact):
    r = verify.verify(not_an_artifact)
    assert r.schema == SCHEMA_VERIFY and r.result == "fail"
    assert [g.status for g in r.gates] == ["fail"] + ["skipped"] * 6
    assert all(type(f) is Finding and f.gate == g.name for g in r.gates for f in g.findings)
    assert r.codes(1) == {"NINFER_FRAMING"} and r.findings == tuple(r.gate(1).findings)
    doc = r.to_json()
    assert doc["gates"][0]["findings"][0]["gate"] == "1" and doc["gates"][1]["reason"].startswith(
        "skipped: the artifact cannot be opened")


def test_validate_files_findings_under_their_codes_letter_and_leaves_unmet_gates_not_run(not_an_artifact):
    r = validate_ninfer.validate_ninfer(not_an_artifact)
    assert {g.name: g.status for g in r.gates} == {"A": "fail", "B": "pass", "C": "pass", "D": "not_run",
                                                   "E": "not_run", "F": "not_run"}
    assert all(type(f) is Finding and f.gate == "A" for f in r.findings)
    assert [g["name"] for g in r.to_json()["gates"]] == list("ABCDEF")


def test_a_finding_is_filed_under_the_gate_given_else_its_own_and_never_under_none():
    r = Report(SCHEMA_VERIFY, gates=[(s.label, s.title, s.id) for s in gates_of("verify")])
    late = finding("VERIFY_ROW_ORDER", "rows 3 and 5 swapped", path="text/layers/0/attention/query")
    assert late.gate is None and late.severity == "ERROR"
    filed = r.add(late, gate="5")
    assert filed.gate == "5" and r.gate(5).status == "fail" and r.result == "fail"
    with pytest.raises(ConverterError):
        r.add(late)
    with pytest.raises(KeyError):
        finding("NOT_A_DOCUMENTED_CODE", "x")


def test_a_skipped_gate_is_neither_pass_nor_fail_and_makes_the_result_incomplete():
    r = Report(SCHEMA_VERIFY, gates=[(s.label, s.title, s.id) for s in gates_of("verify")])
    for g in r.gates:
        g.check("ran")
    r.gate(7).skip("no source")
    r.add(finding("VERIFY_SKIPPED_NO_SOURCE", "gate 7 compares with the source"), gate="7")
    assert r.gate(7).status == "skipped" and r.result == "incomplete" and r.verdict == "pass"
    assert r.gate(7).to_dict()["reason"] == "skipped: no source"
