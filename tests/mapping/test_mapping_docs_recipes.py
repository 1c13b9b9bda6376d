"""The worked recipe of docs/recipes.md loads with ``load_recipe`` and converts the tiny Qwen3 GGUF into the
objects, formats and activation policies the page describes; the page's key tables name exactly the keys
the recipe validator accepts."""

from __future__ import annotations

import re
from pathlib import Path

from converters import ROOT
from converters.mapping.recipes import _Validator, load_recipe
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tinymodels import qwen3

PAGE = ROOT / "docs" / "recipes.md"


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def worked_recipe(tmp_path: Path) -> Path:
    block = page().split("## §Worked example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "custom.yaml"
    path.write_text(block, encoding="utf-8")
    return path


def table_keys(section: str) -> set[str]:
    body = page().split(f"## §{section}", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", body, flags=re.M))


def test_key_tables_equal_the_validator():
    assert table_keys("Top level") == set(_Validator.TOP)
    assert table_keys("Roles") | {"same_as"} == set(_Validator.ROLE)
    assert table_keys("Groups") == set(_Validator.GROUP)


def convert_tiny(tmp_path: Path, **overrides) -> dict:
    recipe = worked_recipe(tmp_path)
    gguf = qwen3.write_gguf(tmp_path / "tiny.gguf", layers=2, **overrides)
    out = tmp_path / "tiny.ninfer"
    convert(gguf, out, recipe=recipe)
    with open_artifact(out) as art:
        return {"formats": {o.id: (o.format, o.divisors) for o in art.objects if o.kind == "tensor"},
                "policies": {u.parameter: u.activation_policy for u in art.uses},
                "recipe": art.provenance["recipe"]["name"]}


def test_worked_recipe_loads(tmp_path):
    r = load_recipe(worked_recipe(tmp_path))
    assert r.name == "q8-attention-nvfp4-mlp"
    assert r.role("attention.query").activation_policy == "AllowA8"
    assert r.role("gdn.a_log").format == "bf16"  # the "*" default
    assert [g.key for g in r.groups] == ["attention/query_key", "mlp/gate_up"]


def test_worked_recipe_converts_as_described(tmp_path):
    got = convert_tiny(tmp_path)
    f = got["formats"]
    assert got["recipe"] == "q8-attention-nvfp4-mlp"
    assert f["text/token_embedding"] == ("fp32", 1)
    assert f["text/layers/0/attention/query_key"] == ("q8_g32_fp16", 1)
    assert f["text/layers/0/attention/value"] == ("q8_g32_fp16", 1)
    assert f["text/layers/0/mlp/gate_up"] == ("nvfp4", 2)
    assert f["text/layers/0/mlp/down"] == ("nvfp4", 1)
    assert f["text/layers/0/input_norm"] == ("bf16", 1)
    assert got["policies"]["text/layers/0/attention/query"] == "AllowA8"
    assert got["policies"]["text/layers/0/mlp/down"] == "A16Only"


def test_worked_recipe_falls_back_where_nvfp4_cannot_go(tmp_path):
    f = convert_tiny(tmp_path, intermediate=160)["formats"]
    assert f["text/layers/0/mlp/gate_up"] == ("q4_g64_fp16", 1)
    assert f["text/layers/0/mlp/down"] == ("q4_g64_fp16", 1)
