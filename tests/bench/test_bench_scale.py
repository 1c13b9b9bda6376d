"""``make bench`` area ``scale`` (bench/scale.py) at a tiny width: its rows, their targets and the Q4_K_M
typing of the generated GGUF (docs/io-speed.md §Benchmarks)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from bench import scale
from tinymodels import qwen2, real


def test_q4_k_m_types_follow_llama_cpp():
    """28 layers: attn_v / ffn_down in Q6_K for layers 0-2, 24-27 and every third from 5 (14 layers); a full
    Qwen2.5-7B plan then has llama.cpp's 339 tensors and 4.68 GB of tensor data."""
    sixes = [i for i in range(28) if scale.use_more_bits(i, 28)]
    assert sixes == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]
    assert scale.q4_k_m_type("output.weight", 3584, 28) == scale.Q6_K
    assert scale.q4_k_m_type("blk.5.ffn_down_exps.weight", 768, 28) == scale.Q6_K
    assert scale.q4_k_m_type("blk.4.attn_v.weight", 3584, 28) == scale.Q4_K
    assert scale.q4_k_m_type("blk.4.attn_q.weight", 224, 28) == scale.Q5_0  # not whole super-blocks
    plan = qwen2.gguf_tensors(real.geometry("qwen2.5-7b"), 0, "Q8_0")
    size = 0
    for t in plan:
        if t.qtype == gguf.GGMLQuantizationType.Q8_0:
            elements, nbytes, _ = scale.RandomBlocks.LAYOUTS[scale.q4_k_m_type(t.name, t.shape[-1], 28)]
            size += int(np.prod(t.shape)) // elements * nbytes
        else:
            size += t.nbytes
    assert len(plan) == 339 and size == 4_677_120_000


@pytest.mark.parametrize("type_id", sorted(scale.RandomBlocks.LAYOUTS))
def test_random_blocks_decode_to_finite_values(type_id):
    codec = scale.RandomBlocks(type_id, 0)
    raw = codec.encode(np.zeros((3, 512), dtype=np.float32))
    values = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(type_id))
    assert values.shape == (3, 512) and np.isfinite(values).all() and np.abs(values).max() > 0


def test_scale_rows_at_a_tiny_width(tmp_path, monkeypatch):
    monkeypatch.setattr(scale, "SHRINK", 32)
    monkeypatch.setattr(scale, "VOCAB", 512)
    rows = scale.run(tmp_path, scale=0.01, drop_cache=False)
    assert [r["name"].split(" → ")[1] for r in rows] == [
        "exact + acceptance, time vs cp + sync", "exact + acceptance, peak RSS",
        "groupwise-int + acceptance, time vs cp + sync", "groupwise-int + acceptance, peak RSS",
        "exact + acceptance, time vs cp + sync", "exact + acceptance, peak RSS"]
    assert [r["target"] for r in rows] == ["<= 4.0", "<= 2", None, None, None, None]
    for row in rows[::2]:
        d = row["detail"]
        assert row["unit"] == "× cp time" and row["value"] > 0 and d["verdict"] == "pass", d
        assert d["total_seconds"] == pytest.approx(d["convert_seconds"] + d["acceptance_seconds"], abs=2e-3)
        assert d["cp_seconds"] > 0 and d["peak_rss_bytes"] > 0 and not d["page_cache_dropped"]
    assert rows[0]["met"] == (rows[0]["value"] <= scale.TIME_TARGET)
    assert rows[0]["detail"]["layers"] == 1 and rows[0]["detail"]["hidden_size"] == 112
    assert "requantized" not in rows[0]["detail"]["exactness"] and rows[2]["detail"]["exactness"]["requantized"] > 0
    assert rows[4]["detail"]["num_experts"] == 128 and rows[4]["detail"]["layers"] == scale.MOE_LAYERS
    assert list(tmp_path.iterdir()) == []
