"""Truncated or inconsistent prequantized checkpoints: one typed error naming the file, the field and the
rule (docs/prequantized.md §Detection, §Component tensors), never a traceback or a silent guess.

Each case copies a library-written fixture and changes one thing (a tensor's shape, a missing component,
a config field) through a minimal safetensors writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from converters.cli import main
from converters.errors import SourceFormatError
from converters.sources import open_hf_dir, open_safetensors
from ninfer_core.errors import EncodingError
from tests.support.prequantized import variant
from tests.support.sources import write_safetensors

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "prequantized"
MOD = "model.layers.0.self_attn.o_proj"


def refused(d: Path, rule: str, field: str) -> SourceFormatError:
    with pytest.raises(SourceFormatError) as exc:
        open_hf_dir(d)
    e = exc.value
    assert e.rule == rule, e
    assert e.file and Path(e.file).parent == d, e
    assert field in (e.json_path or ""), e
    assert e.section and e.section.startswith("docs/prequantized.md §"), e
    return e


def test_wrong_block_scale_shape(tmp_path):
    def edit(ts):
        dtype, (n, g), data = ts[f"{MOD}.weight_scale"]
        ts[f"{MOD}.weight_scale"] = (dtype, [n // 2, g * 2], data)

    e = refused(variant(tmp_path, "ct-nvfp4", tensors=edit), "prequantized_component_shape", f"{MOD}.weight_scale.shape")
    assert "expected [256, 16]" in e.message


def test_missing_global_scale(tmp_path):
    d = variant(tmp_path, "ct-nvfp4", tensors=lambda ts: ts.pop(f"{MOD}.weight_global_scale"))
    refused(d, "prequantized_component_missing", f"{MOD}.weight_global_scale")


def test_truncated_codes(tmp_path):
    def edit(ts):
        dtype, (n, h), data = ts[f"{MOD}.weight_packed"]
        ts[f"{MOD}.weight_packed"] = (dtype, [n - 128, h], data[: (n - 128) * h])

    refused(variant(tmp_path, "ct-nvfp4", tensors=edit), "prequantized_component_shape", f"{MOD}.weight_scale.shape")


def test_global_scale_not_positive(tmp_path):
    def edit(ts):
        ts[f"{MOD}.weight_global_scale"] = ("F32", [1], np.float32(-1).tobytes())

    refused(variant(tmp_path, "ct-nvfp4", tensors=edit), "prequantized_scale_value", f"{MOD}.weight_global_scale")


def test_packed_size_differs_from_weight_shape(tmp_path):
    def edit(ts):
        ts[f"{MOD}.weight_shape"] = ("I64", [2], np.array([256, 512], dtype="<i8").tobytes())

    refused(variant(tmp_path, "ct-w4a16-g128", tensors=edit), "prequantized_packed_size", f"{MOD}.weight_packed.shape")


def test_zero_points_missing_for_an_asymmetric_scheme(tmp_path):
    d = variant(tmp_path, "ct-w4a16-asym-g128", tensors=lambda ts: ts.pop(f"{MOD}.weight_zero_point"))
    refused(d, "prequantized_component_missing", f"{MOD}.weight_zero_point")


def test_fp8_channel_scale_of_the_wrong_length(tmp_path):
    def edit(ts):
        dtype, (n, one), data = ts[f"{MOD}.weight_scale"]
        ts[f"{MOD}.weight_scale"] = (dtype, [n // 2, 2], data)

    refused(variant(tmp_path, "ct-fp8-channel", tensors=edit), "prequantized_component_shape", f"{MOD}.weight_scale.shape")


def _group(cfg):
    return cfg["quantization_config"]["config_groups"]["group_0"]


@pytest.mark.parametrize(("scheme", "change", "rule", "field"), [
    ("ct-nvfp4", lambda c: _group(c).update(format="marlin-24"), "prequantized_format", "group_0.format"),
    ("ct-fp8-channel", lambda c: _group(c)["weights"].update(strategy="token"), "prequantized_strategy",
     "group_0.weights.strategy"),
    ("ct-fp8-channel", lambda c: _group(c)["weights"].update(strategy=["channel"]), "prequantized_strategy",
     "group_0.weights.strategy"),
    ("modelopt-nvfp4", lambda c: c["quantization_config"].update(quant_algo=["NVFP4"]), "prequantized_quant_algo",
     "quant_algo"),
    ("ct-w4a16-g128", lambda c: _group(c)["weights"].update(actorder="group"), "prequantized_actorder",
     "group_0.weights.actorder"),
    ("ct-w4a16-g128", lambda c: _group(c)["weights"].update(actorder="dynamic"), "prequantized_actorder",
     "group_0.weights.actorder"),
    ("ct-w4a16-g128", lambda c: _group(c)["weights"].update(num_bits=2), "prequantized_scheme", "group_0.weights"),
    ("ct-w4a16-g128", lambda c: _group(c)["weights"].update(dynamic=True), "prequantized_dynamic", "weights.dynamic"),
    ("ct-nvfp4", lambda c: c["quantization_config"].update(quantization_status="frozen"), "prequantized_status",
     "quantization_status"),
    ("ct-nvfp4", lambda c: c["quantization_config"].update(transform_config={"t": {}}), "prequantized_unsupported",
     "transform_config"),
    ("ct-nvfp4", lambda c: c["quantization_config"].update(quant_method="gptq"), "prequantized_quant_method",
     "quant_method"),
    ("ct-nvfp4", lambda c: c["quantization_config"].update(ignore=["lm_head", "re:.*o_proj"]),
     "prequantized_module_scheme", MOD),
    ("ct-nvfp4", lambda c: c["quantization_config"].update(ignore=["lm_head", "re:(.*a+)+$"]),
     "prequantized_config_pattern", "ignore[1]"),
    ("ct-nvfp4", lambda c: c["quantization_config"].update(ignore=["re:lm_head("]), "prequantized_config_pattern",
     "ignore[0]"),
])
def test_unsupported_configuration(tmp_path, scheme, change, rule, field):
    refused(variant(tmp_path, scheme, config=change), rule, field)


def test_modelopt_unknown_quant_algo(tmp_path):
    def cfg(c):
        del c["quantization_config"]

    def side(h):
        h["quantization"]["quant_algo"] = "W4A8_AWQ"

    e = refused(variant(tmp_path, "modelopt-nvfp4", config=cfg, side=side), "prequantized_quant_algo", "quant_algo")
    assert e.file.endswith("hf_quant_config.json")


def test_nan_block_scale_is_not_an_exact_nvfp4_source(tmp_path):
    def edit(ts):
        dtype, shape, data = ts[f"{MOD}.weight_scale"]
        b = bytearray(data)
        b[300] = 0x7F  # row 18, block 12
        ts[f"{MOD}.weight_scale"] = (dtype, shape, bytes(b))

    with open_hf_dir(variant(tmp_path, "ct-nvfp4", tensors=edit)) as src:
        qw = src.quantized(f"{MOD}.weight")
        assert "nvfp4" not in qw.exact_targets()
        with pytest.raises(EncodingError) as exc:
            qw.transcode("nvfp4", 0, 128)
        assert exc.value.rule == "no_exact_transcode" and MOD in str(exc.value)
        assert np.isnan(qw.dequantize(18, 19)[0, 12 * 16])  # the library's value: NaN, reported, not hidden


def test_rows_outside_the_tensor(tmp_path):
    with open_hf_dir(ROOT / "ct-nvfp4") as src:
        qw = src.quantized(f"{MOD}.weight")
        with pytest.raises(EncodingError) as exc:
            qw.dequantize(200, 300)
        assert exc.value.rule == "row_range" and MOD in str(exc.value)
        with pytest.raises(EncodingError) as exc:
            qw.transcode("nvfp4", 64, 128)  # 64 rows: not a whole 128-row tile (where they start does not matter)
        assert exc.value.rule == "nvfp4_rows"
        with pytest.raises(EncodingError) as exc:
            qw.gather("nvfp4", [(0, 32), (64, 96), (100, 132)])
        assert exc.value.rule == "nvfp4_rows" and "96 rows" in str(exc.value)


def test_cli_reports_one_line(tmp_path, capsys):
    d = variant(tmp_path, "ct-nvfp4", tensors=lambda ts: ts.pop(f"{MOD}.weight_global_scale"))
    rc = main(["st2ninfer", str(d), str(tmp_path / "out" / "m.ninfer"), "--dry-run"])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    assert "prequantized_component_missing" in err and f"{MOD}.weight_global_scale" in err
    assert not (tmp_path / "out" / "m.ninfer").exists()


@pytest.mark.parametrize("scheme", ["ct-nvfp4", "ct-w4a16-asym-g128", "modelopt-fp8"])
def test_convert_check_transcodes_prequantized_weights(scheme, capsys):
    """``convert check`` (docs/ternary.md §5) on a prequantized source: CHECK 2 transcodes each role's weight into
    its first exact target and decodes it within max_ulp of the library (docs/prequantized.md §Ulp distance)."""
    rc = main(["check", str(ROOT / scheme), "--recipe", "exact", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["result"] == "OK"
    quantized = [s for s in out["check2"]["samples"] if s["type"].startswith(("CT_", "MO_"))]
    assert quantized and all(s["decode_equal"] is True and s["verdict"] == "OK" for s in quantized)


def test_components_split_across_shards(tmp_path):
    """A sharded checkpoint may put a module's components in different shards: each is read from its own."""
    d = tmp_path / "sharded"
    shutil.copytree(ROOT / "ct-nvfp4", d)
    (d / "model.safetensors").unlink()
    with open_safetensors(ROOT / "ct-nvfp4" / "model.safetensors") as s:
        ts = {n: (t.dtype, list(t.shape), bytes(s.raw(n))) for n, t in s.tensors.items()}
    names = sorted(ts)
    shards = {"model-00001-of-00002.safetensors": names[0::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, members in shards.items():
        write_safetensors(d / shard, {n: ts[n] for n in members})
    (d / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: shard for shard, members in shards.items() for n in members}}))
    with open_hf_dir(d) as src, open_hf_dir(ROOT / "ct-nvfp4") as ref:
        qw = src.quantized(f"{MOD}.weight")
        assert len({t.file.name for t in qw.parts.values()}) == 2
        assert set(src.quantized_weights) == set(ref.quantized_weights)
        np.testing.assert_array_equal(src.array(f"{MOD}.weight"), ref.array(f"{MOD}.weight"))
        np.testing.assert_array_equal(qw.transcode("nvfp4", 0, 256), ref.quantized(f"{MOD}.weight").transcode("nvfp4", 0, 256))


