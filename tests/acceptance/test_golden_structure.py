"""Gate 7 as two questions (docs/acceptance.md §Golden: two questions).

*Structure*: the source's forward, under the source's config and storage conventions, on the artifact's
values read back through the mapping's inverse transforms, against the artifact's forward — the same
function to float rounding, whatever the format. A convention error — a mapping that forgets the norm shift,
leaves the value heads tiled or takes ``ssm_a`` for ``A_log``, or an artifact config with another rotary —
fails it at every precision, 4-bit included, while gates 4 and 5 (which compare through the same mapping)
pass. *Cost*: source against artifact, per layer and in the summary, judged against the recipe's budget.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from converters.acceptance.gates.verify import verify
from converters.mapping import loader
from converters.mapping.schema import MAPPINGS_DIR
from converters.pipeline.convert import convert
from tests.support.gates import converted, rewrite, write_sources
from tinymodels import qwen3_vl_moe, qwen35, vision


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return write_sources(tmp_path_factory.mktemp("sources"))


def doctored(tmp_path, monkeypatch, edit, file: str = "qwen35.yaml") -> None:
    """Every later conversion and verify in this test reads mapping ``file`` with ``edit`` applied."""
    d = tmp_path / "mappings"
    shutil.copytree(MAPPINGS_DIR, d)
    text = (d / file).read_text()
    changed = edit(text)
    assert changed != text
    (d / file).write_text(changed)
    monkeypatch.setattr(loader, "MAPPINGS_DIR", d)


def statuses(r) -> list[str]:
    return [g.status for g in r.gates]


NO_NORM_SHIFT = ("input norm left shifted", "text/layers/", "input_norm", lambda t: t.replace(
    'gguf: {tensor: "blk.{l}.attn_norm.weight", transforms: [unshift_norm]}', 'gguf: {tensor: "blk.{l}.attn_norm.weight"}'))
V_HEADS_TILED = ("value heads left tiled", "text/layers/", "gdn/", lambda t: re.sub(
    r"transforms:(?=\n *[a-z_]+:)", "transforms: []", re.sub(r"\n *- v_head(s|_columns)_tiled_to_grouped: \{[^}]*\}", "", t)))
QUERY_GATE_SWAPPED = ("query and gate taken for each other", "text/layers/", "attention/", lambda t: t.replace(
    "offset: 0, count: head_dim", "offset: GATE").replace("offset: head_dim, count: head_dim", "offset: 0, count: head_dim")
    .replace("offset: GATE", "offset: head_dim, count: head_dim"))
GDN_QK_SWAPPED = ("gated delta net query and key taken for each other", "text/layers/", "gdn/", lambda t: t.replace(
    "row_slice: {start: 0, stop: key_dim}", "row_slice: {start: KEY}").replace(
    "row_slice: {start: key_dim, stop: 2 * key_dim}", "row_slice: {start: 0, stop: key_dim}").replace(
    "row_slice: {start: KEY}", "row_slice: {start: key_dim, stop: 2 * key_dim}"))
SSM_A = ("ssm_a taken for A_log", "text/layers/", "gdn/a_log", lambda t: t.replace("\n          - a_log_from_ssm_a", ""))


@pytest.mark.parametrize("defect, recipe", [(NO_NORM_SHIFT, "groupwise-int"), (NO_NORM_SHIFT, "bf16"),
                                            (NO_NORM_SHIFT, "exact"), (V_HEADS_TILED, "groupwise-int"),
                                            (SSM_A, "groupwise-int"), (QUERY_GATE_SWAPPED, "groupwise-int"),
                                            (GDN_QK_SWAPPED, "groupwise-int")], ids=lambda x: x[0] if isinstance(x, tuple) else x)
def test_a_mapping_convention_error_fails_the_structure_question(src, tmp_path, monkeypatch, defect, recipe):
    _, prefix, leaf, edit = defect
    doctored(tmp_path, monkeypatch, edit)
    art = converted(src["q35_gguf"], tmp_path / "wrong.ninfer", recipe)
    r = verify(art, src["q35_gguf"])
    # the values and order gates compare through the same (wrong) mapping: they cannot see it
    assert statuses(r) == ["pass"] * 6 + ["fail"], [(g.number, r.codes(g.number)) for g in r.gates if g.status == "fail"]
    issue = next(i for i in r.gate(7).issues if i.code == "VERIFY_GOLDEN_STRUCTURE")
    assert issue.path.startswith(prefix) and leaf in issue.path  # located: the parameter that reads back otherwise
    s = r.gate(7).evidence["structure"]
    assert s["second_forward"] is True and s["cosine"] < s["thresholds"]["cosine"]
    assert s["storage"] == "gguf:qwen35" and s["first_layer"] is not None
    assert all(leaf in p["parameter"] for p in s["differing_parameters"])


@pytest.mark.parametrize("forgotten", [False, True])
def test_a_transposed_expert_bank_read_untransposed_fails_the_structure_question(tmp_path, monkeypatch, forgotten):
    """Qwen3-VL-MoE's released fused expert banks hold each expert as ``[in, out]``; a mapping that forgets
    ``transpose: true`` on a square bank stores every expert's matrix transposed, right in size."""
    hf = qwen3_vl_moe.write_hf_dir(tmp_path / "hf", expert_layout="fused", moe_intermediate_size=128)
    if forgotten:
        doctored(tmp_path, monkeypatch, lambda t: t.replace(
            '{tensor: "{text}layers.{l}.mlp.experts.down_proj", transpose: true,',
            '{tensor: "{text}layers.{l}.mlp.experts.down_proj",'), "qwen3_vl_moe.yaml")
    art = converted(hf, tmp_path / "a.ninfer", "groupwise-int")
    r = verify(art, hf)
    s = r.gate(7).evidence["structure"]
    assert s["storage"] == "hf:qwen3_vl_moe"
    if not forgotten:
        assert statuses(r) == ["pass"] * 7 and s["second_forward"] is False and s["max_read_back_difference"] == 0.0
        return
    assert statuses(r) == ["pass"] * 6 + ["fail"]
    issue = next(i for i in r.gate(7).issues if i.code == "VERIFY_GOLDEN_STRUCTURE")
    assert re.fullmatch(r"text/layers/\d+/moe/experts/\d+/down", issue.path)
    assert {re.sub(r"\d+", "N", p["parameter"]) for p in s["differing_parameters"]} == {"text/layers/N/moe/experts/N/down"}


