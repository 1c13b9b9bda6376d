"""Scripts that read ``convert check/verify/validate --json`` and ``validation.json`` keep working: every key
path those documents had when the one acceptance model replaced the per-command records is still there,
with the same value types (docs/acceptance.md §Output stability). Fields may be added, never removed."""

from __future__ import annotations

import json

import pytest

from converters import ROOT
from tests.support.acceptance_reports import documents, key_paths

RECORDED = json.loads((ROOT / "tests" / "support" / "acceptance_json_keys.json").read_text())


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    return documents(tmp_path_factory.mktemp("acceptance"))


@pytest.mark.parametrize("kind", sorted(RECORDED))
def test_every_recorded_key_path_keeps_its_value_types(docs, kind):
    now = key_paths(docs[kind])
    lost = sorted(p for p in RECORDED[kind] if p not in now)
    assert not lost, f"{kind}: key paths removed: {lost}"
    retyped = {p: (t, sorted(now[p])) for p, t in RECORDED[kind].items() if sorted(now[p]) != t}
    assert not retyped, f"{kind}: value types changed: {retyped}"


def test_key_paths_see_a_removed_or_retyped_field():
    doc = {"gates": [{"gate": 1, "findings": [{"code": "X"}]}], "result": "pass"}
    assert key_paths(doc)["$.gates[].findings[].code"] == {"string"}
    assert "$.gates[].findings[].code" not in key_paths({"gates": [{"gate": 1, "findings": []}]})
    assert key_paths({"gates": [{"gate": "1"}]})["$.gates[].gate"] == {"string"}
