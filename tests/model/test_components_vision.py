"""The Qwen3.5 vision tower as a component: from the HF ``Qwen3_5ForConditionalGeneration`` checkpoint
(``model.visual.*``) and from the mmproj GGUF llama.cpp writes (the Conv3d split in time into
``v.patch_embd.weight`` / ``.weight.1``, re-joined here), decoded against the generator's float reference
(:mod:`tinymodels.vision`); its record (standard ``model_type``, target text) and processor resources."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.errors import ConversionError
from converters.model.components import ComponentMissingError
from converters.model.engine import logical_array
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from tests.support.components import check_separation, cosine
from tinymodels import qwen35, vision

TEXT = qwen35.config(mtp_num_hidden_layers=1)
VCFG = vision.config()
REF = vision.logical_parameters(VCFG)
PATCH = "vision/patch_embedding"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("vision")
    vision.write_hf_dir(d / "vl", TEXT, VCFG)
    vision.write_mmproj(d / "mmproj.gguf", VCFG, TEXT)
    vision.write_mmproj(d / "mmproj-q8.gguf", VCFG, TEXT, matrix_type="Q8_0")
    qwen35.write_gguf(d / "text.gguf", TEXT, matrix_type="Q8_0")
    qwen35.write_hf_dir(d / "text-hf", TEXT)
    return d


def resource(a, role: str) -> bytes:
    rid = a.components["vision"].resources[role]
    rec = a.object(rid)
    view = a.read_range(rec.offset, rec.bytes)
    try:
        return bytes(view)
    finally:
        view.release()


@pytest.mark.parametrize("case, recipe, floor", [
    ("hf", "bf16", 1.0),            # bf16 checkpoint: copied bit for bit
    ("mmproj", "exact", 1.0),       # F32 halves: fp32, the re-joined Conv3d is the reference itself
    ("mmproj-q8", "groupwise-int", 0.99),
])
def test_tower_values_and_record(sources, tmp_path, case, recipe, floor):
    out = tmp_path / "v.ninfer"
    if case == "hf":
        convert(sources / "vl", out, recipe=recipe, components=["text", "vision", "mtp"], workers=1)
    else:
        convert(sources / "text.gguf", out, recipe=recipe, components=["text", "vision"],
                inputs={"mmproj": sources / f"{case}.gguf"}, workers=1)
    assert validate(out) == []
    with open_artifact(out) as a:
        rec = a.components["vision"]
        assert rec.target == "text" and rec.config["model_type"] == "qwen3_5_vision"
        assert rec.config == {k: v for k, v in VCFG.items() if k != "initializer_range"}  # the normalised config
        assert {n for n in a.bindings if n.startswith("vision/")} == set(REF)
        for name, want in REF.items():
            got = logical_array(a, name, want.shape)
            if floor == 1.0:
                np.testing.assert_allclose(got, want, rtol=0, atol=np.abs(want).max() * 2.0 ** -8, err_msg=name)
            else:
                assert cosine(got, want) >= floor, name
        patch = logical_array(a, PATCH, REF[PATCH].shape)
        for t in (0, 1):  # each time half in its own place: swapped halves fail here
            assert cosine(patch[:, :, t], REF[PATCH][:, :, t]) > 0.999
            assert cosine(patch[:, :, t], REF[PATCH][:, :, 1 - t]) < 0.5
        check_separation(a, {"mtp/token_embedding": "text/token_embedding", "mtp/output_head": "text/output_head"})
        assert ("vision/layers/1/attention/qkv", "vision/layers/1/attention_input") in {
            (u.parameter, u.input) for u in a.uses}
        if case == "hf":
            assert resource(a, "preprocessor_config.json") == (sources / "vl" / "preprocessor_config.json").read_bytes()
        else:
            rebuilt = json.loads(resource(a, "preprocessor_config.json"))
            assert rebuilt == {"image_mean": [0.5] * 3, "image_std": [0.5] * 3, "merge_size": 2, "patch_size": 8,
                               "temporal_patch_size": 2}
            assert a.provenance["objects"][rec.resources["preprocessor_config.json"]]["origin"] == "rebuilt"


def test_patch_halves_are_read_from_both_tensors(sources, tmp_path):
    """With the exact recipe the re-joined Conv3d is the two mmproj halves, element for element."""
    out = tmp_path / "x.ninfer"
    convert(sources / "text.gguf", out, recipe="exact", components=["text", "vision"],
            inputs={"mmproj": sources / "mmproj.gguf"}, workers=1)
    from converters.sources import open_gguf

    with open_artifact(out) as a, open_gguf(sources / "mmproj.gguf") as m:
        patch = a.binding_array(PATCH).reshape(REF[PATCH].shape)
        np.testing.assert_array_equal(patch[:, :, 0], m.array("v.patch_embd.weight"))
        np.testing.assert_array_equal(patch[:, :, 1], m.array("v.patch_embd.weight.1"))
        assert a.object(PATCH).format == "fp32" and tuple(a.object(PATCH).shape) == REF[PATCH].shape


def test_two_towers_and_foreign_towers_are_refused(sources, tmp_path):
    out = tmp_path / "r.ninfer"
    with pytest.raises(ConversionError) as info:
        convert(sources / "vl", out, recipe="bf16", components=["text", "vision"],
                inputs={"mmproj": sources / "mmproj.gguf"})
    assert info.value.rule == "vision_ambiguous"
    other = vision.write_mmproj(tmp_path / "other.gguf", vision.config(out_hidden_size=64), qwen35.config(hidden_size=64))
    with pytest.raises(ConversionError) as info:
        convert(sources / "text.gguf", out, recipe="bf16", components=["text", "vision"], inputs={"mmproj": other})
    assert info.value.rule == "vision_target_mismatch" and "64" in info.value.message
    with pytest.raises(ComponentMissingError):
        convert(sources / "text-hf", out, recipe="bf16", components=["text", "vision"])
    assert not out.exists()


def test_text_hf_with_an_mmproj(sources, tmp_path):
    """A text-only HF directory plus an mmproj: weights from the mmproj, no processor file to copy, so rebuilt."""
    out = tmp_path / "h.ninfer"
    convert(sources / "text-hf", out, recipe="bf16", components=["text", "vision"],
            inputs={"mmproj": sources / "mmproj.gguf"}, workers=1)
    with open_artifact(out) as a:
        assert json.loads(resource(a, "preprocessor_config.json"))["patch_size"] == 8
        assert a.provenance["components"]["vision"]["from"] == "mmproj"
