"""MoE mappings (Qwen3-MoE, Qwen3.5-MoE text, Qwen3-Next): every source form binds to the generator's
logical parameters, value for value, before any artifact is written.

Sources: GGUFs written the way llama.cpp writes them (stacked ``ffn_*_exps`` banks, fused
``ffn_gate_up_exps``; Qwen3-Next's ``attn_qkv``/``attn_gate`` and the older whole ``ssm_in``) and HF
directories in both expert layouts (one tensor per expert, transformers 5 fused ``gate_up_proj`` /
``down_proj``). Reference: ``tinymodels.*.logical_parameters`` (HF values, drawn per expert), never our
own readers. The loader's new keys (``bank``, source alternatives, probe lists) are refused when misused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from converters.errors import MappingError
from converters.mapping import load_mapping
from converters.mapping.schema import MAPPINGS_DIR
from converters.model.engine import expected_parameters, open_model
from tests.support.moe import legacy_next_gguf
from tinymodels import hf_writer, qwen3_moe, qwen3_next, qwen35_moe, tokenizer, vision

MODULES = {"qwen3_moe": qwen3_moe, "qwen35_moe": qwen35_moe, "qwen3_next": qwen3_next}


def text_reference(mod, cfg) -> dict[str, np.ndarray]:
    return {k: v for k, v in mod.logical_parameters(cfg).items() if not k.startswith("mtp/")}


def assert_same(got: dict, ref: dict) -> None:
    assert got.keys() == ref.keys(), sorted(set(got) ^ set(ref))[:8]
    for name, want in ref.items():
        have = got[name].reshape(want.shape)
        if name.endswith("/a_log"):  # log(-(-exp(x))) in float64, rounded once
            np.testing.assert_allclose(have, want, rtol=2e-7, err_msg=name)
        else:
            np.testing.assert_array_equal(have, want, err_msg=name)




CASES = [
    ("qwen3_moe", {}, "gguf"), ("qwen3_moe", {}, "per_expert"), ("qwen3_moe", {}, "fused"),
    ("qwen3_moe", {"mlp_only_layers": [0]}, "fused"),
    ("qwen35_moe", {}, "gguf"), ("qwen35_moe", {}, "gguf_fused"), ("qwen35_moe", {}, "per_expert"),
    ("qwen35_moe", {}, "fused"),
    ("qwen3_next", {}, "gguf"), ("qwen3_next", {}, "gguf_fused"), ("qwen3_next", {}, "per_expert"),
    ("qwen3_next", {"mlp_only_layers": [1]}, "fused"),
]


@pytest.mark.parametrize(("arch", "overrides", "form"), CASES, ids=[f"{a}-{f}{'-dense' if o else ''}"
                                                                   for a, o, f in CASES])
def test_every_source_form_gives_the_generator_values(tmp_path, arch, overrides, form):
    mod = MODULES[arch]
    cfg = mod.config(**overrides)
    if form.startswith("gguf"):
        src = mod.write_gguf(tmp_path / "m.gguf", cfg, fused_gate_up=form == "gguf_fused")
    else:
        src = mod.write_hf_dir(tmp_path / "hf", cfg, expert_layout=form, dtype="f32")
    assert_same(dict(expected_parameters(src)), text_reference(mod, cfg))


@dataclass(frozen=True)
class Renamed:
    """An HF spec saved under another name with the original name's values (the text model of a
    ``*ForConditionalGeneration`` checkpoint lives under ``model.language_model.``)."""

    name: str
    inner: object
    shape = property(lambda self: self.inner.shape)
    rows = property(lambda self: self.inner.rows)
    row_size = property(lambda self: self.inner.row_size)
    size = property(lambda self: self.inner.size)

    def values(self, seed: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        return self.inner.values(seed, start, stop)


def test_qwen35moe_conditional_generation_text_part(tmp_path):
    """Qwen3_5MoeForConditionalGeneration: text under model.language_model.* (fused experts), the vision
    tower model.visual.* belongs to the unselected vision component."""
    text = qwen35_moe.config()
    tower = vision.config(out_hidden_size=text["hidden_size"])
    cfg = vision.model_config(text, tower) | {"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                                              "model_type": "qwen3_5_moe"}
    cfg["vision_config"]["model_type"] = "qwen3_5_moe_vision"
    specs = [Renamed(s.name.replace("model.", "model.language_model.", 1), s) if s.name.startswith("model.") else s
             for s in qwen35_moe.text_specs(text, "fused")] + vision.tower_specs(tower)
    hf = hf_writer.write_hf_dir(tmp_path / "cg", cfg, specs, tokenizer.resources(), dtype="f32", shards=2)
    with open_model(hf) as model:
        assert model.architecture.NAME == "qwen35_moe"
        assert all(k.startswith("main:model.visual.") for k in model.bound.skipped)
        assert len(model.bound.skipped) == len(vision.tower_specs(tower))
    assert_same(dict(expected_parameters(hf)), text_reference(qwen35_moe, text))


def test_banks_and_kinds_are_bound_per_layer(tmp_path):
    cfg = qwen3_next.config(mlp_only_layers=[1])
    with open_model(qwen3_next.write_hf_dir(tmp_path / "hf", cfg, expert_layout="fused")) as model:
        bound = model.bound
        assert bound.layer_kinds == ("linear_attention_moe", "linear_attention_dense", "linear_attention_moe",
                                     "full_attention_moe")
        experts = [p for p in bound.parameters if p.bank == "text/layers/2/moe/experts/up"]
        assert [p.name for p in experts] == [f"text/layers/2/moe/experts/{e}/up" for e in range(8)]
        assert {p.source.tensor for p in experts} == {"model.layers.2.mlp.experts.gate_up_proj"}
        rows = experts[5].source.chain.rows  # expert 5's up: rows [64, 128) of entry 5 of [8, 128, 128]
        np.testing.assert_array_equal(rows, 5 * 128 + 64 + np.arange(64))
        assert not any(p.name.startswith("text/layers/1/moe/") for p in bound.parameters)
        assert bound.parameter("text/layers/1/mlp/gate").shape == (256, 128)
        assert bound.parameter("text/layers/0/moe/router").bank is None


def test_qwen3next_older_gguf_with_whole_ssm_in(tmp_path, monkeypatch):
    cfg = qwen3_next.config()
    src = legacy_next_gguf(tmp_path / "old.gguf", cfg, monkeypatch)
    with open_model(src) as model:
        q = model.bound.parameter("text/layers/0/gdn/value")
        assert q.source.tensor == "blk.0.ssm_in.weight" and q.source.chain.steps[0].startswith("select_head_rows")
    assert_same(dict(expected_parameters(src)), text_reference(qwen3_next, cfg))


def test_qwen3next_gguf_with_both_forms_is_refused(tmp_path, monkeypatch):
    src = legacy_next_gguf(tmp_path / "both.gguf", qwen3_next.config(), monkeypatch, keep_new=True)
    with pytest.raises(MappingError, match=r"not consumed.*blk\.0\.ssm_in\.weight") as err:
        open_model(src)
    assert err.value.rule == "unconsumed_tensors"


def test_config_and_tensors_must_agree_on_dense_layers(tmp_path):
    hf = qwen3_moe.write_hf_dir(tmp_path / "hf", qwen3_moe.config(), shards=1)
    cfg = json.loads((hf / "config.json").read_text())
    cfg["mlp_only_layers"] = [1]
    (hf / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MappingError, match=r"layer 1: the config says full_attention_dense, but "
                                           r"model\.layers\.1\.mlp\.gate_proj\.weight is missing") as err:
        open_model(hf)
    assert err.value.rule == "layer_kind_mismatch"


def test_missing_expert_names_every_alternative(tmp_path):
    hf = qwen3_moe.write_hf_dir(tmp_path / "hf", qwen3_moe.config(), shards=1, dtype="f32")
    tensors = load_file(hf / "model.safetensors")
    del tensors["model.layers.1.mlp.experts.6.down_proj.weight"]
    save_file(tensors, hf / "model.safetensors")
    with pytest.raises(MappingError, match=r"experts/6/down: none of the source tensors "
                                           r"model\.layers\.1\.mlp\.experts\.6\.down_proj\.weight, "
                                           r"model\.layers\.1\.mlp\.experts\.down_proj is missing"):
        open_model(hf)


def _mapping_with(tmp_path, old: str, new: str):
    text = (MAPPINGS_DIR / "qwen3_moe.yaml").read_text()
    assert old in text
    path = tmp_path / "m.yaml"
    path.write_text(text.replace(old, new))
    return load_mapping(path)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("      role: moe.router\n", '      role: moe.router\n      bank: "text/layers/{l}/moe/routers"\n',
     "stacking the rows of a repeated"),
    ('bank: "text/layers/{l}/moe/experts/up"', 'bank: "text/layers/{l}/moe/experts/{e}/up"', "unknown placeholder {e}"),
    ('bank: "text/layers/{l}/moe/experts/down"', 'bank: "Text/Down"', "a bank is an object id"),
    ('      gguf: {tensor: "blk.{l}.ffn_up_exps.weight", transforms: [pick: {index: e}]}',
     '      gguf: [["blk.{l}.ffn_up_exps.weight"]]', "alternatives do not nest"),
    ('      gguf: {tensor: "blk.{l}.ffn_up_exps.weight", transforms: [pick: {index: e}]}',
     '      gguf: []', "must not be empty"),
    ('probe: {hf: "{text}layers.{l}.mlp.gate_proj.weight"}', 'probe: {hf: ["{text}layers.{l}.mlp.gate_proj.weight", 3]}',
     "must be a non-empty string"),
], ids=["bank_without_repeat", "bank_with_expert_placeholder", "bank_not_an_id", "nested_alternatives",
        "empty_alternatives", "probe_list_item"])
def test_loader_refuses_misused_moe_keys(tmp_path, old, new, message):
    with pytest.raises(MappingError, match=message) as err:
        _mapping_with(tmp_path, old, new)
    assert "m.yaml:" in err.value.file


def test_loader_reads_alternatives_and_probe_lists():
    m = load_mapping(MAPPINGS_DIR / "qwen3_next.yaml")
    z = next(p for p in m.parameters() if p.name == "text/layers/{l}/gdn/z")
    assert [c.tensor for c in z.sources["gguf"].choices()] == ["blk.{l}.attn_gate.weight", "blk.{l}.ssm_in.weight"]
    assert m.kinds["full_attention_moe"].probes["gguf"] == ("blk.{l}.attn_q.weight", "blk.{l}.ffn_gate_inp.weight")
    assert "gguf" not in m.kinds["full_attention_dense"].probes
    down = next(p for p in m.parameters() if p.name == "text/layers/{l}/moe/experts/{e}/down")
    assert down.bank == "text/layers/{l}/moe/experts/down" and down.repeat == (("e", "num_experts"),)
