"""The regression case list (``recipes/regression.yaml``): fixtures and cases, strictly validated.

Format::

    fixtures:                     # deterministic tinymodels sources, generated per run
      qwen35-q8: {model: qwen35, gguf: {matrix_type: Q8_0}}
      qwen3moe-hf: {model: qwen35moe, config: {moe_intermediate_size: 128}, hf: {dtype: bf16}}
    cases:
      - {name: qwen35-q8-exact, fixture: qwen35-q8, recipe: exact}
      - {name: qwen3-q8-split, fixture: qwen3-q8, recipe: exact, options: {max_file_bytes: 400000}}

A fixture names a :mod:`tinymodels` model (:func:`tinymodels.models`), optional ``config`` overrides and ``seed``,
and exactly one of ``gguf`` (keyword arguments of ``write_gguf``) or ``hf`` (of ``write_hf_dir``). A case
names a fixture, a recipe (shipped name or path relative to the case file) and ``options`` of
:func:`converters.pipeline.convert.convert` (:data:`OPTIONS`). Unknown keys, missing fields, unknown fixtures or
models, duplicate names and names that are not file names are errors naming the file and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import tinymodels
from converters.errors import ConverterError
from converters.mapping.recipes import RECIPES_DIR, REGRESSION_CASES

CASES_FILE = REGRESSION_CASES
EXPECTED_DIR = RECIPES_DIR / "regression" / "expected"
OPTIONS = {"max_file_bytes": int, "components": list}
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")


class CaseError(ConverterError):
    """A malformed regression case file."""


@dataclass(frozen=True)
class Fixture:
    name: str
    model: str
    kind: str  # "gguf" or "hf"
    writer_args: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    seed: int = 0

    def to_json(self) -> dict:
        return {"model": self.model, "config": self.config, "seed": self.seed, self.kind: self.writer_args}


@dataclass(frozen=True)
class Case:
    name: str
    fixture: Fixture
    recipe: str
    options: dict = field(default_factory=dict)

    def expected_path(self, expected_dir: Path = EXPECTED_DIR) -> Path:
        return Path(expected_dir) / f"{self.name}.json"


def _mapping(value, where: str, file: str, required: set[str], allowed: set[str]) -> dict:
    if not isinstance(value, dict):
        raise CaseError(f"{where} must be a mapping", file=file, json_path=where, rule="case_schema")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise CaseError(f"{where}: unknown key(s) {', '.join(unknown)}", file=file, json_path=where,
                        rule="case_unknown_key")
    missing = sorted(required - set(value))
    if missing:
        raise CaseError(f"{where}: missing {', '.join(missing)}", file=file, json_path=where, rule="case_missing")
    return value


def _name(value, where: str, file: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise CaseError(f"{where}: {value!r} is not a name (lowercase letters, digits, . _ -)", file=file,
                        json_path=where, rule="case_name")
    return value


def _fixture(name: str, value, file: str) -> Fixture:
    where = f"$.fixtures.{name}"
    v = _mapping(value, where, file, {"model"}, {"model", "config", "seed", "gguf", "hf"})
    known = tinymodels.models()
    if v["model"] not in known:
        raise CaseError(f"{where}.model: {v['model']!r} is not one of {', '.join(known)}", file=file,
                        json_path=f"{where}.model", rule="case_model")
    kinds = [k for k in ("gguf", "hf") if k in v]
    if len(kinds) != 1:
        raise CaseError(f"{where}: give exactly one of gguf or hf", file=file, json_path=where, rule="case_schema")
    args, config, seed = v[kinds[0]] or {}, v.get("config") or {}, v.get("seed", 0)
    if not isinstance(args, dict) or not isinstance(config, dict) or isinstance(seed, bool) or not isinstance(seed, int):
        raise CaseError(f"{where}: {kinds[0]} and config must be mappings, seed an integer", file=file,
                        json_path=where, rule="case_schema")
    return Fixture(name, v["model"], kinds[0], dict(args), dict(config), seed)


def load_cases(path: str | Path = CASES_FILE) -> list[Case]:
    """The cases of ``path`` in file order (see the module docstring)."""
    path = Path(path)
    file = str(path)
    try:
        root = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CaseError(f"cannot read the case file: {exc.strerror}", file=file, rule="case_read") from None
    except yaml.YAMLError as exc:
        raise CaseError(f"not valid YAML: {exc}", file=file, rule="case_schema") from None
    root = _mapping(root, "$", file, {"fixtures", "cases"}, {"fixtures", "cases"})
    if not isinstance(root["fixtures"], dict) or not root["fixtures"]:
        raise CaseError("$.fixtures must be a non-empty mapping", file=file, json_path="$.fixtures", rule="case_schema")
    fixtures = {k: _fixture(_name(k, f"$.fixtures.{k}", file), v, file) for k, v in root["fixtures"].items()}
    if not isinstance(root["cases"], list) or not root["cases"]:
        raise CaseError("$.cases must be a non-empty list", file=file, json_path="$.cases", rule="case_schema")
    cases, seen = [], set()
    for i, c in enumerate(root["cases"]):
        where = f"$.cases[{i}]"
        c = _mapping(c, where, file, {"name", "fixture", "recipe"}, {"name", "fixture", "recipe", "options"})
        name = _name(c["name"], f"{where}.name", file)
        if name in seen:
            raise CaseError(f"{where}: case {name!r} listed twice", file=file, json_path=f"{where}.name",
                            rule="case_duplicate")
        seen.add(name)
        if c["fixture"] not in fixtures:
            raise CaseError(f"{where}: no fixture named {c['fixture']!r}", file=file, json_path=f"{where}.fixture",
                            rule="case_fixture")
        options = _mapping(c.get("options") or {}, f"{where}.options", file, set(), set(OPTIONS))
        for k, v in options.items():
            if not isinstance(v, OPTIONS[k]) or isinstance(v, bool):
                raise CaseError(f"{where}.options.{k}: expected {OPTIONS[k].__name__}", file=file,
                                json_path=f"{where}.options.{k}", rule="case_schema")
        recipe = str(c["recipe"])
        if "/" in recipe or recipe.endswith((".yaml", ".yml")):
            recipe = str((path.parent / recipe).resolve())
        cases.append(Case(name, fixtures[c["fixture"]], recipe, dict(options)))
    return cases
