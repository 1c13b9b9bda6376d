"""Component selection (container §4.2): what ``--components`` accepts, which inputs each component needs,
and the separation rule every component artifact must keep (§5.3: a component's private parameters are
objects of their own, truly shared data is bound to the text objects). The helpers here are used by the
other ``test_components_*`` files."""

from __future__ import annotations

import pytest

from converters.errors import ConversionError
from converters.model.components import ComponentMissingError, parse_components
from converters.pipeline.convert import convert
from tinymodels import dflash, qwen3, qwen35, vision

CFG = qwen35.config(mtp_num_hidden_layers=1)








def test_parse_components_order_duplicates_and_text():
    assert parse_components(["text", "vision", " mtp", "vision"]) == ("text", "vision", "mtp")
    with pytest.raises(ConversionError) as info:
        parse_components(["mtp"])
    assert info.value.rule == "component_text"
    with pytest.raises(ConversionError) as info:
        parse_components(["text", "speech"])
    assert info.value.rule == "component_unknown" and "speech" in info.value.message


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    d = tmp_path_factory.mktemp("plain")
    qwen35.write_gguf(d / "q35.gguf", qwen35.config(), matrix_type="F32")  # no MTP head
    qwen35.write_hf_dir(d / "q35-hf", qwen35.config())
    qwen3.write_gguf(d / "q3.gguf", qwen3.config(), matrix_type="F32")
    return d


@pytest.mark.parametrize("source, components, inputs, needle", [
    ("q35.gguf", ["text", "mtp"], None, "component mtp is not available: the source has no MTP head"),
    ("q35-hf", ["text", "mtp"], None, "component mtp is not available: the source has no MTP head"),
    ("q35.gguf", ["text", "vision"], None, "pass --mmproj FILE"),
    ("q35-hf", ["text", "vision"], None, "no model.visual.* tensors"),
    ("q35.gguf", ["text", "dflash2"], None, "pass --drafter DIR"),
    ("q3.gguf", ["text", "mtp"], None, "the qwen3 architecture has no mtp component"),
])
def test_missing_component_fails_before_writing(plain, tmp_path, source, components, inputs, needle):
    out = tmp_path / "out.ninfer"
    with pytest.raises(ComponentMissingError) as info:
        convert(plain / source, out, recipe="bf16", components=components, inputs=inputs)
    assert needle in info.value.message and info.value.rule == "component_missing"
    assert components[1] in info.value.message
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_inputs_without_their_component_are_refused(plain, tmp_path):
    mmproj = vision.write_mmproj(tmp_path / "mmproj.gguf", vision.config(), qwen35.config())
    drafter = dflash.write_hf_dir(tmp_path / "drafter", dflash.config(2, qwen35.config()), version=2)
    out = tmp_path / "out.ninfer"
    with pytest.raises(ConversionError) as info:
        convert(plain / "q35.gguf", out, recipe="bf16", inputs={"mmproj": mmproj})
    assert info.value.rule == "input_unused" and "--mmproj" in info.value.message
    with pytest.raises(ConversionError) as info:
        convert(plain / "q35.gguf", out, recipe="bf16", components=["text", "dflash"], inputs={"drafter": [drafter]})
    assert info.value.rule == "input_unused" and "dflash2 drafter" in info.value.message
    with pytest.raises(ConversionError) as info:  # a text checkpoint is not a drafter
        convert(plain / "q35.gguf", out, recipe="bf16", components=["text", "dflash"],
                inputs={"drafter": [plain / "q35-hf"]})
    assert info.value.rule == "drafter_kind"
    assert not out.exists()
