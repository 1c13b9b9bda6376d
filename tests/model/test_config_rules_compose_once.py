"""Loading the config rules composes and validates each file of the directory once, however many files
extend it (a fixed cost of every conversion: docs/io-speed.md §Fixed costs); the result is the same as
each file validated on its own."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from converters.errors import MappingError
from converters.model import config_rules
from converters.model.config_normalize import DERIVATIONS
from converters.model.config_rules import RULES_DIR, load_rules

DERIVED = {name: req for name, (_, req) in DERIVATIONS.items()}
BASE = """\
schema: ninfer-config-map/1
component: text
architecture: ARCH
evidence: test
gguf: {arch: ARCH}
hf: {architectures: [ARCHForCausalLM], model_types: [ARCH]}
output: {architectures: [ARCHForCausalLM], model_type: ARCH}
"""
FIELDS = "fields:\n  hidden_size:\n    type: int\n    evidence: test\n    gguf: {const: 8}\n    hf: {key: hidden_size}\n"


@pytest.fixture
def composed(monkeypatch):
    calls: Counter = Counter()
    real = config_rules.load_located
    monkeypatch.setattr(config_rules, "load_located", lambda p: calls.update([Path(p).name]) or real(p))
    config_rules._load_all.cache_clear()
    yield calls
    config_rules._load_all.cache_clear()


def test_each_shipped_rules_file_is_composed_once(composed):
    shipped = load_rules(RULES_DIR, DERIVED)
    extended = [p for p in RULES_DIR.glob("*.yaml") if "\nextends:" in p.read_text()]
    assert len(extended) >= 3 and set(composed) == {p.name for p in RULES_DIR.glob("*.yaml")}
    assert set(composed.values()) == {1}
    for arch, rules in shipped.items():  # the same rules as each file validated apart (its bases again)
        alone = config_rules._load_file(Path(rules.file), dict(DERIVED), (), {}, {})
        assert alone == rules, arch


def test_a_base_extended_twice_gives_both_its_fields(tmp_path, composed):
    (tmp_path / "a.yaml").write_text(BASE.replace("ARCH", "a") + FIELDS)
    for name in ("b", "c"):
        (tmp_path / f"{name}.yaml").write_text(BASE.replace("ARCH", name) + "extends: a.yaml\n")
    got = load_rules(tmp_path, DERIVED)
    assert [f.name for f in got["b"].fields] == [f.name for f in got["c"].fields] == ["hidden_size"]
    assert composed == {"a.yaml": 1, "b.yaml": 1, "c.yaml": 1}


def test_an_extends_cycle_is_still_refused(tmp_path, composed):
    (tmp_path / "a.yaml").write_text(BASE.replace("ARCH", "a") + "extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text(BASE.replace("ARCH", "b") + "extends: a.yaml\n")
    with pytest.raises(MappingError) as exc:
        load_rules(tmp_path, DERIVED)
    assert exc.value.rule == "extends_cycle"
