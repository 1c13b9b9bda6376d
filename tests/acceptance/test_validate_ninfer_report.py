"""The ``.ninfer`` validation.json: capacity arithmetic against hand-computed numbers, the sanitized copy, the CLI,
and the code table against ``docs/validation-codes.md``."""

from __future__ import annotations

import json
import re

import pytest

from converters import ROOT
from converters.acceptance.gates.codes import SPECS, VALIDATE_CODES
from converters.acceptance.validate_ninfer import validate_ninfer
from converters.cli import main
from ninfer_core import open_artifact
from tests.support.gates import CFG35, converted, qwen35_gguf


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    d = tmp_path_factory.mktemp("art")
    return converted(qwen35_gguf(d), d / "model.ninfer", "groupwise-int")


def test_kv_cache_and_state_bytes_follow_the_seed_formula(art):
    r = validate_ninfer(art, context=1000, batch=3)
    m = r.section("memory")
    # tiny Qwen3.5: layers 3 and 7 full attention, 2 KV heads of 32; 6 gated delta net layers with 4 value heads,
    # key/value head dim 32, 2 key heads, conv kernel 4
    assert m["kv_bytes"] == 2 * 2 * 2 * 32 * 1000 * 2 * 3 == 1_536_000
    conv_channels = 2 * 2 * 32 + 4 * 32
    assert m["gdn_state_bytes"] == 6 * (4 * 32 * 32 * 4 + 3 * conv_channels * 2) * 3 == 322_560
    assert m["kv_and_state_bytes"] == 1_536_000 + 322_560
    assert (m["context"], m["batch"]) == (1000, 3)
    assert r.verdict == "pass"


def test_parameter_bytes_add_up_to_the_payload_objects(art):
    r = validate_ninfer(art)
    m = r.section("memory")
    with open_artifact(art) as a:
        assert sum(sum(f.values()) for f in m["parameter_bytes"].values()) == sum(o.bytes for o in a.objects)
        q4 = sum(o.bytes for o in a.objects if o.format == "q4_g64_fp16")
    assert m["parameter_bytes"]["text"]["q4_g64_fp16"] == q4
    assert m["context"] == CFG35["max_position_embeddings"]


def test_context_beyond_the_model_is_a_service_warning(art):
    r = validate_ninfer(art, context=CFG35["max_position_embeddings"] + 1)
    assert r.verdict == "pass_with_warnings"
    assert [f.severity for f in r.by_code("NINFER_CAP_CONTEXT_EXCEEDS")] == ["WARNING_SERVICE"]


def test_sanitized_report_has_no_absolute_path_but_every_finding(art):
    r = validate_ninfer(art)
    full, clean = r.to_json(), r.to_json(sanitized=True)
    assert str(art.parent) in json.dumps(full)
    text = json.dumps(clean)
    assert str(art.parent) not in text and not re.search(r'"/(tmp|home|work)/', text)
    assert [f["code"] for f in clean["findings"]] == [f["code"] for f in full["findings"]]
    assert clean["verdict"] == full["verdict"] and clean["schema"] == "ninfer-artifact-validation/v1"


def test_cli_json_and_output_file(art, tmp_path, capsys):
    out = tmp_path / "validation.json"
    assert main(["validate", str(art), "--json", "--sanitized", "-o", str(out), "--context", "2048"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == printed
    assert printed["memory"]["context"] == 2048 and [g["name"] for g in printed["gates"]] == list("ABCDEF")
    assert main(["validate", str(art), "-o", str(out)]) == 1  # never overwritten
    truncated = tmp_path / "short.ninfer"
    truncated.write_bytes(art.read_bytes()[:-10])
    assert main(["validate", str(truncated)]) == 1
    assert "NINFER_PART_SIZE" in capsys.readouterr().out


def _documented() -> dict[str, tuple[str, str, str, str]]:
    text = (ROOT / "docs" / "validation-codes.md").read_text()
    section = text.split("## `.ninfer` artifacts", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \| ([A-Z_]+) \| ([A-F-]) \| ([1-7-]) \| (.+) \|$", section, flags=re.M)
    assert len(rows) == len({r[0] for r in rows})
    return {c: (s, g, v, m) for c, s, g, v, m in rows}


def test_docs_list_every_code_with_its_severity_and_gates():
    assert _documented() == {c.code: (c.severity, c.validate_gate or "-", "-" if c.verify_gate is None
                                      else str(c.verify_gate), c.summary) for c in SPECS}
    assert {s.code for s in VALIDATE_CODES} == {c.code for c in SPECS if c.validate_gate is not None}
