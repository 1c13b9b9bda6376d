"""docs/thresholds.md states the thresholds the code judges by: its tables are parsed and compared with
``converters.acceptance.gates.tolerance``, ``converters.acceptance.gates.numerics`` and the named constants."""

from __future__ import annotations

import importlib
import math
import re

from converters import ROOT
from converters.acceptance.gates import numerics, tolerance

PAGE = ROOT / "docs" / "thresholds.md"


def section_rows(title: str) -> list[list[str]]:
    """The table rows (cells, header and rule excluded) of the section ``## §<title>``."""
    text = PAGE.read_text(encoding="utf-8")
    body = text.split(f"## §{title}", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in body.splitlines()
            if line.startswith("| ")]
    return [r for r in rows[1:] if not set(r[0]) <= {"-", " "}]


def test_format_tolerances_equal_the_code():
    rows = section_rows("Tolerance")
    documented = {r[0].strip("`"): r for r in rows}
    assert set(documented) == set(tolerance.FORMATS) | {"(any other)"}
    for fmt, (_, cosine, max_rel, row_rel, _why) in documented.items():
        t = tolerance.DEFAULT if fmt == "(any other)" else tolerance.for_format(fmt)
        assert math.isclose(float(cosine), t.cosine, rel_tol=0, abs_tol=1e-12), fmt
        assert math.isclose(float(max_rel), t.max_rel, rel_tol=0, abs_tol=1e-12), fmt
        assert math.isclose(float(row_rel), t.row_rel, rel_tol=0, abs_tol=1e-12), fmt


def test_golden_classes_equal_the_code():
    (structure, *rows) = [r for r in section_rows("Golden") if r[0] != "class"]  # two tables: structure, cost
    assert structure[0] == "structure"
    assert float(structure[1]) == numerics.STRUCTURE.cosine and float(structure[2]) == numerics.STRUCTURE.top1
    assert [r[0] for r in rows] == list(numerics.ORDER)
    for name, cosine, top1, _why in rows:
        assert math.isclose(float(cosine), numerics.CLASSES[name].cosine, rel_tol=0, abs_tol=1e-12), name
        assert float(top1) == numerics.CLASSES[name].top1, name


def test_golden_recipe_budgets_equal_the_recipes():
    from converters.mapping.recipes import list_recipes, load_recipe

    text = PAGE.read_text(encoding="utf-8").split("The shipped recipes' budgets:", 1)[1].split("\n\n", 1)[0]
    text = " ".join(text.split())
    for name in list_recipes():
        budget = load_recipe(name).golden_budget
        if budget is None:
            assert f"`{name}`" in text.split("state none")[0].rsplit(";", 1)[-1], name
        else:
            assert re.search(rf"`{re.escape(name)}`[^;]*? {budget[0]:.9g} / {budget[1]:g}", text), name


def test_golden_format_classes_equal_the_code():
    text = PAGE.read_text(encoding="utf-8").split("Format → class:", 1)[1].split("; everything else", 1)[0]
    documented = {}
    for formats, cls in re.findall(r"((?:`\w+`(?:,\s*)?)+) → ([\w-]+)", text):
        for fmt in re.findall(r"`(\w+)`", formats):
            documented[fmt] = cls
    assert documented == numerics.FORMAT_CLASS


def test_named_limits_equal_the_code():
    rows = section_rows("Limits")
    assert len(rows) >= 8
    for name, value, _why in rows:
        module, attr = name.strip("`").rsplit(".", 1)
        assert getattr(importlib.import_module(module), attr) == float(value), name