def test_a_wrong_rotary_in_the_artifact_config_fails_the_structure_question(src, tmp_path):
    """The rotary the artifact's runtime would apply differs from the source's: the structure question measures
    what that does to the logits, at 4-bit, where the cost alone stays within its budget."""
    clean = converted(src["q35_gguf"], tmp_path / "gi.ninfer", "groupwise-int")

    def slower_rotary(components: dict) -> dict:
        components = json.loads(json.dumps(components))
        components["text"]["config"]["rope_parameters"]["rope_theta"] = 10000.0
        return components

    bad = rewrite(clean, tmp_path / "rope.ninfer", components=slower_rotary)
    r = verify(bad, src["q35_gguf"])
    assert r.codes(4) == {"VERIFY_CONFIG_MISMATCH"}  # gate 4 compares the configs field by field
    assert [g.number for g in r.gates if g.status == "fail"] == [4, 7]
    assert r.codes(7) == {"VERIFY_GOLDEN_STRUCTURE"}  # the cost of 4-bit hides it; the structure does not
    s = r.gate(7).evidence["structure"]
    assert s["config_differences"] == {"rope_theta": [10000000.0, 10000.0]}
    assert s["differing_parameters"] == [] and s["cosine"] < 0.99999
    assert "rope_theta" in r.gate(7).issues[0].evidence


def _not_bf16_exact(hf) -> None:
    """Give every float32 tensor of the checkpoint random low mantissa bits: its values are no longer bf16's."""
    rng = np.random.default_rng(7)
    for f in sorted(hf.glob("*.safetensors")):
        tensors = load_file(f)
        for k, x in tensors.items():
            if x.dtype == np.float32:
                if x.ndim == 2 and ("language_model" in k or k == "lm_head.weight"):
                    x = (x * 2).astype(np.float32)  # larger weights: a more sensitive (chaotic) random model
                tensors[k] = (x.view(np.uint32) | rng.integers(0, 1 << 16, x.shape, dtype=np.uint32)).view(np.float32)
        save_file(tensors, f, metadata={"format": "pt"})


def test_float32_vision_language_model_to_bf16_is_accepted(tmp_path):
    """A correct bf16 conversion of a tiny random Qwen3.5-VL with float32 weights: its rounding costs more than the
    old fixed 16-bit floor (cosine 0.9995) allowed, and it is accepted — the structure is exact, and the cost is
    within the bf16 recipe's budget."""
    hf = vision.write_hf_dir(tmp_path / "vl", text_cfg=qwen35.config(num_hidden_layers=16), seed=6, dtype="f32")
    _not_bf16_exact(hf)
    out = tmp_path / "vl.ninfer"
    convert(hf, out, recipe="bf16", components=("text", "vision"), workers=2)
    r = verify(out, hf)
    assert statuses(r) == ["pass"] * 7 and r.result == "pass"
    g7 = r.gate(7).evidence
    assert g7["structure"]["cosine"] == 1.0 and g7["structure"]["storage"] == "hf:qwen35"
    assert g7["budget_from"] == "recipe bf16" and g7["thresholds"] == {"cosine": 0.99, "top1_agreement": 0.75}
    assert g7["cosine"] < 0.9995  # what failed before: the bf16 rounding of this model costs that much
    assert g7["cosine"] >= 0.99 and g7["top1_agreement"] >= 0.75
    assert r.gate(4).evidence["parameters"] > 0 and r.gate(4).status == "pass"
