"""The rules files in mappings/config: the shipped ones load and cite gguf-py's arch names; malformed ones
are rejected with ``file:line`` before any source is read."""

from __future__ import annotations

import textwrap

import gguf
import pytest

from converters.errors import MappingError
from converters.model import architectures
from converters.model.config_normalize import DERIVATIONS, rules
from converters.model.config_rules import MISSING, RULES_DIR

GOOD = """\
schema: ninfer-config-map/1
component: text
architecture: tiny
evidence: test
gguf: {arch: tiny}
hf: {architectures: [TinyForCausalLM], model_types: [tiny]}
output: {architectures: [TinyForCausalLM], model_type: tiny}
fields:
  hidden_size:
    type: int
    evidence: test
    gguf: {key: "{arch}.embedding_length"}
    hf: {key: hidden_size}
"""


def test_shipped_rules_load_and_name_real_gguf_architectures():
    loaded = rules()
    text = {r.gguf_arch for r in loaded.values() if r.component == "text"}
    # one rules file per GGUF architecture a registered text architecture reads (no list of them here)
    assert text == {a for m in architectures.text_modules() for a in m.GGUF_ARCHITECTURES}
    assert {"qwen2", "qwen3", "qwen35", "qwen3next", "qwen3moe", "qwen35moe"} <= text
    assert text <= set(gguf.MODEL_ARCH_NAMES.values())
    assert {r.gguf_arch for r in loaded.values() if r.component == "vision"} == {gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ]}
    for arch in loaded.values():
        for field in arch.fields:
            assert field.evidence.strip(), (arch.architecture, field.name)
            for rule in (field.gguf, field.hf):
                assert rule.default is MISSING or rule.default_evidence, (arch.architecture, field.name)


def _load(tmp_path, text: str, extra: dict | None = None):
    (tmp_path / "tiny.yaml").write_text(text)
    for name, body in (extra or {}).items():
        (tmp_path / name).write_text(body)
    return rules(tmp_path)


def test_good_file_loads(tmp_path):
    assert [f.name for f in _load(tmp_path, GOOD)["tiny"].fields] == ["hidden_size"]


@pytest.mark.parametrize("edit, rule, line", [
    (lambda t: t.replace("    evidence: test\n", "    evidence: test\n    colour: red\n"), "unknown_key", 12),
    (lambda t: t.replace("{key: hidden_size}", "{derive: guess}"), "unknown_derivation", 13),
    (lambda t: t.replace("{key: hidden_size}", "{derive: ratio, args: {numerator: 1}}"), "missing_key", 13),
    (lambda t: t.replace("{key: hidden_size}", "{key: hidden_size, default: 4}"), "default_evidence", 13),
    (lambda t: t.replace("{key: hidden_size}", "{const: four}"), "value_type", 13),
    (lambda t: t.replace("type: int", "type: integer"), "field_type", 10),
    (lambda t: t.replace("schema: ninfer-config-map/1", "schema: ninfer-config-map/2"), "schema_version", 1),
    (lambda t: t + "  hidden_size:\n    type: int\n", "yaml_syntax", 14),
])
def test_malformed_rules_are_rejected_with_file_and_line(tmp_path, edit, rule, line):
    with pytest.raises(MappingError) as info:
        _load(tmp_path, edit(GOOD))
    assert info.value.rule == rule
    assert info.value.file == f"{tmp_path / 'tiny.yaml'}:{line}"


def test_extends_and_remove_fields(tmp_path):
    child = textwrap.dedent("""\
        schema: ninfer-config-map/1
        component: text
        architecture: child
        extends: tiny.yaml
        remove_fields: [hidden_size]
        evidence: test
        gguf: {arch: child}
        hf: {architectures: [ChildForCausalLM], model_types: [child]}
        output: {architectures: [ChildForCausalLM], model_type: child}
        fields:
          vocab_size:
            type: int
            evidence: test
            gguf: {key: "{arch}.vocab_size"}
            hf: {key: vocab_size}
        """)
    loaded = _load(tmp_path, GOOD, {"child.yaml": child})
    assert [f.name for f in loaded["child"].fields] == ["vocab_size"]
    with pytest.raises(MappingError) as info:
        _load(tmp_path, GOOD, {"child.yaml": child.replace("[hidden_size]", "[head_dim]")})
    assert info.value.rule == "unknown_field" and info.value.file.endswith("child.yaml:5")


def test_every_derivation_is_used_by_a_shipped_rule():
    used = set()
    for arch in rules(RULES_DIR).values():
        for field in arch.fields:
            for rule in (field.gguf, field.hf, field.gguf.fallback, field.hf.fallback):
                if rule is not None and rule.derive:
                    used.add(rule.derive)
    assert used == set(DERIVATIONS)
