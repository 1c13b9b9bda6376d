"""The Qwen3-VL vision tower's deepstack mergers (``model.visual.deepstack_merger_list.{k}`` in HF,
``v.deepstack.{deepstack_visual_indexes[k]}.{norm,fc1,fc2}`` in the mmproj llama.cpp writes), bound as
``vision/deepstack/{k}/*`` (:mod:`tinymodels.vision` logical names): an mmproj marking deepstack layers
converts with ``--components text,vision``, its decoded parameters equal the generator's reference, verify's
sweep passes, a swapped deepstack row fails it, and an unevenly spaced index list is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance.gates.required import required_parameters
from converters.acceptance.gates.verify import verify
from converters.errors import ConversionError
from converters.model.architectures import qwen3_5_vision
from converters.model.engine import logical_array
from ninfer_core import open_artifact, validate
from tests.support.gates import converted, rewrite, swap_blocks
from tinymodels import qwen35, vision

TEXT = qwen35.config()
VCFG = vision.config("qwen3_vl", depth=4, deepstack_visual_indexes=[1, 3])  # GGUF index != list index
REF = vision.logical_parameters(VCFG)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("deepstack")
    vision.write_mmproj(d / "mmproj.gguf", VCFG, TEXT)
    qwen35.write_gguf(d / "text.gguf", TEXT, matrix_type="Q8_0")
    converted(d / "text.gguf", d / "vl.ninfer", "exact", components=["text", "vision"],
              inputs={"mmproj": d / "mmproj.gguf"})
    return d


def test_deepstack_mergers_decode_to_the_reference(src):
    out = src / "vl.ninfer"
    assert validate(out) == []
    with open_artifact(out) as a:
        rec = a.components["vision"]
        assert rec.config["model_type"] == "qwen3_vl" and rec.config["deepstack_visual_indexes"] == [1, 3]
        assert {n for n in a.bindings if n.startswith("vision/")} == set(REF)
        assert {n for n in REF if n.startswith("vision/deepstack/")} == {
            f"vision/deepstack/{k}/{p}" for k in (0, 1) for p in ("norm", "norm_bias", "fc1", "fc1_bias", "fc2",
                                                                  "fc2_bias")}
        for name, want in REF.items():  # F32 mmproj, exact recipe: value for value
            np.testing.assert_array_equal(logical_array(a, name, want.shape), want, err_msg=name)
        ds0, ds1 = (logical_array(a, f"vision/deepstack/{k}/fc1", REF["vision/deepstack/0/fc1"].shape) for k in (0, 1))
        assert not np.array_equal(ds0, ds1)  # two distinct mergers, each in its own place
        assert ("vision/deepstack/1/fc2", "vision/deepstack/1/fc2_input") in {(u.parameter, u.input) for u in a.uses}
        got = required_parameters("vision", rec.config, a.components["text"].config)
        assert {n for n in got if n.startswith("vision/deepstack/")} == {n for n in REF if "deepstack" in n}


def test_verify_sweep_passes_and_a_swapped_deepstack_row_fails(src, tmp_path):
    inputs = {"mmproj": src / "mmproj.gguf"}
    r = verify(src / "vl.ninfer", src / "text.gguf", inputs=inputs, sweep=True)
    assert [g.status for g in r.gates] == ["pass"] * 7, [(g.number, g.issues) for g in r.gates if g.status != "pass"]
    oid = "vision/deepstack/1/fc1"
    bad = rewrite(src / "vl.ninfer", tmp_path / "swap.ninfer", edit={oid: lambda x: swap_blocks(x, 2, 5, 1)})
    r = verify(bad, src / "text.gguf", inputs=inputs, sweep=True)
    assert r.gate(5).status == "fail"
    assert {i.path for i in r.gate(5).issues if i.severity == "ERROR"} == {oid}


def test_qwen3_5_tower_has_no_deepstack_and_uneven_lists_are_refused():
    base = qwen3_5_vision.Args.from_config(vision.config())
    assert (base.deepstack_count, base.deepstack_first, base.deepstack_step) == (0, 0, 1)
    a = qwen3_5_vision.Args.from_config(vision.config("qwen3_vl", depth=27, deepstack_visual_indexes=[8, 16, 24]))
    assert (a.deepstack_count, a.deepstack_first, a.deepstack_step) == (3, 8, 8)
    for bad in ([0, 1, 3], [2, 1], [4]):
        with pytest.raises(ConversionError, match="deepstack_visual_indexes") as e:
            qwen3_5_vision.Args.from_config({**vision.config("qwen3_vl", depth=4), "deepstack_visual_indexes": bad})
        assert e.value.json_path == "config.deepstack_visual_indexes"
