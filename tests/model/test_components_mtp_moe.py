"""The Qwen3.5-MoE MTP head (``mappings/qwen35_moe_mtp.yaml``): its decoder layer carries the sparse MoE
block, so its experts live in banks of its own (``mtp/layers/{l}/moe/experts/{gate,up,down}``, container
§7.2), never in a text parent (§5.3). ``convert gguf2ninfer`` / ``st2ninfer --components text,mtp`` of the
generator's checkpoint — GGUF ``blk.{L}`` (``nextn.*`` plus ``ffn_*_exps``, separate or fused gate/up) and
HF ``mtp.layers.0.mlp.experts`` per expert and fused — decode per expert to the generator's float reference
(:func:`tinymodels.qwen35_moe.logical_parameters`); embedding and head are bound to the text objects."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.cli import main
from converters.model.engine import logical_array
from ninfer_core import open_artifact, validate
from tests.support.components import check_separation, cosine
from tinymodels import qwen35_moe

CFG = qwen35_moe.config(mtp_num_hidden_layers=1)
REF = qwen35_moe.logical_parameters(CFG)
MTP = {k: v for k, v in REF.items() if k.startswith("mtp/")}
SHARED = {"mtp/token_embedding": "text/token_embedding", "mtp/output_head": "text/output_head"}
E, PROJS = CFG["num_experts"], ("gate", "up", "down")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("mtp-moe")
    qwen35_moe.write_gguf(d / "f32.gguf", CFG, matrix_type="F32")
    qwen35_moe.write_gguf(d / "fused.gguf", CFG, matrix_type="F32", fused_gate_up=True)
    qwen35_moe.write_gguf(d / "q8.gguf", CFG, matrix_type="Q8_0")
    qwen35_moe.write_hf_dir(d / "hf-per", CFG, expert_layout="per_expert")
    qwen35_moe.write_hf_dir(d / "hf-fused", CFG, expert_layout="fused", shards=1)
    return d


def to_ninfer(source, out, recipe: str) -> None:
    command = "st2ninfer" if source.is_dir() else "gguf2ninfer"
    assert main([command, str(source), str(out), "--recipe", recipe, "--components", "text,mtp", "--workers", "1"]) == 0


def expert_problems(art, proj: str) -> list[int]:
    """Experts of the MTP layer whose decoded matrix is not closest to the reference of its own index."""
    want = [MTP[f"mtp/layers/0/moe/experts/{e}/{proj}"] for e in range(E)]
    bad = []
    for e in range(E):
        got = logical_array(art, f"mtp/layers/0/moe/experts/{e}/{proj}", want[e].shape)
        errors = [float(np.linalg.norm(got - w) / np.linalg.norm(w)) for w in want]
        bad += [e] if int(np.argmin(errors)) != e else []
    return bad


@pytest.mark.parametrize("source, recipe, floor", [
    ("f32.gguf", "exact", 1.0),     # norms un-shifted in float64 (fp32): the reference after rounding
    ("fused.gguf", "exact", 1.0),   # ffn_gate_up_exps split per expert
    ("hf-per", "bf16", 1.0),        # bf16 copied bit for bit, mtp.layers.0.mlp.experts.{e}.*
    ("hf-fused", "bf16", 1.0),      # transformers 5 gate_up_proj / down_proj picked per expert
    ("q8.gguf", "groupwise-int", 0.99),
])
def test_mtp_experts_match_the_generator(sources, tmp_path, source, recipe, floor):
    out = tmp_path / "m.ninfer"
    to_ninfer(sources / source, out, recipe)
    assert validate(out) == []
    with open_artifact(out) as a:
        assert a.components["mtp"].to_json() == {"config": {"architectures": ["Qwen3_5MoeMTP"]}, "target": "text"}
        assert {n for n in a.bindings if n.startswith("mtp/")} == set(MTP) | set(SHARED)
        for name, want in MTP.items():
            got = logical_array(a, name, want.shape)
            if floor == 1.0:
                np.testing.assert_allclose(got, want, rtol=0, atol=np.abs(want).max() * 2.0 ** -8, err_msg=name)
            else:
                assert cosine(got, want) >= floor, name
        for proj in PROJS:
            assert expert_problems(a, proj) == [], proj
        check_separation(a, SHARED)
        ids = [o.id for o in a.objects]
        assert len(ids) == len(set(ids))
        assert [o.id for o in a.objects if o.id.endswith(("/token_embedding", "/output_head"))] == [
            "text/token_embedding", "text/output_head"]


def test_mtp_banks_are_their_own_parents_with_one_row_range_per_expert(sources, tmp_path):
    out = tmp_path / "b.ninfer"
    to_ninfer(sources / "hf-per", out, "bf16")
    with open_artifact(out) as a:
        objects = {o.id: o for o in a.objects}
        for proj in PROJS:
            bank = objects[f"mtp/layers/0/moe/experts/{proj}"]
            rows, k = MTP[f"mtp/layers/0/moe/experts/0/{proj}"].shape
            assert tuple(bank.shape) == (E * rows, k)
            for e in range(E):
                (part,) = a.bindings[f"mtp/layers/0/moe/experts/{e}/{proj}"].parts
                assert part.object == bank.id
                assert tuple(part.range) == (e * rows * k, (e + 1) * rows * k)
            # the text layers' banks are distinct objects: nothing of the head is stacked into text
            assert f"text/layers/0/moe/experts/{proj}" in objects
        text_refs = {r for n, b in a.bindings.items() if n.startswith("text/") for r in b.object_ids}
        assert text_refs and not {r for r in text_refs if not r.startswith("text/")}
        uses = {(u.parameter, u.input) for u in a.uses}
        assert ("mtp/layers/0/moe/experts/3/down", "mtp/layers/0/moe/experts/3/product") in uses
        assert ("mtp/layers/0/moe/router", "mtp/layers/0/mlp_input") in uses
        assert ("mtp/output_head", "mtp/final_hidden") in uses


def test_verify_sweep_covers_the_mtp_experts(sources, tmp_path):
    out = tmp_path / "v.ninfer"
    to_ninfer(sources / "q8.gguf", out, "groupwise-int")
    r = verify(out, sources / "q8.gguf", sweep=True)
    assert [g.status for g in r.gates] == ["pass"] * 7
    assert r.gate(4).evidence["components"]["mtp"] == {"layers": [0], "parameters": len(MTP) + len(SHARED)}


def test_source_less_coverage_picks_the_moe_mtp_mapping(sources, tmp_path):
    """The component record names `Qwen3_5MoeMTP`, so coverage without a source reads the MoE MTP mapping
    (not the dense `qwen35_mtp` one, which would ask for `intermediate_size`), and lists what bind lists."""
    from converters.acceptance.gates.contract import expected_from_bound
    from converters.acceptance.gates.required import component_architecture, required_parameters
    from converters.acceptance.validate_ninfer import validate_ninfer
    from converters.model.engine import open_model

    out = tmp_path / "q8.ninfer"
    to_ninfer(sources / "q8.gguf", out, "groupwise-int")
    r = verify(out)
    assert r.gate(2).status == "pass" and r.codes(2) == set(), r.gate(2).issues
    v = validate_ninfer(out)
    assert not v.by_code("NINFER_COVERAGE_UNCHECKED") and not v.by_code("NINFER_CONFIG_INVALID")
    with open_model(sources / "q8.gguf", components=("text", "mtp")) as model:
        bound = {n: e for n, e in expected_from_bound(model.bound).items() if e.component == "mtp"}
    with open_artifact(out) as a:
        config = a.components["mtp"].config
        assert component_architecture("mtp", config).NAME == "qwen35_moe_mtp"
        got = required_parameters("mtp", config, a.components["text"].config)
    assert list(got) == list(bound) and got == bound
