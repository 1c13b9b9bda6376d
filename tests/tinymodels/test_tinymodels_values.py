"""tinymodels.synth and tinymodels.tokenizer: determinism, exactness, order sensitivity, a valid BPE."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from tinymodels import qwen3, qwen35, tokenizer
from tinymodels.synth import ROW_BLOCK, TensorSpec


def test_same_seed_same_values_other_seed_other_values():
    cfg = qwen35.config()
    a, b, c = qwen35.hf_tensors(cfg, seed=0), qwen35.hf_tensors(cfg, seed=0), qwen35.hf_tensors(cfg, seed=1)
    assert a.keys() == b.keys() == c.keys()
    for name in a:
        assert a[name].dtype == np.float32
        np.testing.assert_array_equal(a[name], b[name])
    assert all(not np.array_equal(a[n], c[n]) for n in a if a[n].size > 4)


def test_row_ranges_match_the_whole_tensor_across_block_boundaries():
    spec = TensorSpec("model.embed_tokens.weight", (ROW_BLOCK * 2 + 5, 8), "embedding")
    whole = spec.values(3)
    for start, stop in [(0, 1), (ROW_BLOCK - 2, ROW_BLOCK + 3), (ROW_BLOCK, 2 * ROW_BLOCK + 5), (7, 7)]:
        np.testing.assert_array_equal(spec.values(3, start, stop), whole[start:stop])
    with pytest.raises(ValueError, match="outside"):
        spec.values(3, 0, ROW_BLOCK * 3)


def test_values_are_exact_in_bf16_and_f16():
    for name, x in qwen35.hf_tensors(qwen35.config()).items():
        np.testing.assert_array_equal(x.astype(ml_dtypes.bfloat16).astype(np.float32), x, err_msg=name)
        np.testing.assert_array_equal(x.astype(np.float16).astype(np.float32), x, err_msg=name)


def test_norm_centres_follow_the_architecture():
    q35 = qwen35.hf_tensors(qwen35.config())
    q3 = qwen3.hf_tensors(qwen3.config())
    assert abs(q35["model.layers.0.input_layernorm.weight"].mean()) < 0.05  # zero-centred x̂·(1+w)
    assert abs(q35["model.layers.3.self_attn.q_norm.weight"].mean()) < 0.1
    assert abs(q35["model.layers.0.linear_attn.norm.weight"].mean() - 1) < 0.1  # gated w·x̂·silu(z)
    assert abs(q3["model.layers.0.input_layernorm.weight"].mean() - 1) < 0.05
    a_log = q35["model.layers.0.linear_attn.A_log"]
    assert np.all((a_log >= 0) & (a_log <= np.log(16) + 0.01)) and len(set(a_log.tolist())) == a_log.size


def test_every_row_and_head_is_distinguishable():
    hf = qwen35.hf_tensors(qwen35.config())
    for name in ("model.layers.0.linear_attn.in_proj_qkv.weight", "model.layers.3.self_attn.q_proj.weight",
                 "model.embed_tokens.weight", "lm_head.weight", "model.layers.0.linear_attn.in_proj_b.weight"):
        norms = np.linalg.norm(hf[name].reshape(hf[name].shape[0], -1), axis=1)
        assert len(np.unique(norms)) == norms.size, name
    v = hf["model.layers.0.linear_attn.in_proj_qkv.weight"][128:].reshape(4, 32, 128)  # value heads
    assert all(not np.allclose(v[i], v[j]) for i in range(4) for j in range(i + 1, 4))


def test_default_dims_match_the_issue():
    cfg = qwen35.config()
    assert 4 <= cfg["num_hidden_layers"] <= 8 and cfg["hidden_size"] <= 256 and cfg["vocab_size"] <= 1024
    assert cfg["linear_num_key_heads"] != cfg["linear_num_value_heads"]
    assert cfg["layer_types"] == ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + [
        "full_attention"]
    assert cfg["model_type"] == "qwen3_5_text" and cfg["architectures"] == ["Qwen3_5ForCausalLM"]
    assert cfg["rope_parameters"]["partial_rotary_factor"] == 0.25 and cfg["attn_output_gate"] is True


def test_overrides_and_aliases():
    cfg = qwen35.config(layers=4, hidden=256, rope_theta=5e5, full_attention_interval=2)
    assert cfg["num_hidden_layers"] == 4 and cfg["hidden_size"] == 256
    assert cfg["rope_parameters"]["rope_theta"] == 5e5
    assert cfg["layer_types"] == ["linear_attention", "full_attention"] * 2
    assert qwen3.config(layers=2)["layer_types"] == ["full_attention"] * 2
    with pytest.raises(ValueError, match="vocab_size"):
        qwen3.config(vocab=100)
    with pytest.raises(ValueError, match="multiple"):
        qwen35.config(linear_num_value_heads=3)


def test_tokenizer_is_a_consistent_byte_level_bpe():
    tok = tokenizer.tokenizer_json()
    vocab, merges = tok["model"]["vocab"], tok["model"]["merges"]
    assert sorted(vocab.values()) == list(range(len(vocab)))
    assert len(merges) == tokenizer.N_MERGES
    assert all(left + right in vocab and left in vocab and right in vocab for left, right in merges)
    byte_map = tokenizer.bytes_to_unicode()
    assert len(set(byte_map.values())) == 256 and byte_map[ord(" ")] == "Ġ" and byte_map[ord("A")] == "A"
    ids = [t["id"] for t in tok["added_tokens"]]
    assert ids == list(range(len(vocab), len(vocab) + 3)) and all(t["special"] for t in tok["added_tokens"])
    re.compile(tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].replace(r"\p{L}", "a").replace(
        r"\p{N}", "0"))


def test_gguf_token_list_pads_and_types_like_llama_cpp():
    tok = tokenizer.tokenizer_json()
    tokens, types = tokenizer.gguf_token_list(tok, 512)
    n = tokenizer.default_size()
    assert len(tokens) == len(types) == 512
    assert tokens[:3] == ["Ā", "ā", "Ă"] and tokens[ord("A")] == "A"
    assert tokens[n - 3 : n] == list(tokenizer.SPECIAL_TOKENS) and types[n - 3 : n] == [3, 3, 3]
    assert tokens[n] == f"[PAD{n}]" and set(types[n:]) == {5} and set(types[: n - 3]) == {1}
    with pytest.raises(ValueError, match="vocab_size"):
        tokenizer.gguf_token_list(tok, n - 1)
