"""Format overrides everywhere (docs/recipes.md §Overrides): an override decides an expert bank's format
when it matches the bank id or every expert (one matching some experts is refused), and a staged
conversion carries the overrides in its plan file, so ``--plan-only`` then encode and seal writes the
same bytes as one process."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from converters.cli import main
from converters.errors import ConverterError
from converters.mapping.overrides import parse_overrides
from converters.model.engine import logical_array
from converters.pipeline.convert import ConvertOptions, convert
from converters.scaleout import job
from converters.scaleout.planfile import PlanFile
from converters.scaleout.run import run_conversion
from ninfer_core import open_artifact
from tinymodels import qwen3_moe, qwen35

AID = "00112233445566778899aabbccddeeff"
DOWN = r"text/layers/\d+/moe/experts/.*/down=q8_g32_fp16"


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return qwen3_moe.write_gguf(tmp_path_factory.mktemp("moe") / "q.gguf", qwen3_moe.config(), matrix_type="Q8_0")


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return qwen35.write_gguf(tmp_path_factory.mktemp("dense") / "m.gguf", qwen35.config(), matrix_type="Q8_0")


def banks(result) -> dict:
    return {o.id: o for o in result.objects if "/moe/experts/" in o.id}


def test_override_by_expert_names_sets_the_bank_format(moe, tmp_path):
    base = banks(convert(moe, tmp_path / "a.ninfer", recipe="groupwise-int", dry_run=True))
    got = banks(convert(moe, tmp_path / "b.ninfer", recipe="groupwise-int", dry_run=True,
                        format_overrides=parse_overrides([DOWN])))
    assert base["text/layers/0/moe/experts/down"].format == "q4_g64_fp16"
    for oid, obj in got.items():
        if oid.endswith("/down"):
            assert obj.format == "q8_g32_fp16" and obj.rule == f"--tensor-type {DOWN} (expert bank)"
            assert {p.exactness for p in obj.pieces} == {"bit-exact"}  # Q8_0 -> q8_g32_fp16 transcodes
        else:
            assert obj.format == base[oid].format and obj.rule == base[oid].rule


def test_override_by_bank_id_and_requantized_note(moe, tmp_path):
    out = tmp_path / "c.ninfer"
    result = convert(moe, out, recipe="groupwise-int", workers=1,
                     format_overrides=parse_overrides([r"layers/1/moe/experts/gate$=q8_g32_fp16",
                                                       r"experts/.*/up=bf16"]))
    got = banks(result)
    assert got["text/layers/1/moe/experts/gate"].format == "q8_g32_fp16"
    assert got["text/layers/0/moe/experts/gate"].format == "q4_g64_fp16"  # the id of layer 1 only
    up = got["text/layers/1/moe/experts/up"]
    assert up.format == "bf16" and any("requantized into bf16 (--tensor-type" in n for n in up.notes)
    ref = qwen3_moe.logical_parameters(qwen3_moe.config())
    name = "text/layers/1/moe/experts/3/up"
    with open_artifact(out) as art:  # the expert's values, at its own rows of the overridden bank
        values = logical_array(art, name, ref[name].shape)
    assert np.corrcoef(values.reshape(-1), ref[name].reshape(-1))[0, 1] > 0.999


def test_override_matching_some_experts_is_refused(moe, tmp_path):
    with pytest.raises(ConverterError, match="matches 1 of the 8 experts") as info:
        convert(moe, tmp_path / "d.ninfer", dry_run=True, format_overrides=parse_overrides([r"experts/3/down=bf16"]))
    assert info.value.rule == "override_bank_partial"


def test_staged_conversion_carries_overrides_same_bytes(dense, tmp_path):
    overrides = parse_overrides([r"text/layers/\d+/mlp/down=q8_g32_fp16"], output_tensor_type="bf16")
    here, staged = tmp_path / "here", tmp_path / "staged"
    here.mkdir()
    staged.mkdir()
    common = {"kind": "gguf", "recipe": "groupwise-int", "artifact_id": AID, "format_overrides": overrides}
    result = run_conversion(ConvertOptions(dense, here / "m.ninfer", **common))
    plan = tmp_path / "m.plan.json"
    run_conversion(ConvertOptions(dense, staged / "m.ninfer", plan_only=plan, **common))
    assert PlanFile.load(plan).request.conversion_args()["format_overrides"] == overrides
    job.encode(plan, workers=2)
    job.seal(plan)
    names = sorted(os.listdir(here))
    assert names == sorted(os.listdir(staged))
    assert all((here / n).read_bytes() == (staged / n).read_bytes() for n in names)
    formats = {o.id: getattr(o, "format", None) for o in result.objects}
    assert formats["text/output_head"] == "bf16" and formats["text/layers/0/mlp/down"] == "q8_g32_fp16"


def test_cli_plan_only_accepts_overrides_and_a_tampered_plan_is_refused(dense, tmp_path, capsys):
    plan = tmp_path / "p.json"
    rc = main(["gguf2ninfer", str(dense), str(tmp_path / "o.ninfer"), "--plan-only", str(plan), "--json",
               "--tensor-type", "mlp/down=q8_g32_fp16"])
    capsys.readouterr()
    assert rc == 0
    doc = json.loads(plan.read_text())
    assert doc["request"]["overrides"] == [{"format": "q8_g32_fp16", "flag": "--tensor-type mlp/down=q8_g32_fp16",
                                            "pattern": "mlp/down", "role": None}]
    doc["request"]["overrides"][0]["format"] = "q9_nope"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ConverterError, match="unknown format 'q9_nope'"):
        PlanFile.load(bad)
