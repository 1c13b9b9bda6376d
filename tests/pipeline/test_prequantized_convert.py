"""Prequantized checkpoints converted with ``exact`` and ``prequantized`` (docs/recipes.md §Prequantized sources).

For every fixture scheme (``tests/fixtures/prequantized/``, made with the real libraries): the artifact's values,
rounded to the library's output dtype, hash to the library's own dequantization (``reference.json``) — or lie
within the ``max_ulp`` provenance records; kept nvfp4 / fp8 objects hold the source's codes, block scales (in the
128x4 tiles) and divisors byte for byte, read here straight from ``model.safetensors``; ``verify --sweep``
passes; provenance and the summary label each object.
"""

from __future__ import annotations

import json
import re

import ml_dtypes
import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.cli import main
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tests.support.prequantized import (
    FIXTURES,
    LIBRARY_DTYPES,
    assembled,
    components,
    library_bytes,
    located,
    object_bytes,
    same_divisor,
    schemes,
    sha256,
    source_rows,
    tiled,
    weights,
)

SCHEMES = schemes()
RECIPES = ("exact", "prequantized")
LABELS = ("bit-exact", "value-exact", "requantized")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """(scheme, recipe) → (artifact path, summary), converted once per module."""
    cache = {}

    def get(scheme: str, recipe: str):
        if (scheme, recipe) not in cache:
            out = tmp_path_factory.mktemp(f"{scheme}-{recipe}") / "a.ninfer"
            result = convert(FIXTURES / scheme, out, recipe=recipe, workers=1)
            cache[scheme, recipe] = (out, result.summary())
        return cache[scheme, recipe]

    return get


def ordinal(x: np.ndarray, dtype: str) -> np.ndarray:
    bits = np.asarray(x, dtype=np.float32).astype(LIBRARY_DTYPES[dtype])
    bits = bits.view(f"<i{bits.dtype.itemsize}").astype(np.int64)
    mag = bits & ((1 << (8 * LIBRARY_DTYPES[dtype].itemsize - 1)) - 1)
    return np.where(bits < 0, -mag, mag)


def test_the_core_fixtures_are_present():
    assert {"ct-nvfp4", "ct-nvfp4a16", "ct-fp8-channel", "ct-fp8-tensor", "ct-fp8-block", "ct-w4a16-g128",
            "ct-nvfp4-moe"} <= set(SCHEMES)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("scheme", SCHEMES)
