"""Text config normalisation from HF ``config.json`` (transformers 5 layouts), and agreement of the GGUF-
and HF-derived configs of the same tinymodels checkpoint."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from converters.model.config_normalize import ConfigError, explain_text_config, normalize_text_config
from converters.sources import open_gguf, open_hf_dir
from tinymodels import qwen3, qwen35

V, H = 64, 16

QWEN35_TEXT = {
    "model_type": "qwen3_5_text", "vocab_size": V, "hidden_size": H, "intermediate_size": 48,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
    "rms_norm_eps": 1e-6, "max_position_embeddings": 1024, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 4, "attn_output_gate": True,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                        "mrope_section": [1, 1, 0], "mrope_interleaved": True},
}


HEAD = ("model.embed_tokens.weight", "lm_head.weight", "model.layers.3.self_attn.q_proj.weight")


def write_hf(path, config: dict, tensors=HEAD):
    """config.json and one shard holding the tensors the normaliser cross-checks (embedding, head, the
    query projection of each full-attention layer)."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    save_file({name: np.zeros((V, H), np.float32) for name in tensors}, str(path / "model.safetensors"))
    return path


def normalized(path) -> dict:
    with open_hf_dir(path) as src:
        return normalize_text_config(src)


def error(path) -> ConfigError:
    with open_hf_dir(path) as src, pytest.raises(ConfigError) as info:
        normalize_text_config(src)
    assert info.value.file == str(path / "config.json")
    return info.value


def test_causal_lm_every_field(tmp_path):
    cfg = normalized(write_hf(tmp_path / "m", {"architectures": ["Qwen3_5ForCausalLM"], **QWEN35_TEXT}))
    assert cfg == {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": V, "hidden_size": H,
        "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "rms_norm_eps": 1e-6, "rope_theta": 1e7, "partial_rotary_factor": 0.25,
        "rope_parameters": QWEN35_TEXT["rope_parameters"], "max_position_embeddings": 1024,
        "tie_word_embeddings": False, "layer_types": QWEN35_TEXT["layer_types"], "full_attention_interval": 4,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
        "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4, "attn_output_gate": True,
    }


def test_conditional_generation_reads_text_config_and_root_tie(tmp_path):
    text = {**QWEN35_TEXT, "model_type": "qwen3_5_text"}
    del text["layer_types"]  # transformers builds it from full_attention_interval (default 4)
    config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
              "tie_word_embeddings": True, "text_config": text, "vision_config": {"depth": 2}}
    tensors = ("model.language_model.embed_tokens.weight", "model.language_model.layers.3.self_attn.q_proj.weight")
    cfg = normalized(write_hf(tmp_path / "m", config, tensors))
    assert cfg["architectures"] == ["Qwen3_5ForCausalLM"] and cfg["model_type"] == "qwen3_5_text"
    assert cfg["tie_word_embeddings"] is True
    assert cfg["layer_types"] == QWEN35_TEXT["layer_types"] and cfg["full_attention_interval"] == 4


@pytest.mark.parametrize("variant", ["flat", "nested", "legacy_top_level", "legacy_rope_scaling"])
def test_rope_layouts_of_transformers_5(tmp_path, variant):
    text = copy.deepcopy(QWEN35_TEXT)
    rp = text.pop("rope_parameters")
    if variant == "nested":
        text["rope_parameters"] = {"full_attention": rp}
    elif variant == "legacy_top_level":
        text |= {"rope_theta": 1e7, "partial_rotary_factor": 0.25,
                 "rope_parameters": {"mrope_section": [1, 1, 0], "mrope_interleaved": True}}
    elif variant == "legacy_rope_scaling":
        text |= {"rope_theta": 1e7, "rope_scaling": {"type": "default", "mrope_section": [1, 1, 0]}}
    else:
        text["rope_parameters"] = rp
    cfg = normalized(write_hf(tmp_path / "m", {"architectures": ["Qwen3_5ForCausalLM"], **text}))
    assert (cfg["rope_theta"], cfg["partial_rotary_factor"]) == (1e7, 0.25)
    assert cfg["rope_parameters"] == QWEN35_TEXT["rope_parameters"]