def _kv_scales(ts):
    for r in ("k_scale", "v_scale"):
        ts[f"model.layers.0.self_attn.{r}"] = ("F32", [], np.float32(0.1).tobytes())


def test_kv_cache_scales_dropped_only_when_declared(tmp_path, capsys):
    """KV-cache scales are dropped (and listed) when the configuration declares KV-cache quantization; without
    that declaration they stay ordinary tensors, which no mapping consumes (a typed refusal)."""
    kv = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
    d = variant(tmp_path / "a", "ct-nvfp4", tensors=_kv_scales,
                config=lambda c: c["quantization_config"].update(kv_cache_scheme=kv))
    with open_hf_dir(d) as src:
        q = src.quantization.describe()
        assert q["dropped"] == ["model.layers.0.self_attn.k_scale", "model.layers.0.self_attn.v_scale"]
        assert not any(n.endswith(("k_scale", "v_scale")) for n in src.tensors)
    assert main(["st2ninfer", str(d), str(tmp_path / "a" / "o.ninfer"), "--dry-run"]) == 0
    d = variant(tmp_path / "b", "ct-nvfp4", tensors=_kv_scales)
    assert main(["st2ninfer", str(d), str(tmp_path / "b" / "o.ninfer"), "--dry-run"]) != 0
    assert "unconsumed_tensors" in capsys.readouterr().err


