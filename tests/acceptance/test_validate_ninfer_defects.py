"""``convert validate`` on ``.ninfer`` artifacts: clean ones pass, each seeded defect is found by its Gate (A–F)
with its code, and an artifact without provenance is runnable but BLOCKED_REPRODUCIBILITY (docs/calbin.md §10)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.acceptance.validate_ninfer import validate_ninfer
from tests.support.gates import converted, rewrite, write_sources
from tinymodels import qwen35

DIVISOR_RECIPE = """\
name: bf16-divisor
description: bf16 everywhere; the mlp.down uses carry a constant activation input divisor.
encoder: absmax
activation_policy: A16Only
roles:
  "*": {format: bf16}
  mlp.down: {format: bf16, activation_input_divisor: 4.0}
"""


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("sources")
    paths = write_sources(d)
    # value heads of 16 columns: ssm_out's V-head column order cannot move whole Q8_0 blocks, so the exact
    # recipe keeps the bytes and binds an input_columns auxiliary (container §8)
    paths["cols_gguf"] = d / "cols.gguf"
    qwen35.write_gguf(paths["cols_gguf"], qwen35.config(linear_value_head_dim=16), matrix_type="Q8_0")
    paths["div_recipe"] = d / "bf16-divisor.yaml"
    paths["div_recipe"].write_text(DIVISOR_RECIPE)
    return paths


@pytest.fixture(scope="module")
def clean(src, tmp_path_factory):
    d = tmp_path_factory.mktemp("clean")
    return {
        "gi": converted(src["q35_gguf"], d / "gi.ninfer", "groupwise-int"),
        "q3": converted(src["q3_hf"], d / "q3.ninfer", "bf16"),
        "had": converted(src["had_hf"], d / "had.ninfer", src["had_recipe"]),
        "cols": converted(src["cols_gguf"], d / "cols.ninfer", "exact"),
        "div": converted(src["q35_gguf"], d / "div.ninfer", src["div_recipe"]),
        "split": converted(src["q35_gguf"], d / "split" / "split.ninfer", "groupwise-int", max_file_bytes=400_000)
        if (d / "split").mkdir() is None else None,
    }


def errors(report) -> dict[str, set[str]]:
    """Gate → codes of its findings above INFO."""
    out: dict[str, set[str]] = {}
    for f in report.findings:
        if f.severity != "INFO":
            out.setdefault(f.gate, set()).add(f.code)
    return out


@pytest.mark.parametrize("name", ["gi", "q3", "had", "cols", "div", "split"])
def test_clean_artifacts_pass_every_gate(clean, name):
    r = validate_ninfer(clean[name])
    assert r.verdict == "pass", errors(r)
    assert [g.status for g in r.gates] == ["pass"] * 6
    assert "NINFER_RUNTIME_RUN_REQUIRED" in r.codes()


def test_clean_artifacts_with_auxiliaries_also_pass_verify(src, clean):
    """input_columns and activation divisors are decoded and undone by verify as a consumer would."""
    assert verify(clean["cols"], src["cols_gguf"], sweep=True).result == "pass"
    assert verify(clean["div"], src["q35_gguf"]).result == "pass"


def _copy_split(clean, tmp_path):
    d = tmp_path / "copy"
    shutil.copytree(clean["split"].parent, d)
    return d / "split.ninfer"


def test_truncated_part_is_gate_a(clean, tmp_path):
    entry = _copy_split(clean, tmp_path)
    part = entry.parent / "split.ninfer.part-0002"
    os.truncate(part, part.stat().st_size - 7)
    r = validate_ninfer(entry)
    assert r.verdict == "fail" and "NINFER_PART_SIZE" in errors(r)["A"]
    assert r.by_code("NINFER_PART_SIZE")[0].file == "split.ninfer.part-0002"


def test_truncated_entry_is_gate_a(clean, tmp_path):
    bad = tmp_path / "short.ninfer"
    data = clean["gi"].read_bytes()
    bad.write_bytes(data[: len(data) - 1000])
    r = validate_ninfer(bad)
    assert r.verdict == "fail" and errors(r) == {"A": {"NINFER_PART_SIZE"}}


def test_foreign_artifact_id_is_gate_a(clean, tmp_path):
    entry = _copy_split(clean, tmp_path)
    with open(entry.parent / "split.ninfer.part-0001", "r+b") as fh:
        fh.seek(16)
        fh.write(b"\x5a" * 16)
    r = validate_ninfer(entry)
    assert "NINFER_PART_FOREIGN" in errors(r)["A"]


def test_missing_part_and_symlink_escape_are_gate_a(clean, tmp_path):
    entry = _copy_split(clean, tmp_path)
    part = entry.parent / "split.ninfer.part-0001"
    outside = tmp_path / "elsewhere.bin"
    shutil.move(part, outside)
    assert "NINFER_PART_MISSING" in errors(validate_ninfer(entry))["A"]
    part.symlink_to(outside)
    r = validate_ninfer(entry)
    assert errors(r) == {"A": {"NINFER_SYMLINK_ESCAPE"}}


def test_undeclared_part_is_reported_not_judged(clean, tmp_path):
    entry = _copy_split(clean, tmp_path)
    (entry.parent / "split.ninfer.part-0009").write_bytes(b"stale")
    r = validate_ninfer(entry)
    assert r.verdict == "pass" and r.by_code("NINFER_UNKNOWN_FILE")[0].file == "split.ninfer.part-0009"


def test_missing_binding_and_extra_object_are_gate_c(clean, tmp_path):
    r = validate_ninfer(rewrite(clean["gi"], tmp_path / "a.ninfer", drop_bindings={"text/layers/7/mlp/up"}))
    assert errors(r) == {"C": {"NINFER_BINDING_MISSING"}}
    r = validate_ninfer(rewrite(clean["gi"], tmp_path / "b.ninfer", extra={"text/extra": np.zeros(8)}))
    assert errors(r) == {"C": {"NINFER_OBJECT_UNCONSUMED"}, "E": {"NINFER_SUPPLY_OBJECT_UNTRACED"}}
    assert r.by_code("NINFER_OBJECT_UNCONSUMED")[0].path.startswith("$.objects[")
    assert r.by_code("NINFER_SUPPLY_OBJECT_UNTRACED")[0].detail["objects"] == ["text/extra"]


def test_changed_resource_is_gate_e(clean, tmp_path):
    r = validate_ninfer(rewrite(clean["gi"], tmp_path / "r.ninfer",
                                resources={"frontend/tokenizer_config.json": b"{}"}))
    assert errors(r) == {"E": {"NINFER_SUPPLY_RESOURCE_HASH"}}


def test_missing_provenance_blocks_reproducibility_but_not_running(clean, tmp_path):
    r = validate_ninfer(rewrite(clean["gi"], tmp_path / "p.ninfer", provenance=None))
    assert r.verdict == "pass_with_warnings"
    assert [f.severity for f in r.by_code("NINFER_SUPPLY_PROVENANCE_MISSING")] == ["BLOCKED_REPRODUCIBILITY"]
    assert r.gate("E").status == "pass_with_warnings"


def test_incomplete_provenance_names_what_is_missing(clean, tmp_path):
    from ninfer_core import open_artifact

    with open_artifact(clean["gi"]) as art:
        prov = dict(art.provenance)
        layer1 = [o.id for o in art.objects if o.id.startswith("text/layers/1/")]
    prov["recipe"] = {"name": "groupwise-int"}
    prov["source"] = {"kind": "gguf"}
    prov["objects"] = {k: v for k, v in prov["objects"].items() if not k.startswith("text/layers/1/")}
    r = validate_ninfer(rewrite(clean["gi"], tmp_path / "p.ninfer", provenance=prov))
    assert errors(r) == {"E": {"NINFER_SUPPLY_RECIPE_MISSING", "NINFER_SUPPLY_SOURCE_MISSING",
                               "NINFER_SUPPLY_OBJECT_UNTRACED"}}
    untraced = r.by_code("NINFER_SUPPLY_OBJECT_UNTRACED")[0]
    assert untraced.detail["objects"] == layer1 and len(layer1) == 13  # a gated delta net layer's objects
    assert "sha256" in r.by_code("NINFER_SUPPLY_RECIPE_MISSING")[0].evidence


@pytest.mark.parametrize("oid, change", [
    ("text/hadamard_signs", lambda s: np.concatenate([s[:3], [0.5], s[4:]])),  # not +-1
    ("text/hadamard_widths", lambda w: w * 2),                                 # widths disagree with the signs
])
def test_wrong_hadamard_auxiliaries_are_gate_f(clean, tmp_path, oid, change):
    r = validate_ninfer(rewrite(clean["had"], tmp_path / "h.ninfer", edit={oid: change}))
    assert errors(r) == {"F": {"NINFER_AUX_HADAMARD"}}


def test_input_columns_that_are_not_a_permutation_are_gate_f(clean, tmp_path):
    r = validate_ninfer(rewrite(clean["cols"], tmp_path / "c.ninfer",
                                edit={"text/input_columns/0": lambda c: np.where(c == 1, 0, c)}))
    assert errors(r) == {"F": {"NINFER_AUX_INPUT_COLUMNS"}}


def test_input_columns_in_the_wrong_order_fail_verify_order_probes(src, clean, tmp_path):
    """A valid permutation (Gate F passes) that is not the source's column order: the V-head columns of
    ssm_out land on the wrong heads, which only a comparison with the source can see."""
    bad = rewrite(clean["cols"], tmp_path / "c.ninfer", edit={"text/input_columns/0": lambda c: np.sort(c)})
    assert validate_ninfer(bad).verdict == "pass"
    r = verify(bad, src["cols_gguf"])
    moved = [i for i in r.gate(5).issues if i.code == "VERIFY_HEAD_ORDER"]
    assert moved and all(i.path.endswith("/gdn/output") for i in moved)
    assert "columns" in moved[0].evidence


def test_bad_activation_divisor_is_gate_f(clean, tmp_path):
    r = validate_ninfer(rewrite(clean["div"], tmp_path / "d.ninfer",
                                edit={"text/activation_input_divisors": lambda v: -v}))
    assert errors(r) == {"F": {"NINFER_AUX_DIVISOR"}}