def test_defaults_transformers_applies_are_cited(tmp_path):
    text = {k: v for k, v in QWEN35_TEXT.items()
            if k not in ("rms_norm_eps", "max_position_embeddings", "rope_parameters", "num_key_value_heads")}
    with open_hf_dir(write_hf(tmp_path / "m", {"architectures": ["Qwen3_5ForCausalLM"], **text})) as src:
        ex = explain_text_config(src)
    assert ex.config["rms_norm_eps"] == 1e-6 and ex.config["max_position_embeddings"] == 32768
    assert ex.config["rope_theta"] == 10000.0 and ex.config["partial_rotary_factor"] == 0.25
    assert ex.config["num_key_value_heads"] == 4
    assert ex.config["rope_parameters"]["mrope_section"] == [11, 11, 10]
    assert "Qwen3_5TextConfig.rms_norm_eps" in ex.evidence["rms_norm_eps"]
    assert "default_theta" in ex.evidence["rope_theta"]
    assert ex.evidence["hidden_size"] == "hf key hidden_size"


def test_qwen3_moe_head_dim_and_sparse_step_folding(tmp_path):
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": V,
              "hidden_size": H, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 2,
              "num_key_value_heads": 1, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 12,
              "decoder_sparse_step": 2, "mlp_only_layers": [1]}
    cfg = normalized(write_hf(tmp_path / "m", config))
    assert cfg["head_dim"] == H // 2  # Qwen3MoeAttention: hidden_size // num_attention_heads
    assert cfg["decoder_sparse_step"] == 1 and cfg["mlp_only_layers"] == [0, 1, 2]
    assert cfg["norm_topk_prob"] is False  # transformers Qwen3MoeConfig default


def test_missing_required_field_names_file_and_key(tmp_path):
    text = {k: v for k, v in QWEN35_TEXT.items() if k != "linear_value_head_dim"}
    err = error(write_hf(tmp_path / "m", {"architectures": ["Qwen3_5ForCausalLM"], **text}))
    assert (err.rule, err.json_path) == ("required_field_missing", "linear_value_head_dim")
    assert "linear_value_head_dim" in str(err) and str(tmp_path / "m" / "config.json") in str(err)

    nested = {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text}
    err = error(write_hf(tmp_path / "n", nested))
    assert (err.rule, err.json_path) == ("required_field_missing", "text_config.linear_value_head_dim")


@pytest.mark.parametrize("case, rule, key", [
    ("tie_conflict", "field_mismatch", "text_config.tie_word_embeddings"),
    ("no_head", "untied_head_missing", "tie_word_embeddings"),
    ("vocab", "vocab_size_mismatch", "vocab_size"),
    ("layer_types", "field_type", "layer_types"),
    ("kinds", "layer_kind_mismatch", "model.layers.2.self_attn.q_proj.weight"),
    ("unknown", "unsupported_architecture", "architectures"),
    ("rope", "unsupported_rope", "rope_parameters"),
])
def test_inconsistent_config_is_a_typed_error(tmp_path, case, rule, key):
    text = copy.deepcopy(QWEN35_TEXT)
    config = {"architectures": ["Qwen3_5ForCausalLM"], **text}
    tensors = HEAD
    if case == "tie_conflict":
        config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "tie_word_embeddings": True,
                  "text_config": {**text, "tie_word_embeddings": False}}
    if case == "no_head":
        tensors = ("model.embed_tokens.weight", HEAD[2])
    if case == "kinds":
        tensors = (*HEAD, "model.layers.2.self_attn.q_proj.weight")
    if case == "vocab":
        config["vocab_size"] = V + 2
    if case == "layer_types":
        config["layer_types"] = ["linear_attention", "sliding_attention", "full_attention", "full_attention"]
    if case == "unknown":
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    if case == "rope":
        config["rope_parameters"] = {**text["rope_parameters"], "rope_type": "longrope"}
    err = error(write_hf(tmp_path / "m", config, tensors))
    assert (err.rule, err.json_path) == (rule, key)


