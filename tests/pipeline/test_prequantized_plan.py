"""The planner's rules for prequantized sources (docs/recipes.md §Prequantized sources): nvfp4 divisors of
parents that stack kept members, the ``nvfp4`` recipe's fused parents on an NVFP4 checkpoint, FP8 static input
scales, and kept rows gathered from runs (their scales re-tiled for the destination rows)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.errors import RecipeError
from converters.mapping.recipes import load_recipe
from converters.pipeline.convert import ConvertOptions, convert
from converters.pipeline.planned import PlannedTensor
from converters.pipeline.produce import row_runs
from converters.scaleout import job
from converters.scaleout.run import run_conversion
from converters.sources import open_source
from ninfer_core import codecs, open_artifact
from tests.support.prequantized import FIXTURES, components, located, object_bytes, tiled

GROUP_RECIPE = """\
name: t-{key}
description: nvfp4 projections, with {a} and {b} stacked in one parent.
roles:
  "*": {{format: bf16}}
  attention.*: {{format: nvfp4}}
  mlp.*: {{format: nvfp4}}
groups:
  attention/{key}: {{members: [{a}, {b}], format: nvfp4}}
"""


def group_recipe(tmp_path, a: str, b: str) -> str:
    key = f"{a.split('.')[1]}_{b.split('.')[1]}"
    path = tmp_path / f"{key}.yaml"
    path.write_text(GROUP_RECIPE.format(key=key, a=a, b=b))
    return str(path)


def test_members_with_their_own_divisors_get_one_divisor_each(tmp_path):
    """query and output (equal rows) have different global scales: the parent keeps both, divisors = 2."""
    out = tmp_path / "qo.ninfer"
    result = convert(FIXTURES / "ct-nvfp4", out, recipe=group_recipe(tmp_path, "attention.query", "attention.output"),
                     workers=1)
    obj = next(o for o in result.objects if isinstance(o, PlannedTensor) and o.id.endswith("attention/query_output"))
    assert obj.divisors == 2 and obj.exactness == "bit-exact"
    assert any("keep their own source divisors" in n for n in obj.notes)
    comp = components("ct-nvfp4")
    with open_artifact(out) as art:
        data = np.frombuffer(object_bytes(art, obj.id), dtype=np.uint8)
        assert list(data[-8:].view("<f4")) == [comp[f"model.layers.0.self_attn.{m}_proj.weight_global_scale"][0]
                                              for m in ("q", "o")]
    assert verify(out, FIXTURES / "ct-nvfp4", sweep=True).result == "pass"


def test_members_of_unequal_rows_and_divisors_are_requantized(tmp_path):
    """key (128 rows) and output (256 rows) cannot share one divisor, nor have one each: requantized, noted."""
    out = tmp_path / "ko.ninfer"
    result = convert(FIXTURES / "ct-nvfp4", out, recipe=group_recipe(tmp_path, "attention.key", "attention.output"),
                     workers=1)
    obj = next(o for o in result.objects if isinstance(o, PlannedTensor) and o.id.endswith("attention/key_output"))
    assert obj.divisors == 1 and {p.method for p in obj.pieces} == {"encode"}
    assert any("cannot keep them: every member requantized" in n for n in obj.notes)
    assert result.summary()["prequantized"]["exactness"]["requantized"] == 1
    with open_artifact(out) as art:
        rec = art.provenance["objects"][obj.id]
        assert rec["exactness"] == "requantized" and "measured_error" in rec and "max_ulp" not in rec
    assert verify(out, FIXTURES / "ct-nvfp4", sweep=True).result == "pass"


@pytest.mark.parametrize("scheme", ["ct-nvfp4", "modelopt-nvfp4"])
def test_the_nvfp4_recipe_keeps_an_nvfp4_checkpoint_in_its_fused_parents(tmp_path, scheme):
    out = tmp_path / "n.ninfer"
    result = convert(FIXTURES / scheme, out, recipe="nvfp4", workers=1)
    fused = {o.id.rsplit("/", 1)[1]: o for o in result.objects if isinstance(o, PlannedTensor)
             and o.id.endswith(("query_key_value", "gate_up"))}
    assert set(fused) == {"query_key_value", "gate_up"}
    assert all(o.exactness == "bit-exact" and o.divisors == 1 for o in fused.values())  # one shared global scale
    assert verify(out, FIXTURES / scheme, sweep=True).result == "pass"


def test_a_static_fp8_input_scale_binds_its_reciprocal_with_allow_a8(tmp_path):
    out = tmp_path / "f.ninfer"
    convert(FIXTURES / "ct-fp8-tensor", out, recipe="prequantized", workers=1)
    comp = components("ct-fp8-tensor")
    with open_artifact(out) as art:
        divisors = np.asarray(art.object_array("text/activation_input_divisors")).reshape(-1)
        uses = [u for u in art.directory.to_json()["uses"] if "activation_input_divisor" in u.get("auxiliaries", {})]
        assert len(uses) == 7
        for use in uses:
            _, _, _, rec = located(art, _weight_of(art, use["parameter"]))
            module = _weight_of(art, use["parameter"]).removesuffix(".weight")
            i = use["auxiliaries"]["activation_input_divisor"]["parts"][0]["range"][0]
            assert use["activation_policy"] == "AllowA8"  # calibrated for 8-bit activations
            # input_scale multiplies the quantized activation: the divisor is its reciprocal
            assert divisors[i] == np.float32(1) / comp[f"{module}.input_scale"].astype(np.float32).reshape(-1)[0]


def _weight_of(art, parameter: str) -> str:
    for rec in art.provenance["objects"].values():
        for pc in rec.get("pieces", []):
            if pc["parameter"] == parameter:
                return pc["source"]
    raise KeyError(parameter)


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8_e4m3fn_row_bf16"])
@pytest.mark.parametrize("runs", [[(256, 384), (0, 128)], [(64, 128), (320, 384), (0, 64), (448, 512)],
                                  [(300, 301), (5, 258), (511, 512), (2, 3)]])
def test_kept_rows_gathered_in_runs_are_the_rows_of_one_object(fmt, runs):
    """Rows moved in runs of any length (whole tiles, half tiles, single rows): every row keeps its codes and its
    scales — nvfp4's block scales re-tiled for the destination rows (docs/prequantized.md §Row gathers)."""
    scheme = "ct-nvfp4" if fmt == "nvfp4" else "ct-fp8-channel"
    src = open_source(FIXTURES / scheme)
    qw = src.quantized("model.layers.0.mlp.gate_proj.weight")
    n, k = qw.shape
    ids = np.concatenate([np.arange(r0, r1) for r0, r1 in runs])
    assert row_runs(ids) == runs and len(ids) == 256
    layout = codecs.FORMATS[fmt].layout
    gathered = qw.gather(fmt, runs)
    assert codecs.check(fmt, layout, (256, k), gathered) == []
    whole = codecs.decode(fmt, layout, (n, k), qw.transcode(fmt, 0, n))
    assert np.array_equal(codecs.decode(fmt, layout, (256, k), gathered), whole[ids])
    if fmt == "nvfp4":  # the same bytes as a whole object made of those rows: codes, tiles, the one divisor
        comp = components(scheme)
        module = "model.layers.0.mlp.gate_proj"
        data = np.frombuffer(gathered, dtype=np.uint8)
        c, s = 256 * k // 2, 256 * k // 16
        assert data[:c].tobytes() == comp[f"{module}.weight_packed"][ids].tobytes()
        assert data[c:c + s].tobytes() == tiled(comp[f"{module}.weight_scale"].view(np.uint8)[ids]).tobytes()
        assert data[c + s:].view("<f4")[0] == comp[f"{module}.weight_global_scale"][0]


