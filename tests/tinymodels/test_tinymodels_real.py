"""tinymodels' real geometries: the committed configs, the knobs of :func:`tinymodels.real.geometry`, the
respelled ``config.json`` and the command line (docs/architectures.md §Real geometries)."""

from __future__ import annotations

import json

import gguf
import pytest
from safetensors import safe_open

from tinymodels import real
from tinymodels.__main__ import main

REQUIRED = {"qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-8b", "qwen3-30b-a3b", "qwen3.5-0.8b", "qwen3-vl-2b",
            "qwen3-next-80b-a3b"}


def test_every_real_config_is_committed_in_both_spellings_with_its_source():
    assert set(real.names()) == REQUIRED
    for spelling, folder in real.SPELLINGS.items():
        assert {p.stem for p in folder.glob("*.json")} == REQUIRED, spelling
    for name, source in real.sources().items():
        assert source["published"].startswith("Qwen/") and source["read_from"], name
        assert real.generator(name).MODEL_NAME == source["tiny"]


def test_the_published_values_are_the_released_geometry():
    """Spot values every copy agrees on (sources.json)."""
    q7 = real.published("qwen2.5-7b")
    assert (q7["hidden_size"], q7["num_hidden_layers"], q7["num_attention_heads"], q7["num_key_value_heads"],
            q7["intermediate_size"], q7["vocab_size"]) == (3584, 28, 28, 4, 18944, 152064)
    moe = real.published("qwen3-30b-a3b")
    assert (moe["num_experts"], moe["num_experts_per_tok"], moe["moe_intermediate_size"], moe["head_dim"]) == \
        (128, 8, 768, 128)
    nxt = real.published("qwen3-next-80b-a3b")
    assert (nxt["num_experts"], nxt["full_attention_interval"], nxt["linear_num_value_heads"]) == (512, 4, 32)
    assert real.published("qwen3-vl-2b")["vision_config"]["deepstack_visual_indexes"] == [5, 11, 17]
    assert real.published("qwen3.5-0.8b")["text_config"]["layer_types"][:4] == ["linear_attention"] * 3 + [
        "full_attention"]


def test_geometry_keeps_real_counts_and_divides_widths():
    full = real.geometry("qwen3-30b-a3b")
    assert (full["hidden_size"], full["num_hidden_layers"], full["num_experts"], full["vocab_size"]) == \
        (2048, 48, 128, 151936)
    small = real.geometry("qwen3-30b-a3b", layers=2, shrink=8, vocab=512)
    assert (small["hidden_size"], small["head_dim"], small["moe_intermediate_size"], small["intermediate_size"]) == \
        (256, 16, 96, 768)
    assert (small["num_attention_heads"], small["num_key_value_heads"], small["num_experts"],
            small["num_experts_per_tok"], small["num_hidden_layers"], small["vocab_size"]) == (32, 4, 128, 8, 2, 512)
    assert real.geometry("qwen3-next-80b-a3b", experts=4)["num_experts_per_tok"] == 4
    q35 = real.geometry("qwen3.5-0.8b", layers=8, shrink=8)
    assert q35["layer_types"] == (["linear_attention"] * 3 + ["full_attention"]) * 2
    rope = q35["rope_parameters"]
    assert sum(rope["mrope_section"]) == q35["head_dim"] * rope["partial_rotary_factor"] // 2
    assert q35["vision_config"]["hidden_size"] == 96 and q35["vision_config"]["out_hidden_size"] == 128
    with pytest.raises(ValueError, match="shrink 7 does not divide hidden_size"):
        real.geometry("qwen3-8b", shrink=7)
    with pytest.raises(KeyError, match="no real config"):
        real.published("qwen9")


def test_respell_keeps_the_release_spelling_with_the_tiny_numbers():
    cfg = real.geometry("qwen3-30b-a3b", layers=2, shrink=16, vocab=512)
    published, resaved = (real.respell("qwen3-30b-a3b", cfg, s) for s in ("published", "resaved"))
    assert set(published) == set(real.published("qwen3-30b-a3b"))
    assert set(resaved) == set(real.published("qwen3-30b-a3b", "resaved"))
    assert published["num_experts"] == resaved["num_local_experts"] == 128
    assert published["rope_theta"] == resaved["rope_parameters"]["rope_theta"] == 1000000.0
    assert published["hidden_size"] == 128 and published["num_hidden_layers"] == 2
    vl = real.respell("qwen3-vl-2b", real.geometry("qwen3-vl-2b", layers=3, shrink=16, vocab=512))
    assert vl["text_config"]["rope_scaling"]["mrope_section"] == [2, 1, 1]  # head_dim 8: 4 rotary pairs
    assert vl["vision_config"]["model_type"] == "qwen3_vl" and vl["vision_config"]["hidden_size"] == 64
    assert vl["image_token_id"] == 512 - 4


def test_command_line_writes_a_real_geometry_both_ways(tmp_path):
    hf, gg = tmp_path / "hf", tmp_path / "m.gguf"
    assert main(["qwen3-0.6b", "--hf", str(hf), "--gguf", str(gg), "--layers", "2", "--shrink", "8", "--vocab",
                 "512", "--spelling", "resaved", "--shards", "1", "--hf-dtype", "f32"]) == 0
    doc = json.loads((hf / "config.json").read_text())
    assert set(doc) == set(real.published("qwen3-0.6b", "resaved"))
    assert doc["dtype"] == "float32" and doc["num_hidden_layers"] == 2 and doc["hidden_size"] == 128
    with safe_open(hf / "model.safetensors", "np") as f:
        assert f.get_slice("model.layers.1.self_attn.q_proj.weight").get_shape() == [16 * 16, 128]
    reader = gguf.GGUFReader(gg)
    assert int(reader.fields["qwen3.attention.head_count"].parts[-1][0]) == 16
    assert int(reader.fields["qwen3.block_count"].parts[-1][0]) == 2


def test_show_config_prints_the_respelled_file(capsys):
    assert main(["qwen3-30b-a3b", "--show-config", "--layers", "2", "--spelling", "resaved"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["num_hidden_layers"] == 2 and doc["num_local_experts"] == 128 and doc["hidden_size"] == 2048


def test_command_line_refuses_tiny_overrides_on_a_real_geometry(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["qwen3-8b", "--hf", str(tmp_path / "x"), "--set", "layers=2"])
    assert "--set is for the tiny models" in capsys.readouterr().err
    assert main(["qwen3-8b", "--hf", str(tmp_path / "y"), "--shrink", "5"]) == 1
    assert "shrink 5 does not divide" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()
