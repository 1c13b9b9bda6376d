"""ModelOpt's fused 3-D NVFP4 expert tensors (docs/prequantized.md §Fused expert tensors): read as the per-expert
modules they hold — byte views into the same file, equal to ModelOpt's per-expert export of the same model
(fixture ``modelopt-nvfp4-moe``) — and every other fused layout refused with one typed error."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from converters.errors import SourceFormatError
from converters.sources import open_hf_dir, open_safetensors
from tests.support.sources import write_safetensors

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "prequantized"
FUSED, PER_EXPERT = ROOT / "modelopt-nvfp4-moe-fused", ROOT / "modelopt-nvfp4-moe"
BLOCK = "model.layers.0.mlp.experts"


def test_fused_experts_read_as_the_per_expert_modules_of_modelopts_own_export():
    fused, per = open_hf_dir(FUSED), open_hf_dir(PER_EXPERT)
    try:
        assert set(fused.quantized_weights) == set(per.quantized_weights)
        assert not [n for n in fused.tensors if n.startswith(f"{BLOCK}.gate_up_proj") or n.startswith(f"{BLOCK}.down")]
        for name, qw in per.quantized_weights.items():
            other = fused.quantized(name)
            assert other.shape == qw.shape and other.kind == qw.kind == "MO_NVFP4"
            assert other.weight_divisor == qw.weight_divisor and other.activation_divisor == qw.activation_divisor
            n = qw.shape[0]
            np.testing.assert_array_equal(other.codes(0, n), qw.codes(0, n))
            np.testing.assert_array_equal(other.block_scales(0, n), qw.block_scales(0, n))
            np.testing.assert_array_equal(other.dequantize(0, n), qw.dequantize(0, n))
            assert bytes(other.transcode("nvfp4", 0, n)) == bytes(qw.transcode("nvfp4", 0, n))
        up = fused.quantized(f"{BLOCK}.2.up_proj.weight").parts["weight"]
        codes = fused.quantized(f"{BLOCK}.2.gate_proj.weight").parts["weight"]
        assert up.file == codes.file and up.file_offset == codes.file_offset + 128 * 128  # the next I rows, in place
    finally:
        fused.close()
        per.close()


def _variant(tmp_path: Path, edit) -> Path:
    d = tmp_path / "fused"
    shutil.copytree(FUSED, d)
    with open_safetensors(d / "model.safetensors") as s:
        ts = {n: (t.dtype, list(t.shape), bytes(s.raw(n))) for n, t in s.tensors.items()}
    edit(ts)
    write_safetensors(d / "model.safetensors", ts)
    return d


def _reshape(name: str, shape: list[int]):
    def edit(ts):
        dtype, _, data = ts[name]
        ts[name] = (dtype, shape, data)
    return edit


def _per_shard_scale(ts):  # [E, 2]: one scale per gate / up half (both the expert's value here)
    dtype, _, data = ts[f"{BLOCK}.gate_up_proj_weight_scale_2"]
    v = np.frombuffer(data, "<f4")
    ts[f"{BLOCK}.gate_up_proj_weight_scale_2"] = (dtype, [4, 2], np.repeat(v, 2).astype("<f4").tobytes())


def test_a_scale_per_gate_and_up_half_reads_the_same(tmp_path):
    d = _variant(tmp_path, _per_shard_scale)
    src, ref = open_hf_dir(d), open_hf_dir(FUSED)
    try:
        for e in range(4):
            for h in ("gate_proj", "up_proj"):
                name = f"{BLOCK}.{e}.{h}.weight"
                assert src.quantized(name).weight_divisor == ref.quantized(name).weight_divisor
    finally:
        src.close()
        ref.close()


@pytest.mark.parametrize(("edit", "field"), [
    (_reshape(f"{BLOCK}.gate_up_proj_weight_scale", [4, 16, 256]), f"{BLOCK}.gate_up_proj_weight_scale"),  # [E, K, N]
    (_reshape(f"{BLOCK}.down_proj_weight_scale_2", [2, 2]), f"{BLOCK}.down_proj_weight_scale_2"),
    (_reshape(f"{BLOCK}.gate_up_proj_input_scale", [1, 4]), f"{BLOCK}.gate_up_proj_input_scale"),
])
def test_other_fused_layouts_are_refused_naming_the_tensor(tmp_path, edit, field):
    d = _variant(tmp_path, edit)
    with pytest.raises(SourceFormatError) as exc:
        open_hf_dir(d)
    assert exc.value.rule == "prequantized_fused_experts" and exc.value.json_path == field
    assert str(d / "model.safetensors") in str(exc.value.file)


def test_fused_experts_of_another_convention_are_refused(tmp_path):
    """compressed-tensors writes experts per module; a fused U8 tensor beside a block scale there is not read."""
    d = tmp_path / "ct"
    shutil.copytree(ROOT / "ct-nvfp4-moe", d)
    with open_safetensors(d / "model.safetensors") as s:
        ts = {n: (t.dtype, list(t.shape), bytes(s.raw(n))) for n, t in s.tensors.items()}
    for role, dtype, cols in (("", "U8", 128), ("_weight_scale", "F8_E4M3", 16)):
        ts[f"{BLOCK}.gate_up_proj{role}"] = (dtype, [4, 256, cols], bytes(4 * 256 * cols))
    write_safetensors(d / "model.safetensors", ts)
    with pytest.raises(SourceFormatError) as exc:
        open_hf_dir(d)
    assert exc.value.rule == "prequantized_fused_experts" and exc.value.json_path == f"{BLOCK}.gate_up_proj"