def test_int_quantized_reads_unpacked_int8(tmp_path):
    """``int-quantized`` (llm-compressor's W8A8) stores the same int8 codes unpacked (``weight`` I8) and
    dequantizes by the same rule as ``pack-quantized``: the W8A16 fixture rewritten that way gives the library's
    recorded values bit for bit."""
    ref = json.loads((ROOT / "ct-w8a16-channel" / "reference.json").read_text())

    def edit(ts):
        for name in [n for n in ts if n.endswith(".weight_packed")]:
            module = name.rsplit(".", 1)[0]
            _, (n, words), data = ts.pop(name)
            u = np.frombuffer(data, dtype=np.uint8).reshape(n, words * 4)
            ts[f"{module}.weight"] = ("I8", [n, words * 4], (u.astype(np.int16) - 128).astype(np.int8).tobytes())
            ts.pop(f"{module}.weight_shape")

    def cfg(c):
        qc = c["quantization_config"]
        qc["format"] = _group(c)["format"] = "int-quantized"

    import hashlib

    with open_hf_dir(variant(tmp_path, "ct-w8a16-channel", tensors=edit, config=cfg)) as src:
        assert len(src.quantized_weights) == 7
        for name, r in ref.items():
            if name.startswith("_"):
                continue
            qw = src.quantized(name)
            assert qw.kind == "CT_INT8" and qw.scheme["format"] == "int-quantized"
            v = src.array(name)
            assert hashlib.sha256(np.ascontiguousarray(v, dtype="<f4").tobytes()).hexdigest() == r["float32_sha256"]
