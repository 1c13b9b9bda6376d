"""The pre-quantized fixture checkpoints (tests/fixtures/prequantized/, made by its make_fixtures.py with the real
libraries): every directory the README lists is present and small, its config declares the quantization the README
says, its reference.json covers every quantized module, and the reference samples follow the documented library rule
when recomputed here from the raw component tensors (numpy + the strict safetensors reader; docs/prequantized.md)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from converters.sources.safetensors import open_safetensors
from tests.support.prequantized import expand_fused

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prequantized"
NP = {"F32": np.dtype("<f4"), "BF16": np.dtype(ml_dtypes.bfloat16), "F16": np.dtype("<f2"),
      "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "U8": np.dtype("u1"), "I32": np.dtype("<i4"),
      "I64": np.dtype("<i8")}
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


def readme_table() -> dict[str, str]:
    """``directory → declared quantization`` from the README's fixture table."""
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| ([^|]+?) \| `([^`]+)` \|", (FIXTURES / "README.md").read_text(), re.M)
    return {name: declared for name, _, declared in rows}


TABLE = readme_table()


def declared(directory: Path) -> str:
    """A one-line summary of what the directory's config files declare."""
    config = json.loads((directory / "config.json").read_text())
    hf_quant = directory / "hf_quant_config.json"
    if hf_quant.exists():
        q = json.loads(hf_quant.read_text())["quantization"]
        assert config["quantization_config"]["quant_method"] == "modelopt"
        return f"modelopt {q['quant_algo']}" + (f" g{q['group_size']}" if q.get("group_size") else "")
    q = config["quantization_config"]
    if q["quant_method"] == "fp8":
        h, w = q["weight_block_size"]
        return f"fp8 {q['fmt']} block {h}x{w} a:{q['activation_scheme']}"
    assert q["quant_method"] == "compressed-tensors" and len(q["config_groups"]) == 1
    group = next(iter(q["config_groups"].values()))
    wt, act = group["weights"], group["input_activations"]
    text = f"{group['format']} w{wt['num_bits']}{wt['type'][0]} {wt['strategy']}"
    text += f" g{wt['group_size']}" if wt.get("group_size") else ""
    text += "" if wt["symmetric"] else " asym"
    if act is not None:
        text += " a:" + {True: "dynamic", False: "static"}.get(act["dynamic"], str(act["dynamic"]))
    return text


def components(directory: Path) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors, decoded from its raw bytes by dtype (fp8/bf16 via ml_dtypes)."""
    with open_safetensors(directory / "model.safetensors") as source:
        return {name: source.raw(name).view(NP[t.dtype]).reshape(t.shape).copy() for name, t in source.tensors.items()}


def quantized_modules(tensors: dict[str, np.ndarray]) -> set[str]:
    suffixes = (".weight_scale_inv", ".weight_scale")
    return {name.rsplit(".", 1)[0] for name in tensors if name.endswith(suffixes)}


def bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest-even), back as float32."""
    return values.astype(ml_dtypes.bfloat16).astype(np.float32)


def fp4(packed: np.ndarray, minus_zero: bool) -> np.ndarray:
    """E2M1 codes: column 2j in the low nibble of byte j, 2j+1 in the high one; bit 3 = sign."""
    nib = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(packed.shape[0], -1)
    values = np.where(nib & 8, np.float32(-1), np.float32(1)) * E2M1[nib & 7]
    return values if minus_zero else values + np.float32(0)


def int32_stream(words: np.ndarray, bits: int, count: int) -> np.ndarray:
    """compressed-tensors pack_to_int32 inverse: element i at bit i*bits of the row (LSB first), offset 2^(bits-1)."""
    raw = np.ascontiguousarray(words, "<i4").view(np.uint8).reshape(words.shape[0], -1)
    stream = np.unpackbits(raw, axis=1, bitorder="little")[:, :count * bits].reshape(words.shape[0], count, bits)
    return (stream.astype(np.int64) << np.arange(bits)).sum(axis=-1) - (1 << (bits - 1))


def model_dtype(directory: Path) -> np.dtype:
    """The model dtype of ``config.json`` (what ModelOpt dequantizes to): bfloat16 or float16 in the fixtures."""
    return NP[{"bfloat16": "BF16", "float16": "F16"}[json.loads((directory / "config.json").read_text())["dtype"]]]


def library_values(directory: Path, t: dict[str, np.ndarray], module: str) -> np.ndarray:
    """The library's dequantization of one module, per the rule its reference.json ``_rule`` states."""
    floats = (NP["F32"], NP["BF16"], NP["F16"], NP["F8_E4M3"])
    f32 = {k.removeprefix(module + "."): v.astype(np.float32) for k, v in t.items()
           if k.startswith(module + ".") and v.dtype in floats}
    scheme = declared(directory)
    if scheme.startswith("nvfp4-pack-quantized"):  # value = code * (scale / global), fp32, then bf16
        scale = f32["weight_scale"] / f32["weight_global_scale"].astype(np.float32)
        return bf16(fp4(t[module + ".weight_packed"], True) * np.repeat(scale, 16, axis=1))
    if scheme.startswith("modelopt NVFP4"):  # value = code * (scale * weight_scale_2), +0.0 for nibble 0x8
        scale = f32["weight_scale"] * np.float32(f32["weight_scale_2"])
        return bf16(fp4(t[module + ".weight"], False) * np.repeat(scale, 16, axis=1))
    if scheme.startswith("modelopt FP8"):  # the fp32 scale rounded to the model dtype first, then the product
        out = model_dtype(directory)
        scale = np.float32(f32["weight_scale"]).reshape(1, 1).astype(out).astype(np.float32)
        return (f32["weight"] * scale).astype(out).astype(np.float32)
    if scheme.startswith("fp8 "):  # Qwen block FP8: one weight_scale_inv per 128x128 block, multiplies
        s = f32["weight_scale_inv"]
        n, k = f32["weight"].shape
        return bf16(f32["weight"] * np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:n, :k])
    if scheme.startswith("float-quantized"):  # per tensor [1], row [N,1] or 128x128 block
        s, w = f32["weight_scale"], f32["weight"]
        if "block" in scheme:
            s = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)[:w.shape[0], :w.shape[1]]
        return bf16(w * s.reshape(s.shape if s.ndim == 2 else (1, 1)))
    if scheme.startswith("pack-quantized"):  # (q - z) * scale, zero points packed along the rows
        bits = int(scheme.split()[1][1:-1])
        n, k = (int(v) for v in t[module + ".weight_shape"])
        q = int32_stream(t[module + ".weight_packed"], bits, k)
        scale = f32["weight_scale"]
        z = int32_stream(t[module + ".weight_zero_point"].T, bits, n).T if "asym" in scheme else 0
        per = k // scale.shape[1]
        return bf16((q - np.repeat(z, per, axis=1) if "asym" in scheme else q).astype(np.float32)
                    * np.repeat(scale, per, axis=1))
    raise AssertionError(f"{directory.name}: no rule for {scheme}")


def test_readme_lists_every_fixture_directory_and_sizes_stay_small():
    present = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    assert present == sorted(TABLE) and len(TABLE) >= 14
    sizes = {name: sum(f.stat().st_size for f in (FIXTURES / name).iterdir()) for name in present}
    assert max(sizes.values()) <= 1_600_000 and sum(sizes.values()) <= 26 * 2**20
    for name in present:
        for required in ("config.json", "model.safetensors", "reference.json", "tokenizer.json"):
            assert (FIXTURES / name / required).is_file(), f"{name}/{required}"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_config_declares_what_the_readme_says(name):
    assert declared(FIXTURES / name) == TABLE[name]


@pytest.mark.parametrize("name", sorted(TABLE))
def test_reference_covers_every_quantized_module_and_follows_the_rule(name):
    directory = FIXTURES / name
    reference = json.loads((directory / "reference.json").read_text())
    assert reference["_library"]["version"] and reference["_rule"]
    tensors = expand_fused(components(directory))  # ModelOpt's fused experts: the per-expert slices
    modules = quantized_modules(tensors)
    assert {k for k in reference if not k.startswith("_")} == {m + ".weight" for m in modules}
    if "lm_head.weight" in tensors:  # absent when tied to the embeddings (qwen2, qwen3vl bases)
        # ignored: unquantized, in the model dtype (float16 in modelopt-fp8-fp16)
        assert tensors["lm_head.weight"].dtype == model_dtype(directory) and "lm_head" not in modules
    out = model_dtype(directory) if name.startswith("modelopt-fp8") else NP["BF16"]  # ModelOpt FP8: the model dtype
    for module in sorted(modules):
        entry = reference[module + ".weight"]
        values = library_values(directory, tensors, module)
        assert list(values.shape) == entry["shape"] and NP[{"bfloat16": "BF16", "float16": "F16"}[entry["dtype"]]] == out
        index, expected = (np.array(c) for c in zip(*entry["samples"], strict=True))
        got = values.reshape(-1)[index.astype(np.int64)]
        assert len(index) >= 200 and np.array_equal(got, expected.astype(np.float32)), module
        assert np.array_equal(np.signbit(got), np.signbit(expected)), f"{module}: sign of zero"
        whole = hashlib.sha256(values.astype(out).tobytes()).hexdigest()
        assert whole == entry["sha256"], f"{module}: the whole tensor differs from the library's"
