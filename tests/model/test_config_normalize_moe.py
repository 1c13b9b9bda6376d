"""MoE text configs (Qwen3-MoE, Qwen3-Next, Qwen3.5-MoE): an HF config.json and the GGUF llama.cpp's
converter writes from it (metadata mapped here by following TextModel / Qwen2MoeModel / Qwen3NextModel /
_Qwen35MRopeMixin .set_gguf_parameters) normalise to the same config, MoE fields included."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from converters.model.config_normalize import normalize_text_config
from converters.sources import open_gguf, open_hf_dir

V, H, LAYERS = 48, 16, 4

COMMON = {"vocab_size": V, "hidden_size": H, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 8, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
          "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 12, "tie_word_embeddings": False}
HYBRID = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
          "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4, "full_attention_interval": 2,
          "shared_expert_intermediate_size": 20}

CONFIGS = {
    "qwen3moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", **COMMON,
                 "intermediate_size": 64, "norm_topk_prob": True, "rope_theta": 1e6},
    "qwen3next": {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", **COMMON, **HYBRID,
                  "intermediate_size": 64, "norm_topk_prob": True, "rope_theta": 1e7,
                  "partial_rotary_factor": 0.25},
    "qwen35moe": {"architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text", **COMMON,
                  **HYBRID, "rope_parameters": {"rope_type": "default", "rope_theta": 1e7,
                                                "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0],
                                                "mrope_interleaved": True}},
}


def gguf_from_hf(path, arch: str, hp: dict):
    """The metadata llama.cpp's converter writes for this HF config, and the tensors the checks read."""
    rope = hp.get("rope_parameters", {})
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(hp["num_hidden_layers"])                       # TextModel.set_gguf_parameters
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    if "intermediate_size" in hp:
        w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_head_count_kv(hp["num_key_value_heads"])
    w.add_rope_freq_base(rope.get("rope_theta", hp.get("rope_theta")))
    w.add_layer_norm_rms_eps(hp["rms_norm_eps"])
    w.add_expert_count(hp["num_experts"])
    w.add_expert_used_count(hp["num_experts_per_tok"])
    w.add_key_length(hp["head_dim"])
    w.add_value_length(hp["head_dim"])
    w.add_expert_feed_forward_length(hp["moe_intermediate_size"])  # Qwen2MoeModel
    if "shared_expert_intermediate_size" in hp:
        w.add_expert_shared_feed_forward_length(hp["shared_expert_intermediate_size"])
    hybrid = "linear_conv_kernel_dim" in hp
    if hybrid:                                                        # Qwen3NextModel
        w.add_ssm_conv_kernel(hp["linear_conv_kernel_dim"])
        w.add_ssm_state_size(hp["linear_key_head_dim"])
        w.add_ssm_group_count(hp["linear_num_key_heads"])
        w.add_ssm_time_step_rank(hp["linear_num_value_heads"])
        w.add_ssm_inner_size(hp["linear_value_head_dim"] * hp["linear_num_value_heads"])
        w.add_full_attention_interval(hp.get("full_attention_interval", 4))
        factor = rope.get("partial_rotary_factor", hp.get("partial_rotary_factor", 0.25))
        w.add_rope_dimension_count(int(hp["head_dim"] * factor))
    if "mrope_section" in rope:                                       # TextModel: padded to 4
        w.add_rope_dimension_sections(rope["mrope_section"] + [0] * (4 - len(rope["mrope_section"])))
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(hp["vocab_size"])])
    tensors = {"token_embd.weight": (V, H), "output.weight": (V, H)}
    for layer in range(hp["num_hidden_layers"]):
        tensors[f"blk.{layer}.ffn_gate_inp.weight"] = (hp["num_experts"], H)
        if not hybrid or (layer + 1) % hp["full_attention_interval"] == 0:
            tensors[f"blk.{layer}.attn_q.weight"] = (8, H)
    for name, shape in tensors.items():
        w.add_tensor(name, np.zeros(shape, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_hf(path, hp: dict):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(hp))
    names = ["model.embed_tokens.weight", "lm_head.weight"]
    if "full_attention_interval" in hp:
        names += [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(LAYERS)
                  if (i + 1) % hp["full_attention_interval"] == 0]
    save_file({n: np.zeros((V, H), np.float32) for n in names}, str(path / "model.safetensors"))
    return path


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_moe_hf_and_gguf_configs_agree(tmp_path, arch):
    hp = CONFIGS[arch]
    with open_hf_dir(write_hf(tmp_path / "hf", hp)) as src:
        from_hf = normalize_text_config(src)
    with open_gguf(gguf_from_hf(tmp_path / "m.gguf", arch, hp)) as src:
        from_gguf = normalize_text_config(src)
    assert from_hf == from_gguf
    assert from_hf["architectures"] == hp["architectures"] and from_hf["model_type"] == hp["model_type"]
    for name in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
                 "norm_topk_prob"):
        if name in hp:
            assert from_gguf[name] == hp[name], name
    if arch != "qwen35moe":
        assert (from_gguf["decoder_sparse_step"], from_gguf["mlp_only_layers"]) == (1, [])
    else:
        assert {"norm_topk_prob", "mlp_only_layers", "intermediate_size"}.isdisjoint(from_gguf)
    if "full_attention_interval" in hp:
        assert from_gguf["layer_types"] == ["linear_attention", "full_attention"] * 2