@pytest.mark.parametrize("module, overrides", [
    (qwen35, {}),
    (qwen35, {"tie_word_embeddings": True, "full_attention_interval": 2, "num_hidden_layers": 4}),
    (qwen3, {}),
    (qwen3, {"tie_word_embeddings": False}),
])
def test_gguf_and_hf_configs_of_one_model_agree(tmp_path, module, overrides):
    cfg = module.config(**overrides)
    hf_dir = module.write_hf_dir(tmp_path / "hf", cfg)
    gguf_path = module.write_gguf(tmp_path / "m.gguf", cfg)
    with open_hf_dir(hf_dir) as hf_src, open_gguf(gguf_path) as gguf_src:
        from_hf, from_gguf = explain_text_config(hf_src), explain_text_config(gguf_src)
    assert from_hf.config == from_gguf.config
    for name, value in cfg.items():  # every normalised field the generator also wrote says the same
        if name in from_hf.config and name != "rope_parameters":
            assert from_hf.config[name] == value, name
    assert from_gguf.evidence["vocab_size"] == "derived (gguf_vocab_size)"
    assert from_hf.evidence["vocab_size"] == "derived (hf_vocab_size)"


BAD_VALUES = ["x", [], {}, -1, 0, 1.5, True, [1, "a"], {"full_attention": 3}]


def test_any_ill_typed_config_value_is_a_config_error_not_a_crash(tmp_path):
    """Every field of the config replaced by each ill-typed value: a result or a ConfigError, never another
    exception (the source is opened once; its parsed config is edited in memory)."""
    base = {"architectures": ["Qwen3_5ForCausalLM"], **copy.deepcopy(QWEN35_TEXT)}
    with open_hf_dir(write_hf(tmp_path / "m", base)) as src:
        outcomes = set()
        for name in list(base) + ["rope_scaling", "full_attention_interval", "tie_word_embeddings"]:
            for bad in BAD_VALUES:
                src.config = {**copy.deepcopy(base), name: bad}
                try:
                    normalize_text_config(src)
                    outcomes.add("ok")
                except ConfigError as exc:
                    assert exc.file == str(tmp_path / "m" / "config.json")
                    outcomes.add(exc.rule)
            for key in ("rope_type", "mrope_section", "mrope_interleaved", "rope_theta", "factor"):
                for bad in BAD_VALUES:
                    rp = {**base["rope_parameters"], key: bad}
                    if key == "factor":
                        rp["rope_type"] = "yarn"
                    src.config = {**copy.deepcopy(base), "rope_parameters": rp}
                    try:
                        normalize_text_config(src)
                    except ConfigError as exc:
                        outcomes.add(exc.rule)
    assert {"ok", "field_type", "field_range", "vocab_size_mismatch", "unsupported_rope"} <= outcomes


@pytest.mark.parametrize("field, value", [("num_hidden_layers", 2**31), ("num_hidden_layers", 10**20),
                                          ("num_hidden_layers", 5 * 10**7)])
def test_a_count_the_tensors_cannot_back_is_refused_before_allocating(tmp_path, field, value):
    """2^31 layers was a MemoryError, 10^20 an OverflowError, 5x10^7 853 MB before its error: every count is
    bounded by the tensors present first (a layer count by their number)."""
    import resource

    from converters.errors import ConversionError
    from converters.model.engine import open_model

    hf = qwen3.write_hf_dir(tmp_path / "hf", qwen3.config())
    config = json.loads((hf / "config.json").read_text())
    config[field] = value
    (hf / "config.json").write_text(json.dumps(config))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConversionError, match="exceeds what the checkpoint can back") as info:
        open_model(hf)
    assert info.value.rule == "config_count_bound" and info.value.json_path == f"config.{field}"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB
