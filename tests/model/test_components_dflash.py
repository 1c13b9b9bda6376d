"""z-lab DFlash / DFlash2 drafters as components: values against the generator (:mod:`tinymodels.dflash`),
query K/V and context K/V bindings and uses (container §8, §12.5) in both representations — shared
(``same_as``: the context binds the same parts as the query K/V) and independent (objects of their own,
here in another format) — and drafters that do not fit their target refused before writing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.errors import ConversionError
from converters.model.engine import logical_array
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from tests.support.components import check_separation, cosine
from tinymodels import dflash, qwen35

TEXT = qwen35.config()
CFG = {1: dflash.config(1, TEXT), 2: dflash.config(2, TEXT)}
REF = {v: dflash.logical_parameters(CFG[v]) for v in (1, 2)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("dflash")
    qwen35.write_gguf(d / "text.gguf", TEXT, matrix_type="Q8_0")
    dflash.write_hf_dir(d / "d1", CFG[1], version=1)
    dflash.write_hf_dir(d / "d2", CFG[2], version=2)
    return d


def convert_both(sources, out, recipe):
    return convert(sources / "text.gguf", out, recipe=recipe, components=["text", "dflash", "dflash2"],
                   inputs={"drafter": [sources / "d2", sources / "d1"]}, workers=1)


@pytest.mark.parametrize("recipe, shared, floor", [
    ("bf16", True, 1.0),
    ("nvfp4", True, 0.97),
    ("groupwise-int", False, 0.99),
])
def test_drafters_values_and_kv_roles(sources, tmp_path, recipe, shared, floor):
    out = tmp_path / "d.ninfer"
    convert_both(sources, out, recipe)
    assert validate(out) == []
    with open_artifact(out) as a:
        for v, c in ((1, "dflash"), (2, "dflash2")):
            rec = a.components[c].to_json()
            assert rec["target"] == "text" and rec["config"]["architectures"] == [dflash.ARCHITECTURES[v]]
            assert rec["config"]["dflash_config"] == CFG[v]["dflash_config"] and "transformers_version" not in rec["config"]
            assert {n for n in a.bindings if n.startswith(f"{c}/")} == set(REF[v])
            for name, want in REF[v].items():
                got = logical_array(a, name, want.shape)
                if floor == 1.0:
                    np.testing.assert_allclose(got, want, rtol=0, atol=np.abs(want).max() * 2.0 ** -8, err_msg=name)
                else:
                    assert cosine(got, want) >= floor, name
            uses = {(u.parameter, u.input): u for u in a.uses}
            for layer in range(CFG[v]["num_hidden_layers"]):
                q = f"{c}/layers/{layer}/attention"
                for kind in ("key", "value"):
                    assert (f"{q}/{kind}", f"{c}/layers/{layer}/query_projection_input") in uses
                    assert (f"{q}/context_{kind}", f"{c}/context_input") in uses
                    query_side, context_side = a.bindings[f"{q}/{kind}"], a.bindings[f"{q}/context_{kind}"]
                    if shared:  # §12.5: the same Part, no object of its own
                        assert context_side.to_json() == query_side.to_json()
                        assert f"{q}/context_{kind}" not in {o.id for o in a.objects}
                    else:      # an object of its own, q8 while the query side is q4/q5
                        assert context_side.to_json() == {"object": f"{q}/context_{kind}"}
                        assert a.object(f"{q}/context_{kind}").format == "q8_g32_fp16"
                        assert a.object(f"{q}/{'query_key' if kind == 'key' else 'value'}").format != "q8_g32_fp16"
            check_separation(a)


def test_nvfp4_shares_the_fused_parent_like_the_spec_example(sources, tmp_path):
    """§12.5 with a fused query|key|value parent: context_key binds the key rows of that parent."""
    out = tmp_path / "n.ninfer"
    convert_both(sources, out, "nvfp4")
    with open_artifact(out) as a:
        h, qd, kd = 128, 4 * 32, 2 * 32
        key = a.bindings["dflash2/layers/0/attention/context_key"].to_json()
        assert key == {"parts": [{"object": "dflash2/layers/0/attention/query_key_value",
                                  "range": [qd * h, (qd + kd) * h]}]}


def test_same_as_needs_the_same_trained_tensor(sources, tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("name: bad\ndescription: context key bound to the query\nroles:\n"
                      "  \"*\": {format: bf16}\n  attention.context_key: {same_as: attention.query}\n"
                      "  attention.context_value: {same_as: attention.value}\n")
    with pytest.raises(ConversionError) as info:
        convert_both(sources, tmp_path / "o.ninfer", recipe)
    assert info.value.rule == "same_as_source" and "context_key" in info.value.message
    assert not (tmp_path / "o.ninfer").exists()


@pytest.mark.parametrize("change, rule", [
    ({"hidden_size": 64}, "drafter_target_mismatch"),
    ({"target_layer_ids": [1, 3, 9]}, "drafter_target_mismatch"),
    ({"num_target_layers": 12}, "drafter_target_mismatch"),
])
def test_drafter_for_another_target_is_refused(sources, tmp_path, change, rule):
    cfg = json.loads(json.dumps(CFG[2]))
    for k, v in change.items():
        (cfg["dflash_config"] if k in cfg["dflash_config"] else cfg)[k] = v
    if "hidden_size" in change:
        cfg["head_dim"] = 16
    d = dflash.write_hf_dir(tmp_path / "other", cfg, version=2)
    with pytest.raises(ConversionError) as info:
        convert(sources / "text.gguf", tmp_path / "o.ninfer", recipe="bf16", components=["text", "dflash2"],
                inputs={"drafter": [d]})
    assert info.value.rule == rule and next(iter(change)) in info.value.message


def test_two_drafters_of_one_kind_are_refused(sources, tmp_path):
    with pytest.raises(ConversionError) as info:
        convert(sources / "text.gguf", tmp_path / "o.ninfer", recipe="bf16", components=["text", "dflash"],
                inputs={"drafter": [sources / "d1", sources / "d1"]})
    assert info.value.rule == "input_duplicate"
