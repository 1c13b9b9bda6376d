"""Recipes: the shipped ones load and resolve as documented; bad files are refused with file:line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from converters.errors import RecipeError
from converters.mapping.recipes import list_recipes, load_recipe


def test_every_listed_recipe_loads_and_the_regression_case_list_is_not_one():
    names = list_recipes()
    assert "regression" not in names
    for name in names:
        assert load_recipe(name).name == name
    with pytest.raises(RecipeError) as err:
        load_recipe("regression")
    assert "shipped: " in str(err.value) and "regression," not in str(err.value)


def test_shipped_recipes():
    assert set(list_recipes()) >= {"bf16", "exact", "fp8-row", "groupwise-int", "nvfp4"}
    g = load_recipe("groupwise-int")
    assert len(g.sha256) == 64 and g.name == "groupwise-int"
    assert g.role("mlp.gate").format == "q4_g64_fp16"          # pattern mlp.*
    assert g.role("attention.value").format == "q5_g64_fp16"   # exact role beats attention.*
    assert g.role("embedding").format == "q8_g32_fp16"
    assert [x.key for x in g.groups][:2] == ["attention/query_key", "attention/gate_value"]
    assert load_recipe("exact").role("gdn.a_log").format == "exact"  # the "*" default
    assert load_recipe("nvfp4").role("gdn.a").fallback == "bf16"
    with pytest.raises(RecipeError, match="has no entry for role 'speech.patch'"):
        g.role("speech.patch")  # vision.* roles resolve since the vision component
    with pytest.raises(RecipeError, match="no recipe named 'int3'"):
        load_recipe("int3")


BASE = """\
name: t
description: a test recipe
roles:
  mlp.*: {format: q4_g64_fp16}
groups:
  mlp/gate_up: {members: [mlp.gate, mlp.up], format: q4_g64_fp16}
"""


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("name: t", "name: T!", 1, "must be lower-case"),
    ("description: a test recipe\n", "description: a test recipe\nflavour: 1\n", 3, "unknown key 'flavour'"),
    ("{format: q4_g64_fp16}\ngroups", "{format: q3_g64_fp16}\ngroups", 4, "unknown format 'q3_g64_fp16'"),
    ("mlp.*:", "mlpx.*:", 4, "matches no role"),
    ("{format: q4_g64_fp16}\ngroups", "{format: exact, fallback: bf16}\ngroups", 4, "'exact' has no fallback"),
    ("{format: q4_g64_fp16}\ngroups", "{format: q4_g64_fp16, hadamard: true}\ngroups", 1, "hadamard_seed is required"),
    ("{format: q4_g64_fp16}\ngroups", "{format: q4_g64_fp16, activation_policy: A4Only}\ngroups", 4,
     "activation_policy 'A4Only' is not one of"),
    ("[mlp.gate, mlp.up], format: q4_g64_fp16}", "[mlp.gate, mlp.up], format: q4_g64_fp16, divisors: per_member}",
     6, "only meaningful for nvfp4"),
    ("[mlp.gate, mlp.up]", "[mlp.gate, mlp.sideways]", 6, "member 'mlp.sideways' is not a role"),
    ("[mlp.gate, mlp.up]", "[mlp.gate, [mlp.up]]", 6, "non-empty list of distinct roles"),  # found by the fuzz
    ("{format: q4_g64_fp16}\ngroups", "{format: q4_g64_fp16, encoder: best}\ngroups", 4, "encoder 'best'"),
])
def test_bad_recipes_name_file_and_line(tmp_path, old, new, line, message):
    assert old in BASE
    p = tmp_path / "r.yaml"
    p.write_text(BASE.replace(old, new, 1))
    with pytest.raises(RecipeError) as ei:
        load_recipe(p)
    assert f"r.yaml:{line}" in str(ei.value), str(ei.value)
    assert message in str(ei.value)


def test_recipe_by_path_and_precedence(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text("name: mine\ndescription: d\nroles:\n  '*': {format: bf16}\n  gdn.*: {format: q8_g32_fp16}\n"
                 "  gdn.a: {format: fp32, activation_input_divisor: 2.5}\n")
    r = load_recipe(p)
    assert r.role("norm").format == "bf16" and r.role("gdn.z").format == "q8_g32_fp16"
    assert r.role("gdn.a").format == "fp32" and r.role("gdn.a").activation_input_divisor == 2.5
    assert r.to_json()["sha256"] == r.sha256


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "loop", "long"])
def test_recipe_path_that_is_no_regular_file_is_typed(tmp_path, special):
    """A FIFO (would block), /dev/zero (would stream without end), a symlink loop and a name over 255 bytes
    are each one typed error naming the path, before anything is read (docs/robustness.md §Promises)."""
    from converters.errors import ConverterError

    path = {"fifo": tmp_path / "r.yaml", "/dev/zero": Path("/dev/zero"), "loop": tmp_path / "loop.yaml",
            "long": tmp_path / ("r" * 300 + ".yaml")}[special]
    if special == "fifo":
        os.mkfifo(path)
    if special == "loop":
        os.symlink(tmp_path / "loop2.yaml", path)
        os.symlink(path, tmp_path / "loop2.yaml")
    with pytest.raises(ConverterError, match="not a regular file|symbolic links|too long"):
        load_recipe(path)
