"""``convert regress`` itself: a changed recipe is caught and explained, ``--update`` accepts it, bad case
files are typed errors.

A private case file (in ``tmp_path``) with its own recipe copy keeps these tests independent of the
shipped expectations: the recipe is edited (MLP q4 → q5) the way a developer would, and the report must
name exactly the MLP objects, say format and size changed, and show the error against the source going
down — values the report computes from the new artifact and the old expectation, not from the recipe.
"""

from __future__ import annotations

import json
import shutil

import pytest

from converters.cli import main
from converters.mapping.recipes import RECIPES_DIR
from converters.regress.cases import CaseError, load_cases
from converters.regress.digest import Change, compare

CASES = """
fixtures:
  q3: {model: qwen3, config: {num_hidden_layers: 2}, gguf: {matrix_type: Q8_0}}
cases:
  - {name: q3-mine, fixture: q3, recipe: mine.yaml}
  - {name: q3-exact, fixture: q3, recipe: exact}
"""


@pytest.fixture
def suite(tmp_path):
    (tmp_path / "cases.yaml").write_text(CASES)
    shutil.copy(RECIPES_DIR / "groupwise-int.yaml", tmp_path / "mine.yaml")
    return tmp_path


def regress(suite, *args, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    rc = main(["regress", "--cases", str(suite / "cases.yaml"), "--json", *args])
    return rc, json.loads(capsys.readouterr().out)


def test_update_then_pass_then_recipe_change_is_explained(suite, capsys):
    rc, rep = regress(suite, capsys=capsys)
    assert rc == 1 and {c["result"] for c in rep["cases"]} == {"missing_expectation"}
    rc, rep = regress(suite, "--update", capsys=capsys)
    assert rc == 0 and {c["result"] for c in rep["cases"]} == {"updated"}
    assert sorted(p.name for p in (suite / "regression" / "expected").iterdir()) == ["q3-exact.json", "q3-mine.json"]
    rc, rep = regress(suite, capsys=capsys)
    assert rc == 0 and rep["result"] == "pass" and all(c["verify"] == "pass" for c in rep["cases"])

    recipe = suite / "mine.yaml"
    recipe.write_text(recipe.read_text().replace("mlp.*: {format: q4_g64_fp16}", "mlp.*: {format: q5_g64_fp16}")
                      .replace("mlp/gate_up: {members: [mlp.gate, mlp.up], format: q4_g64_fp16}",
                               "mlp/gate_up: {members: [mlp.gate, mlp.up], format: q5_g64_fp16}"))
    rc, rep = regress(suite, capsys=capsys)
    assert rc == 1
    mine, exact = rep["cases"]
    assert exact["result"] == "pass" and mine["result"] == "changed"
    changed = {c["what"]: c for c in mine["changes"]}
    assert set(changed) == {f"text/layers/{i}/mlp/{k}" for i in (0, 1) for k in ("gate_up", "down")}
    for c in changed.values():
        assert c["old"]["format"] == "q4_g64_fp16" and c["new"]["format"] == "q5_g64_fp16"
        assert c["new"]["bytes"] > c["old"]["bytes"]
        assert c["change"].startswith("format q4_g64_fp16→q5_g64_fp16; bytes ")
        assert c["new"]["vs_source"] < c["old"]["vs_source"]  # one more bit: closer to the source
    capsys.readouterr()
    assert main(["regress", "--cases", str(suite / "cases.yaml"), "q3-mine"]) == 1
    text = capsys.readouterr().out
    assert "4 change(s)" in text and "/mlp/gate_up" in text and "REGRESS: FAIL" in text
    rc, rep = regress(suite, "q3-mine", "--update", capsys=capsys)
    assert rc == 0 and len(rep["cases"]) == 1 and rep["cases"][0]["changes"]  # the update reports what it accepts
    rc, rep = regress(suite, capsys=capsys)
    assert rc == 0


def test_compare_reports_each_kind_of_difference():
    obj = {"kind": "tensor", "format": "bf16", "layout": "contiguous_le_v1", "shape": [4, 8], "divisors": 1,
           "bytes": 64, "sha256": "aa", "decoded": {"sum": 1.0, "absmax": 0.5, "rms": 0.1}, "vs_source": 0.0}
    old = {"objects": {"a": obj, "b": obj, "c": obj}, "bindings": {"x": "1", "y": "2"}, "uses": "u",
           "components": {"text": "t"}, "metadata": "m"}
    new = {"objects": {"a": obj, "b": {**obj, "sha256": "bb", "decoded": {"sum": 1.5, "absmax": 0.5, "rms": 0.1}},
                       "c": {**obj, "shape": [8, 4]}, "d": obj},
           "bindings": {"x": "1", "y": "3"}, "uses": "u2", "components": {"text": "t"}, "metadata": "m"}
    changes = {c.what: c for c in compare(old, new)}
    assert set(changes) == {"b", "c", "d", "bindings/y", "uses"}
    assert changes["b"].describe() == "content" and changes["b"].value_columns()[1] == "1 → 1.5"
    assert changes["c"].describe() == "shape 4×8→8×4"
    assert changes["d"].describe() == "added"
    removed = compare(new, old)
    assert any(c.what == "d" and c.describe() == "removed" for c in removed)
    assert compare(old, old) == []
    assert isinstance(changes["uses"], Change) and changes["uses"].describe() == "changed"


@pytest.mark.parametrize("text,rule,path", [
    ("fixtures: {a: {model: qwen3, gguf: {}}}\ncases: [{name: x, fixture: b, recipe: exact}]", "case_fixture",
     "$.cases[0].fixture"),
    ("fixtures: {a: {model: qwen3, gguf: {}}}\ncases: [{name: x, fixture: a, recipe: exact, colour: red}]",
     "case_unknown_key", "$.cases[0]"),
    ("fixtures: {a: {model: llama, gguf: {}}}\ncases: [{name: x, fixture: a, recipe: exact}]", "case_model",
     "$.fixtures.a.model"),
    ("fixtures: {a: {model: qwen3, gguf: {}, hf: {}}}\ncases: [{name: x, fixture: a, recipe: exact}]", "case_schema",
     "$.fixtures.a"),
    ("fixtures: {a: {model: qwen3, gguf: {}}}\ncases: [{name: x, fixture: a, recipe: r}, {name: x, fixture: a, "
     "recipe: r}]", "case_duplicate", "$.cases[1].name"),
    ("fixtures: {a: {model: qwen3, gguf: {}}}\ncases: [{name: ../x, fixture: a, recipe: r}]", "case_name",
     "$.cases[0].name"),
    ("fixtures: {a: {model: qwen3, gguf: {}}}\ncases: [{name: x, fixture: a, recipe: r, options: {max_file_bytes: "
     "big}}]", "case_schema", "$.cases[0].options.max_file_bytes"),
])
def test_bad_case_files_are_typed_errors(tmp_path, text, rule, path):
    f = tmp_path / "cases.yaml"
    f.write_text(text)
    with pytest.raises(CaseError) as e:
        load_cases(f)
    assert e.value.rule == rule and e.value.json_path == path and e.value.file == str(f)


def test_unknown_case_name(suite, capsys):
    assert main(["regress", "--cases", str(suite / "cases.yaml"), "nope"]) == 1
    assert "no case named nope" in capsys.readouterr().err
