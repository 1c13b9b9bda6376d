"""A role a mapping introduces with ``stored_like`` (docs/recipes.md §Roles): how recipes resolve it, and the
loader's refusals."""

from __future__ import annotations

import textwrap

import pytest

from converters.errors import MappingError
from converters.mapping import load_mapping, load_mapping_for
from converters.mapping.recipes import load_recipe

MAPPING = textwrap.dedent("""\
    architecture: qwen3
    component: text
    doc: a test mapping
    roles:
      ROLE: {stored_like: LIKE}
    rules:
      plain: {transforms: [], evidence: read somewhere}
    parameters:
      text_globals:
        text/final_norm: {shape: [hidden_size], role: norm, gguf: output_norm.weight, evidence: by name}
        text/thing: {shape: [hidden_size], role: thing, gguf: thing.weight, evidence: by name}
    """)


def _mapping(tmp_path, role="thing", like="norm"):
    p = tmp_path / "m.yaml"
    p.write_text(MAPPING.replace("ROLE", role).replace("LIKE", like))
    return load_mapping(p)


def _recipe(tmp_path, roles: str):
    p = tmp_path / "r.yaml"
    p.write_text(f"name: r\ndescription: test\nroles:\n{textwrap.indent(roles, '  ')}")
    return load_recipe(p, known_roles={"norm", "thing", "attention.query", "bias"})


def test_the_declared_role_is_recorded(tmp_path):
    assert _mapping(tmp_path).stored_like == {"thing": "norm"}
    assert load_mapping_for("qwen2").stored_like == {"bias": "norm"}


@pytest.mark.parametrize("role, like, needle", [
    ("nobody", "norm", "is not the role of any parameter"),
    ("thing", "thing", "cannot be stored like itself"),
])
def test_bad_role_declarations_are_refused_with_file_and_line(tmp_path, role, like, needle):
    with pytest.raises(MappingError, match=needle) as exc:
        _mapping(tmp_path, role, like)
    assert exc.value.file.endswith("m.yaml:5")


@pytest.mark.parametrize("roles, expected", [
    ('"*": {format: q8_g32_fp16}\nnorm: {format: bf16}\n', "bf16"),        # stored like norm, not the default
    ('"*": {format: q8_g32_fp16}\nnorm: {format: bf16}\nbias: {format: fp32}\n', "fp32"),  # named: its own
    ('"*": {format: q8_g32_fp16}\n', "q8_g32_fp16"),                        # norm falls to the default
])
def test_a_recipe_resolves_the_new_role(tmp_path, roles, expected):
    assert _recipe(tmp_path, roles).role("bias", "norm").format == expected


def test_an_exact_or_pattern_entry_beats_stored_like(tmp_path):
    r = _recipe(tmp_path, 'norm: {format: bf16}\nattention.*: {format: q4_g64_fp16}\n')
    assert r.role("attention.query", "norm").format == "q4_g64_fp16"
