"""HF directories written by tinymodels, read back with the safetensors library."""

from __future__ import annotations

import json

import ml_dtypes  # noqa: F401  (registers numpy bfloat16 for safetensors' numpy backend)
import numpy as np
import pytest
from safetensors import safe_open

from tinymodels import qwen3, qwen35, tokenizer


def read_hf_dir(path) -> dict[str, np.ndarray]:
    index = path / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else [
        "model.safetensors"]
    tensors: dict[str, np.ndarray] = {}
    for name in files:
        with safe_open(path / name, framework="np") as f:
            for key in f.keys():
                assert key not in tensors, key
                tensors[key] = f.get_tensor(key)
    return tensors


@pytest.mark.parametrize("dtype,st_dtype", [("bf16", "bfloat16"), ("f16", "float16"), ("f32", "float32")])
def test_qwen35_hf_dir_round_trips_exactly(tmp_path, dtype, st_dtype):
    cfg = qwen35.config()
    path = qwen35.write_hf_dir(tmp_path / "m", cfg, dtype=dtype, shards=2)
    got = read_hf_dir(path)
    ref = qwen35.hf_tensors(cfg)
    assert got.keys() == ref.keys()
    for name, value in ref.items():
        assert str(got[name].dtype) == st_dtype and got[name].shape == value.shape, name
        np.testing.assert_array_equal(got[name].astype(np.float32), value, err_msg=name)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(ref)
    assert set(index["weight_map"].values()) == {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    assert index["metadata"]["total_size"] == sum(v.size for v in ref.values()) * {"bf16": 2, "f16": 2, "f32": 4}[dtype]
    config = json.loads((path / "config.json").read_text())
    assert config == {**cfg, "dtype": st_dtype}


def test_hf_names_shapes_and_resources(tmp_path):
    cfg = qwen35.config()
    path = qwen35.write_hf_dir(tmp_path / "m", cfg)
    names = set(read_hf_dir(path))
    hv, dv, hk, dk = 4, 32, 2, 32
    shapes = {n: v.shape for n, v in qwen35.hf_tensors(cfg).items()}
    assert shapes["model.layers.0.linear_attn.in_proj_qkv.weight"] == (2 * hk * dk + hv * dv, 128)
    assert shapes["model.layers.0.linear_attn.conv1d.weight"] == (2 * hk * dk + hv * dv, 1, 4)
    assert shapes["model.layers.0.linear_attn.A_log"] == (hv,) and shapes["model.layers.0.linear_attn.norm.weight"] == (dv,)
    assert shapes["model.layers.3.self_attn.q_proj.weight"] == (2 * 4 * 32, 128)
    assert "lm_head.weight" in names and "model.layers.3.linear_attn.A_log" not in names
    assert "model.layers.0.self_attn.q_proj.weight" not in names
    assert json.loads((path / "tokenizer.json").read_text()) == tokenizer.tokenizer_json()
    assert (path / "chat_template.jinja").read_text() == tokenizer.CHAT_TEMPLATE
    tok_cfg = json.loads((path / "tokenizer_config.json").read_text())
    assert tok_cfg["eos_token"] == "<|im_end|>" and tok_cfg["added_tokens_decoder"]["354"]["content"] == "<|im_end|>"
    gen = json.loads((path / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [354, 352] and cfg["eos_token_id"] == 354 and cfg["bos_token_id"] == 352


def test_qwen3_single_file_and_tied_head(tmp_path):
    cfg = qwen3.config()
    path = qwen3.write_hf_dir(tmp_path / "m", cfg, shards=1)
    assert not (path / "model.safetensors.index.json").exists()
    got = read_hf_dir(path)
    assert "lm_head.weight" not in got and cfg["tie_word_embeddings"] is True
    for name, value in qwen3.hf_tensors(cfg).items():
        np.testing.assert_array_equal(got[name].astype(np.float32), value, err_msg=name)


def test_logical_parameters_are_simple_slices_of_the_hf_tensors():
    cfg = qwen35.config()
    hf, lp = qwen35.hf_tensors(cfg), qwen35.logical_parameters(cfg)
    q_proj = hf["model.layers.7.self_attn.q_proj.weight"]
    for head in range(4):  # per head: 32 query rows then 32 gate rows
        np.testing.assert_array_equal(lp["text/layers/7/attention/query"][head * 32 : head * 32 + 32],
                                      q_proj[head * 64 : head * 64 + 32])
        np.testing.assert_array_equal(lp["text/layers/7/attention/gate"][head * 32 : head * 32 + 32],
                                      q_proj[head * 64 + 32 : head * 64 + 64])
    qkv = hf["model.layers.1.linear_attn.in_proj_qkv.weight"]
    np.testing.assert_array_equal(lp["text/layers/1/gdn/value"], qkv[128:])
    np.testing.assert_array_equal(lp["text/layers/1/gdn/conv1d"], hf["model.layers.1.linear_attn.conv1d.weight"][:, 0])
    np.testing.assert_array_equal(lp["text/layers/1/gdn/a_log"], hf["model.layers.1.linear_attn.A_log"])
    np.testing.assert_array_equal(lp["text/output_head"], hf["lm_head.weight"])
    assert len(lp) == 3 + 8 * 5 + 2 * 7 + 6 * 11


def test_refuses_existing_directory(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep").write_text("x")
    with pytest.raises(FileExistsError):
        qwen3.write_hf_dir(tmp_path / "m", qwen3.config(layers=1))
    assert [p.name for p in (tmp_path / "m").iterdir()] == ["keep"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    with pytest.raises(ValueError, match="dtype"):
        qwen3.write_hf_dir(tmp_path / "n", qwen3.config(layers=1), dtype="int8")
