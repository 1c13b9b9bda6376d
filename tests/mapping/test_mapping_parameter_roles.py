"""The roles a recipe may name are read from the shipped mappings without validating each whole
(:func:`converters.mapping.loader.parameter_roles`; docs/io-speed.md §Fixed costs): the same set as the
validated mappings give, a file that is not YAML still refused with its line, and a recipe reads mappings
only until its roles are found (:class:`converters.mapping.recipes.KnownRoles`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from converters.errors import MappingError, RecipeError
from converters.mapping import load_mapping, recipes
from converters.mapping.loader import parameter_roles
from converters.mapping.recipes import all_mapping_roles
from converters.mapping.schema import MAPPINGS_DIR
from converters.model.architectures import ARCHITECTURE_MODULES, module

SHIPPED = sorted({file for arch in ARCHITECTURE_MODULES for file in module(arch).MAPPINGS.values()})


@pytest.mark.parametrize("file", SHIPPED)
def test_the_roles_are_those_of_the_validated_mapping(file):
    roles = parameter_roles(MAPPINGS_DIR / file)
    assert roles and roles == {p.role for p in load_mapping(MAPPINGS_DIR / file).parameters()}


def test_the_known_roles_are_every_shipped_mappings():
    expected = set().union(*({p.role for p in load_mapping(MAPPINGS_DIR / f).parameters()} for f in SHIPPED))
    assert all_mapping_roles() == expected and {"norm", "mlp.gate", "embedding"} <= expected


def test_only_the_roles_of_parameters_are_read(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("architecture: qwen3\nroles: {bias: {stored_like: norm}}\nparameters:\n"
                 "  g:\n    a: {shape: [1], role: norm}\n    b: {role: [not, a, string]}\n    c: 3\n"
                 "  h: [role]\n  k:\n    d: {role: mlp.up}\n")
    assert parameter_roles(p) == {"norm", "mlp.up"}


@pytest.mark.parametrize("text", ["parameters: [\n", "parameters:\n  g: {a: 1}\n  g: {b: 2}\n"])
def test_a_file_that_is_not_a_mapping_document_is_refused_with_its_line(tmp_path, text):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    with pytest.raises(MappingError) as exc:
        parameter_roles(p)
    assert exc.value.rule == "yaml" and "m.yaml:" in str(exc.value)


@pytest.fixture
def roles_read(monkeypatch):
    """The mapping files whose roles a recipe load reads (the recipe cache emptied around the test)."""
    import converters.mapping.loader as loader

    read: list[str] = []
    real = loader.parameter_roles
    monkeypatch.setattr(loader, "parameter_roles", lambda p: read.append(Path(p).name) or real(p))
    recipes._load.cache_clear()
    yield read
    recipes._load.cache_clear()


def test_a_recipe_reads_mappings_only_until_its_roles_are_found(roles_read):
    recipes.load_recipe("exact")  # "*" and attention.context_key / context_value (a drafter's roles)
    assert 0 < len(roles_read) < len(SHIPPED)
    roles_read.clear()
    recipes.load_recipe("groupwise-int")
    assert len(roles_read) <= len(SHIPPED)


@pytest.mark.parametrize("roles, rule", [("  attention.qeury: {format: bf16}\n", "unknown_role"),
                                         ("  moe.*: {format: bf16}\n  nothing.*: {format: bf16}\n", "unknown_role"),
                                         ("  norm: {same_as: no.such_role}\n", "same_as")])
def test_a_role_no_mapping_names_reads_every_mapping_and_is_refused(tmp_path, roles_read, roles, rule):
    p = tmp_path / "r.yaml"
    p.write_text(f"name: r\ndescription: test\nroles:\n{roles}")
    with pytest.raises(RecipeError) as exc:
        recipes.load_recipe(p)
    assert exc.value.rule == rule and "r.yaml:" in str(exc.value)
    assert sorted(set(roles_read)) == SHIPPED
