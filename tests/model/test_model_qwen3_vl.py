"""Qwen3-VL as a whole model (docs/qwen3-vl.md): its text (``qwen3_vl``, ``qwen3_vl_moe``: Qwen3 under
``model.language_model.*``, interleaved mRoPE, the deepstack wiring ``deepstack_layers``) and its vision tower
with deepstack mergers, from an HF ``Qwen3VL(Moe)ForConditionalGeneration`` directory (MoE experts per
expert or fused and transposed, as released) and from a text GGUF
(``qwen3vl`` / ``qwen3vlmoe``) plus its mmproj. Conversions decode to the generator's values, ``verify
--sweep`` passes every gate, and a swapped deepstack merger or a text layer wired to the wrong merger fails
verify."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.acceptance.validate_ninfer import validate_ninfer
from converters.errors import ConversionError
from converters.model import architectures
from converters.model.components import supported_by
from converters.model.config_normalize import normalize_text_config
from converters.model.engine import logical_array
from converters.sources import open_source
from ninfer_core import open_artifact, validate
from tests.support.gates import converted, rewrite
from tinymodels import qwen3_vl, qwen3_vl_moe, vision

CFG = qwen3_vl.config()
MOE = qwen3_vl_moe.config(moe_intermediate_size=48)  # 2I != H: a missed transpose cannot fit
VL = ["text", "vision"]


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen3vl")
    return {"hf": qwen3_vl.write_hf_dir(d / "vl-hf", CFG, seed=3),
            "gguf": qwen3_vl.write_gguf(d / "vl.gguf", CFG, seed=3),
            "mmproj": qwen3_vl.write_mmproj(d / "vl-mmproj.gguf", CFG, seed=3),
            "moe_hf": qwen3_vl_moe.write_hf_dir(d / "vlm-hf", MOE, seed=4),
            "moe_fused": qwen3_vl_moe.write_hf_dir(d / "vlm-fused", MOE, seed=4, expert_layout="fused"),
            "moe_gguf": qwen3_vl_moe.write_gguf(d / "vlm.gguf", MOE, seed=4),
            "moe_mmproj": qwen3_vl_moe.write_mmproj(d / "vlm-mmproj.gguf", MOE, seed=4)}


def inputs(src, name: str) -> dict:
    """The extra inputs of source ``name``: the mmproj beside a text GGUF."""
    return {"gguf": {"mmproj": src["mmproj"]}, "moe_gguf": {"mmproj": src["moe_mmproj"]}}.get(name, {})


@pytest.fixture(scope="module")
def arts(src, tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen3vl-arts")
    return {(name, recipe): converted(src[name], d / f"{name}-{recipe}.ninfer", recipe, components=VL,
                                      inputs=inputs(src, name))
            for name in ("hf", "gguf", "moe_hf", "moe_fused", "moe_gguf") for recipe in ("exact", "groupwise-int")}


def reference(name: str) -> dict[str, np.ndarray]:
    return qwen3_vl_moe.logical_parameters(MOE, 4) if name.startswith("moe") else qwen3_vl.logical_parameters(CFG, 3)


# --- registry and config ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mod, hf, gguf_arch, model_type", [
    ("qwen3_vl", "Qwen3VLForConditionalGeneration", "qwen3vl", "qwen3_vl_text"),
    ("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration", "qwen3vlmoe", "qwen3_vl_moe_text")])
def test_the_registry_finds_both_variants(mod, hf, gguf_arch, model_type):
    m = architectures.module(mod)
    assert architectures.for_config({"architectures": [hf]}) is m
    assert architectures.for_config({}, gguf_architecture=gguf_arch) is m
    assert architectures.for_model_type(model_type) is m
    assert supported_by(m) == ("vision",)
    assert m.GOLDEN.qk_norm and not m.GOLDEN.zero_centred_norms and not m.GOLDEN.attn_output_gate
    assert (m.GOLDEN.moe is None) == (mod == "qwen3_vl")


@pytest.mark.parametrize("name", ["hf", "gguf", "moe_hf", "moe_gguf"])
def test_config_rules_read_mrope_and_the_deepstack_wiring(src, name):
    cfg = MOE if name.startswith("moe") else CFG
    with open_source(src[name]) as s:
        got = normalize_text_config(s)
    assert got["model_type"] == ("qwen3_vl_moe_text" if name.startswith("moe") else "qwen3_vl_text")
    assert got["deepstack_layers"] == [0, 1]  # one per deepstack merger (tower blocks [1, 2])
    rope = got["rope_parameters"]
    assert rope["mrope_section"] == [8, 4, 4] and rope["mrope_interleaved"] is True and rope["rope_theta"] == 5e6
    text = cfg["text_config"]
    for field in ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                  "vocab_size"):
        assert got[field] == text[field], field
    if name.startswith("moe"):
        assert (got["num_experts"], got["num_experts_per_tok"], got["moe_intermediate_size"]) == (8, 2, 48)


def test_a_checkpoint_without_a_tower_has_no_deepstack_layers_and_bad_wiring_is_refused(tmp_path):
    cfg = {k: v for k, v in CFG.items() if k != "vision_config"}
    assert qwen3_vl.write_hf_dir(tmp_path / "no-tower", cfg).is_dir()
    with open_source(tmp_path / "no-tower") as s:
        got = normalize_text_config(s)
    assert got["deepstack_layers"] == []
    mod = architectures.module("qwen3_vl")
    for bad in ([0, 0], [0, 4]):
        with pytest.raises(ConversionError, match="deepstack_layers") as e:
            mod.Args.from_config({**got, "deepstack_layers": bad})
        assert e.value.json_path == "config.deepstack_layers"


# --- conversions -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["exact", "groupwise-int"])
@pytest.mark.parametrize("name", ["hf", "gguf", "moe_hf", "moe_fused", "moe_gguf"])
def test_text_and_tower_decode_to_the_generator(arts, name, recipe):
    ref = reference(name)
    with open_artifact(arts[name, recipe]) as art:
        assert validate(arts[name, recipe]) == []
        assert validate_ninfer(arts[name, recipe]).verdict == "pass"  # gates A-F, vision parameters included
        bound = set(art.bindings)
        text = art.components["text"].config
        assert text["deepstack_layers"] == [0, 1] and art.components["vision"].config["deepstack_visual_indexes"] == [1, 2]
        assert "preprocessor_config.json" in (art.components["vision"].resources or {})
        if "text/output_head" not in bound:
            del ref["text/output_head"]  # a tied head reads the embedding
        assert set(ref) <= bound
        for pname, want in ref.items():
            got = logical_array(art, pname, want.shape)
            if want.ndim == 1 or recipe == "exact":  # bf16 / f32 sources: the exact recipe keeps every value
                np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=pname)
            else:
                cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
                assert cos > 0.99, pname


@pytest.mark.parametrize("name", ["hf", "gguf", "moe_hf", "moe_fused", "moe_gguf"])
def test_verify_sweep_passes_every_gate_golden_forward_included(src, arts, name):
    for recipe in ("exact", "groupwise-int"):
        r = verify(arts[name, recipe], src[name], inputs=inputs(src, name), sweep=True)
        assert [(g.number, g.status) for g in r.gates] == [(n, "pass") for n in range(1, 8)], \
            (name, recipe, [(g.number, [i.code for i in g.issues]) for g in r.gates if g.status != "pass"])


@pytest.mark.parametrize("recipe", ["bf16", "fp8-row", "nvfp4"])
def test_the_other_recipes_convert_and_verify(src, tmp_path, recipe):
    out = converted(src["gguf"], tmp_path / f"{recipe}.ninfer", recipe, components=VL, inputs=inputs(src, "gguf"))
    r = verify(out, src["gguf"], inputs=inputs(src, "gguf"))
    assert [g.status for g in r.gates] == ["pass"] * 7, [(g.number, [i.code for i in g.issues]) for g in r.gates]


def test_the_released_fused_transposed_experts_are_read_transposed():
    per_expert = qwen3_vl_moe.hf_tensors(MOE, 4, expert_layout="per_expert")
    fused = qwen3_vl_moe.hf_tensors(MOE, 4, expert_layout="fused")
    bank = "model.language_model.layers.1.mlp.experts"
    assert fused[f"{bank}.gate_up_proj"].shape == (8, 128, 2 * 48) and fused[f"{bank}.down_proj"].shape == (8, 48, 128)
    np.testing.assert_array_equal(fused[f"{bank}.gate_up_proj"][3][:, 48:], per_expert[f"{bank}.3.up_proj.weight"].T)
    np.testing.assert_array_equal(fused[f"{bank}.down_proj"][5], per_expert[f"{bank}.5.down_proj.weight"].T)


def test_text_only_conversion_skips_the_tower(src, tmp_path):
    out = converted(src["hf"], tmp_path / "text.ninfer", "exact")
    with open_artifact(out) as art:
        assert set(art.components) == {"text"} and not any(n.startswith("vision/") for n in art.bindings)


# --- defects verify catches --------------------------------------------------------------------------------------

MERGER_PARTS = ("norm", "norm_bias", "fc1", "fc1_bias", "fc2", "fc2_bias")


def failing(report) -> dict[int, set[str]]:
    return {g.number: {i.code for i in g.issues if i.severity == "ERROR"} for g in report.gates if g.status == "fail"}


@pytest.mark.parametrize("name", ["hf", "gguf"])
def test_a_swapped_deepstack_merger_fails_verify(src, arts, tmp_path, name):
    clean = arts[name, "exact"]
    with open_artifact(clean) as art:
        obj = {(k, p): art.bindings[f"vision/deepstack/{k}/{p}"].object for k in (0, 1) for p in MERGER_PARTS}
        values = {key: art.object_array(oid).copy() for key, oid in obj.items()}
    edit = {obj[k, p]: (lambda x, v=values[1 - k, p]: v) for k in (0, 1) for p in MERGER_PARTS}
    bad = rewrite(clean, tmp_path / "swapped.ninfer", edit=edit)
    r = verify(bad, src[name], inputs=inputs(src, name), sweep=True)
    assert "VERIFY_VALUE_NOT_EXACT" in failing(r)[4]
    named = {i.path for i in r.gate(4).issues if i.code == "VERIFY_VALUE_NOT_EXACT"}
    assert {f"vision/deepstack/{k}/fc1" for k in (0, 1)} <= named


@pytest.mark.parametrize("name", ["hf", "moe_gguf"])
def test_a_text_layer_wired_to_the_wrong_merger_fails_verify(src, arts, tmp_path, name):
    def rewire(components: dict) -> dict:
        text = components["text"]
        return {**components, "text": {**text, "config": {**text["config"], "deepstack_layers": [1, 0]}}}

    bad = rewrite(arts[name, "exact"], tmp_path / "rewired.ninfer", components=rewire)
    r = verify(bad, src[name], inputs=inputs(src, name))
    assert failing(r) == {4: {"VERIFY_CONFIG_MISMATCH"}}
    issue = next(i for i in r.gate(4).issues if i.code == "VERIFY_CONFIG_MISMATCH")
    assert issue.path == "$.components.text.config"
    assert issue.detail["deepstack_layers"] == {"artifact": [1, 0], "source": [0, 1]}


def test_a_tower_with_another_merger_count_is_refused(src, tmp_path):
    one = {**CFG, "vision_config": vision.config("qwen3_vl", depth=3, deepstack_visual_indexes=[2],
                                                 out_hidden_size=128)}
    mmproj = qwen3_vl.write_mmproj(tmp_path / "one.gguf", one)
    with pytest.raises(ConversionError, match="deepstack mergers") as e:
        converted(src["gguf"], tmp_path / "x.ninfer", "exact", components=VL, inputs={"mmproj": mmproj})
    assert e.value.rule == "vision_target_mismatch"
    assert not (tmp_path / "x.ninfer").exists()


def test_validate_refuses_a_deepstack_wiring_outside_the_text_model(arts, tmp_path):
    def rewire(components: dict) -> dict:
        text = components["text"]
        return {**components, "text": {**text, "config": {**text["config"], "deepstack_layers": [0, 9]}}}

    bad = rewrite(arts["gguf", "exact"], tmp_path / "outside.ninfer", components=rewire)
    report = validate_ninfer(bad)
    assert report.verdict == "fail"
    issue = next(f for f in report.findings if f.code == "NINFER_CONFIG_INVALID")
    assert "deepstack_layers" in issue.evidence and issue.path == "$.components.text.config"
    assert "NINFER_CONFIG_INVALID" in failing(verify(bad))[2]