def test_values_equal_the_library_dequantization_and_verify_passes(converted, scheme, recipe):
    path, summary = converted(scheme, recipe)
    refs = weights(scheme)
    kept = 0
    with open_artifact(path) as art:
        for name, ref in refs.items():
            # a fused projection (in_proj_qkv, a gated q_proj) feeds several parameters: put it back together
            got, parts = assembled(art, name, ref["shape"][0])
            assert list(got.shape) == ref["shape"] and not np.isnan(got).any(), name
            kept_rows, n = np.zeros(got.shape[0], dtype=bool), 0
            for rec, rows in parts:
                assert rec["exactness"] in LABELS and isinstance(rec["value_relation"], str)
                scheme_rec = rec["source_quantization"]
                first = scheme_rec[0] if isinstance(scheme_rec, list) else scheme_rec
                assert first["library_dtype"] == ref["dtype"]
                if rec["exactness"] == "requantized":
                    assert "max_ulp" not in rec and rec["measured_error"]["cosine"] > 0.99
                    continue
                kept_rows[rows], n = True, max(n, rec["max_ulp"])
            if not kept_rows.any():
                continue
            kept += 1
            if n == 0 and kept_rows.all():  # the library's exact bytes (ModelOpt decodes the code -0 as +0.0)
                assert ref["sha256"] in (sha256(library_bytes(got, ref["dtype"])),
                                         sha256(library_bytes(got + np.float32(0), ref["dtype"]))), name
            idx = np.array([i for i, _ in ref["samples"]])
            want = np.array([v for _, v in ref["samples"]], dtype=np.float32)
            on = kept_rows[idx // got.shape[1]]  # samples in rows a kept piece holds
            dist = np.abs(ordinal(got.reshape(-1)[idx[on]], ref["dtype"]) - ordinal(want[on], ref["dtype"]))
            assert on.any() and int(dist.max()) <= n, name
    q = summary["prequantized"]
    assert sum(q["exactness"].values()) == q["objects"] and q["exactness"].get("bit-exact", 0) + q["exactness"].get(
        "value-exact", 0) >= (1 if kept else 0)
    report = verify(path, FIXTURES / scheme, sweep=True)
    assert [g.status for g in report.gates] == ["pass"] * 7, [(g.number, [str(i) for i in g.issues][:2])
                                                               for g in report.gates if g.status != "pass"]
    assert report.result == "pass"
    if kept:  # gate 4 compared the kept parameters by the library's rule, within the recorded bound
        rule = report.gate(4).evidence["library_rule"]
        assert rule["parameters"] >= kept and rule["max_ulp"] == q["max_ulp"] and rule["dtypes"] == [ref["dtype"]]


NVFP4_SCHEMES = [s for s in SCHEMES if "nvfp4" in s]


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("scheme", NVFP4_SCHEMES)
def test_nvfp4_codes_block_scales_and_divisors_are_the_sources(converted, scheme, recipe):
    path, _ = converted(scheme, recipe)
    comp = components(scheme)
    with open_artifact(path) as art:
        for name, ref in weights(scheme).items():
            module = name.removesuffix(".weight")
            pieces = [(oid, pc) for oid, rec in art.provenance["objects"].items() for pc in rec.get("pieces", [])
                      if pc["source"] == name]
            assert pieces, name
            for oid, pc in pieces:
                r0, r1 = pc["rows"]
                rows = source_rows(pc.get("transforms", []), ref["shape"][0])  # a fused projection's part
                o = art.object(oid)
                if len(rows) % 128:  # not whole 128-row tiles (Qwen3.5's 2-row in_proj_a / b): no nvfp4 form
                    assert o.format != "nvfp4", (name, oid)
                    continue
                assert o.format == "nvfp4" and art.provenance["objects"][oid]["exactness"] == "bit-exact", oid
                n, k = o.shape
                data = np.frombuffer(object_bytes(art, oid), dtype=np.uint8)
                codes, scales = data[:n * k // 2], data[n * k // 2:n * k // 2 + n * k // 16]
                divisors = data[n * k // 2 + n * k // 16:].view("<f4")
                packed = comp.get(f"{module}.weight_packed", comp.get(f"{module}.weight"))
                assert codes[r0 * k // 2:r1 * k // 2].tobytes() == packed[rows].tobytes()
                member = tiled(comp[f"{module}.weight_scale"].view(np.uint8)[rows])
                assert scales[r0 * k // 16:r1 * k // 16].tobytes() == member.tobytes()  # the piece's own tiles
                same_divisor(comp, module, divisors[r0 // (n // o.divisors)])


FP8_ROW_SCHEMES = [s for s in SCHEMES if s in ("ct-fp8-channel", "ct-fp8-tensor", "modelopt-fp8")]


@pytest.mark.parametrize("scheme", FP8_ROW_SCHEMES)
def test_fp8_codes_are_the_sources_and_scales_repeat_per_row(converted, scheme):
    path, _ = converted(scheme, "prequantized")
    comp = components(scheme)
    with open_artifact(path) as art:
        for name in weights(scheme):
            oid, r0, r1, rec = located(art, name)
            o = art.object(oid)
            assert o.format == "fp8_e4m3fn_row_bf16" and rec["exactness"] in ("bit-exact", "value-exact")
            n, k = o.shape
            data = np.frombuffer(object_bytes(art, oid), dtype=np.uint8)
            assert data[r0 * k:r1 * k].tobytes() == comp[name].view(np.uint8).tobytes()
            row_scales = data[n * k:n * k + 2 * n].view(ml_dtypes.bfloat16).astype(np.float32)[r0:r1]
            source = comp[name.removesuffix(".weight") + ".weight_scale"].astype(np.float32).reshape(-1)
            # the scale as the row's bf16 multiplier: exact when bf16 holds it, else rounded (and not bit-exact)
            rounded = source.astype(ml_dtypes.bfloat16).astype(np.float32)
            assert np.array_equal(row_scales, np.broadcast_to(rounded, row_scales.shape))
            if not np.array_equal(rounded, source):
                assert rec["exactness"] != "bit-exact"


def test_static_input_scales_become_activation_divisors_with_allow_a4(converted):
    path, _ = converted("ct-nvfp4", "prequantized")
    comp = components("ct-nvfp4")
    with open_artifact(path) as art:
        d = art.directory.to_json()
        divisors = np.asarray(art.object_array("text/activation_input_divisors")).reshape(-1)
        checked = 0
        for use in d["uses"]:
            try:
                _, _, _, rec = located(art, _source_of(art, use["parameter"]))
            except KeyError:
                assert use["activation_policy"] == "AllowA8"  # no static input scale: the recipe's policy
                continue
            module = _source_of(art, use["parameter"]).removesuffix(".weight")
            part = use["auxiliaries"]["activation_input_divisor"]["parts"][0]
            assert use["activation_policy"] == "AllowA4"
            assert part["object"] == "text/activation_input_divisors"
            # compressed-tensors quantizes x / (amax / (448·6 / input_global_scale)): the global scale divides
            assert divisors[part["range"][0]] == comp[f"{module}.input_global_scale"].reshape(-1)[0]
            assert rec["source_quantization"]["activation_divisor"] == divisors[part["range"][0]]
            checked += 1
        assert checked == 7


def _source_of(art, parameter: str) -> str:
    for rec in art.provenance["objects"].values():
        for pc in rec.get("pieces", []):
            if pc["parameter"] == parameter and pc.get("source_type", "").endswith("NVFP4"):
                return pc["source"]
    raise KeyError(parameter)


#: NVFP4 checkpoints of every MoE architecture (Qwen3-MoE by llm-compressor and ModelOpt, Qwen3.5-MoE, Qwen3-Next,
#: Qwen3-VL-MoE): each library wrote the experts per module (tests/fixtures/prequantized/README.md §Expert layout);
#: and ModelOpt's fused 3-D expert layout (docs/prequantized.md §Fused expert tensors)
NVFP4_MOE_SCHEMES = [s for s in NVFP4_SCHEMES if s.endswith(("moe", "qwen3next", "moe-fused"))]


def test_every_moe_architecture_has_an_nvfp4_fixture():
    assert {"ct-nvfp4-moe", "modelopt-nvfp4-moe", "modelopt-nvfp4-moe-fused", "ct-nvfp4-qwen35moe",
            "ct-nvfp4-qwen3next", "ct-nvfp4-qwen3vlmoe"} <= set(NVFP4_MOE_SCHEMES)


@pytest.mark.parametrize("scheme", NVFP4_MOE_SCHEMES)
def test_moe_expert_banks_keep_one_source_divisor_per_expert(converted, scheme):
    comp = components(scheme)
    layers = {int(re.search(r"layers\.(\d+)\.mlp\.experts\.", n).group(1)) for n in weights(scheme) if ".experts." in n}
    for recipe in RECIPES:
        path, _ = converted(scheme, recipe)
        with open_artifact(path) as art:
            banks = [o for o in art.objects if o.kind == "tensor" and "/moe/experts/" in o.id and o.format == "nvfp4"]
            assert len(banks) == 3 * len(layers), [o.id for o in art.objects]
            for o in banks:
                rec = art.provenance["objects"][o.id]
                assert o.divisors == 4 and rec["exactness"] == "bit-exact" and len(rec["pieces"]) == 4
                data = np.frombuffer(object_bytes(art, o.id), dtype=np.uint8)
                divisors = data[-4 * o.divisors:].view("<f4")
                for e, pc in enumerate(rec["pieces"]):
                    module = pc["source"].removesuffix(".weight")
                    assert f".experts.{e}." in module
                    same_divisor(comp, module, divisors[e])


def test_block_fp8_moe_experts_are_kept_in_their_banks(converted):
    """Qwen3-30B-A3B-FP8's per-expert layout: exact keeps every bank value-exact (bf16: the block grid has no row
    form), except the one whose experts are a single 128-column block wide (down_proj, K = 128): its block scale
    is constant along each row, so the codes and scales go into fp8_e4m3fn_row_bf16 bit for bit."""
    path, summary = converted("qwen-fp8-block-moe", "exact")
    comp = components("qwen-fp8-block-moe")
    with open_artifact(path) as art:
        banks = {o.id.rsplit("/", 1)[1]: o for o in art.objects if "/moe/experts/" in o.id}
        assert set(banks) == {"gate", "up", "down"}
        assert banks["gate"].format == banks["up"].format == "bf16" and banks["down"].format == "fp8_e4m3fn_row_bf16"
        down = banks["down"]
        n, k = down.shape
        data = np.frombuffer(object_bytes(art, down.id), dtype=np.uint8)
        rec = art.provenance["objects"][down.id]
        assert rec["exactness"] == "bit-exact" and len(rec["pieces"]) == 4
        for e, pc in enumerate(rec["pieces"]):
            r0, r1 = pc["rows"]
            assert data[r0 * k:r1 * k].tobytes() == comp[pc["source"]].view(np.uint8).tobytes()
            grid = comp[pc["source"].removesuffix(".weight") + ".weight_scale_inv"]  # [N/128, 1]
            row_scales = data[n * k + 2 * r0:n * k + 2 * r1].view(ml_dtypes.bfloat16)
            assert np.array_equal(row_scales, np.repeat(grid[:, 0], 128)), e
    assert summary["prequantized"]["exactness"] == {"value-exact": 6, "bit-exact": 1}


def test_block_fp8_is_requantized_by_the_prequantized_recipe_and_kept_value_exact_by_exact(converted):
    _, kept = converted("ct-fp8-block", "exact")
    path, summary = converted("ct-fp8-block", "prequantized")
    assert kept["prequantized"]["exactness"] == {"value-exact": 7}
    assert summary["prequantized"]["exactness"] == {"requantized": 7} and summary["prequantized"]["max_ulp"] is None
    with open_artifact(path) as art:
        for name in weights("ct-fp8-block"):
            oid, _, _, rec = located(art, name)
            assert art.object(oid).format == "fp8_e4m3fn_row_bf16"
            assert rec["source_quantization"]["kind"] == "CT_FP8_BLOCK" and "requantized" in rec["value_relation"]
    assert any("no quantized exact form" in n for n in summary["notes"])


def test_summary_json_and_table_show_the_labels(tmp_path, capsys):
    rc = main(["st2ninfer", str(FIXTURES / "ct-nvfp4"), str(tmp_path / "a.ninfer"), "--recipe", "prequantized",
               "--json", "--no-verify"])
    s = json.loads(capsys.readouterr().out)
    assert rc == 0 and s["prequantized"] == {"objects": 7, "kinds": ["CT_NVFP4"], "exactness": {"bit-exact": 7},
                                             "max_ulp": 0}
    rc = main(["st2ninfer", str(FIXTURES / "ct-w4a16-g128"), str(tmp_path / "b.ninfer"), "--recipe", "prequantized",
               "--no-verify"])
    out = capsys.readouterr().out
    assert rc == 0 and "prequantized source" in out and "value-exact" in out and "CT_INT4" in out
