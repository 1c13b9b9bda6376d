"""ModelOpt FP8 (one float32 scale per tensor) keeps its codes in ``fp8_e4m3fn_row_bf16`` under ``exact`` and
``prequantized`` wherever that is value-exact by ModelOpt's own rule (docs/prequantized.md §ModelOpt):
``FP8QTensor.dequantize`` computes ``out(out(code) · out(weight_scale))``, ``out`` the model dtype, so the scale it
applies is ``weight_scale`` rounded to the model dtype. A bfloat16 model's is a bfloat16 value: every row of the
object carries it (``modelopt-fp8``). A float16 model's is one only by chance (``modelopt-fp8-fp16``, ModelOpt's own
export of a float16 model: none of its 14 is), so it is requantized with the reason noted — or kept where the float16
scale happens to be a bfloat16 value (a copy with one scale set so)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tests.support.prequantized import FIXTURES, components, located, object_bytes, variant, weights

ROW = "fp8_e4m3fn_row_bf16"


def fp8_row_planes(art, oid: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes ``[N, K]``, per-row scales as float32) of an ``fp8_e4m3fn_row_bf16`` object (layouts: codes, then
    one bfloat16 per row)."""
    n, k = art.object(oid).shape
    data = np.frombuffer(object_bytes(art, oid), dtype=np.uint8)
    scales = (data[n * k:n * k + 2 * n].view("<u2").astype(np.uint32) << 16).view("<f4")
    return data[:n * k].reshape(n, k), scales


@pytest.mark.parametrize("recipe", ["exact", "prequantized"])
def test_a_bfloat16_modelopt_fp8_keeps_its_codes_with_the_bf16_rounded_scale_on_every_row(tmp_path, recipe):
    out = tmp_path / "a.ninfer"
    summary = convert(FIXTURES / "modelopt-fp8", out, recipe=recipe, workers=1).summary()
    assert summary["prequantized"] == {"objects": 7, "kinds": ["MO_FP8"], "exactness": {"value-exact": 7}, "max_ulp": 0}
    comp = components("modelopt-fp8")
    rounded = 0  # scales that are not bfloat16 values themselves: kept because ModelOpt applies them rounded
    with open_artifact(out) as art:
        for name in weights("modelopt-fp8"):
            oid, r0, r1, rec = located(art, name)
            assert art.object(oid).format == ROW and rec["exactness"] == "value-exact" and rec["max_ulp"] == 0
            codes, scales = fp8_row_planes(art, oid)
            module = name.removesuffix(".weight")
            assert codes[r0:r1].tobytes() == comp[f"{module}.weight"].tobytes()
            s = comp[f"{module}.weight_scale"].astype(np.float32).reshape(())
            rounded += int(s != s.astype(ml_dtypes.bfloat16).astype(np.float32))
            assert (scales[r0:r1] == s.astype(ml_dtypes.bfloat16).astype(np.float32)).all()
    assert rounded == 6
    report = verify(out, FIXTURES / "modelopt-fp8", sweep=True)
    assert report.result == "pass" and report.gate(4).evidence["library_rule"]["max_ulp"] == 0


def test_a_float16_modelopt_fp8_is_requantized_where_its_float16_scale_is_not_a_bfloat16_value(tmp_path):
    out = tmp_path / "a.ninfer"
    result = convert(FIXTURES / "modelopt-fp8-fp16", out, recipe="prequantized", workers=1)
    summary = result.summary()
    assert summary["prequantized"]["exactness"] == {"requantized": 14}
    notes = [n for n in summary["notes"] if "MO_FP8" in n]
    assert len(notes) == 14 and all("(ModelOpt applies it rounded to float16) is not a bfloat16 value" in n
                                    and n.endswith(f"requantized into {ROW}") for n in notes)
    out = tmp_path / "b.ninfer"  # exact: the library's float16 values, widened
    assert convert(FIXTURES / "modelopt-fp8-fp16", out, recipe="exact", workers=1).summary()["prequantized"][
        "exactness"] == {"value-exact": 14}
    with open_artifact(out) as art:
        assert {art.object(located(art, n)[0]).format for n in weights("modelopt-fp8-fp16")} == {"fp32"}


@pytest.mark.parametrize("recipe", ["exact", "prequantized"])
def test_a_float16_scale_that_is_a_bfloat16_value_is_kept(tmp_path, recipe):
    """``weight_scale`` = b + 1e-9 with b a bfloat16 value: not a bfloat16 value itself, but ModelOpt applies
    fp16(weight_scale) = b, so the codes keep with b on every row and decode to ModelOpt's float16 values."""
    module = "model.layers.0.mlp.gate_proj"
    b = np.float32(0.00103759765625)  # 2^-10 * 1.0625: bfloat16 and float16 alike
    s = np.float32(b + np.float32(1e-9))
    assert s != b and np.float32(np.float16(s)) == b

    def edit(ts):
        dtype, shape, _ = ts[f"{module}.weight_scale"]
        ts[f"{module}.weight_scale"] = (dtype, shape, np.asarray(s, dtype="<f4").tobytes())

    d = variant(tmp_path, "modelopt-fp8-fp16", tensors=edit)
    out = tmp_path / "a.ninfer"
    convert(d, out, recipe=recipe, workers=1)
    codes = components("modelopt-fp8-fp16")[f"{module}.weight"]
    with open_artifact(out) as art:
        oid, r0, r1, rec = located(art, f"{module}.weight")
        assert art.object(oid).format == ROW and rec["exactness"] == "value-exact" and rec["max_ulp"] == 0
        got_codes, scales = fp8_row_planes(art, oid)
        assert got_codes[r0:r1].tobytes() == codes.tobytes() and (scales[r0:r1] == b).all()
        library = (codes.view(ml_dtypes.float8_e4m3fn).astype(np.float16) * np.float16(s)).astype(np.float32)
        stored = np.asarray(art.object_array(oid))[r0:r1]
        assert np.array_equal(stored.astype(np.float16).astype(np.float32), library)
    assert verify(out, d, sweep=True).result == "pass"