def test_recipe_fields_are_validated(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\ndescription: d\nprequantized_fallback: q8_g32_fp16\nroles:\n  '*': {format: bf16}\n")
    with pytest.raises(RecipeError, match="applies to prequantized: keep"):
        load_recipe(bad)
    bad.write_text("name: b\ndescription: d\nprequantized: keep\nprequantized_fallback: {ct_int8: q8_g32_fp16}\n"
                   "roles:\n  '*': {format: bf16}\n")
    with pytest.raises(RecipeError, match="not a source kind"):
        load_recipe(bad)
    bad.write_text("name: b\ndescription: d\nroles:\n  '*': {format: bf16, activation_input_divisor: sauce}\n")
    with pytest.raises(RecipeError, match="or 'source'"):
        load_recipe(bad)
    r = load_recipe("prequantized")
    assert r.prequantized == "keep" and r.fallback_for("CT_INT8") == "q8_g32_fp16"
    assert r.fallback_for("FP8_BLOCK") == "fp8_e4m3fn_row_bf16" and r.role("mlp.up").activation_input_divisor == "source"


@pytest.mark.parametrize("scheme,recipe", [("ct-nvfp4-moe", "prequantized"), ("ct-fp8-block", "prequantized")])
def test_a_staged_conversion_writes_the_same_bytes(tmp_path, scheme, recipe):
    """plan → encode → seal (scale-out) lays out and writes what one process does: provenance's prequantized
    records (max_ulp, divisors) are known when planning, and requantized ones reserve their measured error."""
    here, staged = tmp_path / "here", tmp_path / "staged"
    here.mkdir()
    staged.mkdir()
    common = {"kind": "hf", "recipe": recipe, "artifact_id": "00112233445566778899aabbccddeeff", "workers": 1}
    run_conversion(ConvertOptions(FIXTURES / scheme, here / "m.ninfer", **common))
    plan = tmp_path / "m.plan.json"
    run_conversion(ConvertOptions(FIXTURES / scheme, staged / "m.ninfer", plan_only=plan, **common))
    job.encode(plan, workers=1)
    job.seal(plan)
    names = sorted(os.listdir(here))
    assert names == sorted(os.listdir(staged))
    assert all((here / n).read_bytes() == (staged / n).read_bytes() for n in names)
