"""Text config normalisation from GGUF metadata (container §4.2), on GGUFs written here with
``gguf.GGUFWriter`` the way llama.cpp's converter writes them (TextModel.set_gguf_parameters,
Qwen2MoeModel / Qwen3NextModel / _Qwen35MRopeMixin / _Qwen35MtpMixin), and compared with expected configs
written out by hand."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from converters.model.config_normalize import ConfigError, explain_text_config, normalize_text_config
from converters.sources import open_gguf

H, V = 16, 40


def write_gguf(path, arch: str, meta, tensors: dict[str, tuple[int, ...]]):
    w = gguf.GGUFWriter(str(path), arch)
    meta(w)
    for name, shape in tensors.items():
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def base_meta(w: gguf.GGUFWriter, *, blocks: int, heads: int = 4, kv: int = 2, head_dim: int | None = 8,
              ff: int = 40, tokens: int | None = V) -> None:
    """TextModel.set_gguf_parameters + _set_vocab_gpt2 (token list only)."""
    w.add_block_count(blocks)
    w.add_context_length(2048)
    w.add_embedding_length(H)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    if head_dim is not None:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if tokens is not None:
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"t{i}" for i in range(tokens)])


def qwen35_meta(w: gguf.GGUFWriter, *, layers: int = 8, mtp: int = 0, interval: int | None = 4) -> None:
    """Qwen3NextModel.set_gguf_parameters (+ MRoPE sections and MTP block count of the Qwen3.5 mixins)."""
    base_meta(w, blocks=layers + mtp)
    w.add_ssm_conv_kernel(4)
    w.add_ssm_state_size(8)      # linear_key_head_dim
    w.add_ssm_group_count(2)     # linear_num_key_heads
    w.add_ssm_time_step_rank(4)  # linear_num_value_heads
    w.add_ssm_inner_size(6 * 4)  # linear_value_head_dim * linear_num_value_heads
    if interval is not None:
        w.add_full_attention_interval(interval)
    w.add_rope_dimension_count(2)  # int(head_dim 8 * 0.25)
    w.add_rope_dimension_sections([1, 1, 0, 0])
    if mtp:
        w.add_nextn_predict_layers(mtp)


def hybrid_tensors(full_layers, *, untied: bool = True, extra=()) -> dict:
    t = {"token_embd.weight": (V, H)}
    if untied:
        t["output.weight"] = (V, H)
    for layer in full_layers:
        t[f"blk.{layer}.attn_q.weight"] = (2 * 4 * 8, H)
    for name in extra:
        t[name] = (2,)
    return t


def normalized(path) -> dict:
    with open_gguf(path) as src:
        return normalize_text_config(src)


QWEN3_EXPECTED = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": V, "hidden_size": H,
    "intermediate_size": 40, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 8, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0, "partial_rotary_factor": 1.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "partial_rotary_factor": 1.0},
    "max_position_embeddings": 2048, "tie_word_embeddings": False,
}

QWEN35_EXPECTED = {
    "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": V, "hidden_size": H,
    "intermediate_size": 40, "num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 8, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.25,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "partial_rotary_factor": 0.25,
                        "mrope_section": [1, 1, 0], "mrope_interleaved": True},
    "max_position_embeddings": 2048, "tie_word_embeddings": False,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"],
    "full_attention_interval": 4, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 6, "linear_conv_kernel_dim": 4, "attn_output_gate": True,
}


def test_qwen3_every_field(tmp_path):
    path = write_gguf(tmp_path / "q3.gguf", "qwen3", lambda w: base_meta(w, blocks=3),
                      {"token_embd.weight": (V, H), "output.weight": (V, H)})
    cfg = normalized(path)
    assert cfg == QWEN3_EXPECTED
    assert list(cfg)[:2] == ["architectures", "model_type"]
    assert repr(cfg["rms_norm_eps"]) == "1e-06"  # float32 in the file, its shortest repr here


def test_qwen3_tied_and_defaults_llama_cpp_applies(tmp_path):
    """No output.weight -> tied; no key_length -> n_embd / n_head; no freq_base -> 10000."""
    def meta(w):
        base_meta(w, blocks=2, head_dim=None)
        w.add_rope_dimension_count(4)  # H / heads = 4, full rotary

    path = write_gguf(tmp_path / "q3.gguf", "qwen3", meta, {"token_embd.weight": (V, H)})
    with open_gguf(path) as src:
        ex = explain_text_config(src)
    assert ex.config["tie_word_embeddings"] is True
    assert ex.config["head_dim"] == H // 4 and ex.config["partial_rotary_factor"] == 1.0
    assert ex.config["rope_theta"] == 1_000_000.0
    assert "derived (floor_quotient)" in ex.evidence["head_dim"]
    assert ex.evidence["hidden_size"] == "gguf key qwen3.embedding_length"


def test_qwen35_every_field(tmp_path):
    path = write_gguf(tmp_path / "q35.gguf", "qwen35", qwen35_meta, hybrid_tensors([3, 7]))
    assert normalized(path) == QWEN35_EXPECTED


def test_qwen35_mtp_blocks_are_not_trunk_layers(tmp_path):
    """_Qwen35MtpMixin counts the MTP block in block_count; llama.cpp n_layer() subtracts it."""
    path = write_gguf(tmp_path / "q35.gguf", "qwen35", lambda w: qwen35_meta(w, mtp=1),
                      hybrid_tensors([3, 7, 8]))
    cfg = normalized(path)
    assert cfg["num_hidden_layers"] == 8 and cfg["mtp_num_hidden_layers"] == 1
    assert cfg["layer_types"] == QWEN35_EXPECTED["layer_types"]


def test_qwen35_recurrent_layers_array_wins_and_interval_default(tmp_path):
    flags = [True, False, True, True, False, True]

    def meta(w):
        qwen35_meta(w, layers=6, interval=None)
        w.add_array("qwen35.attention.recurrent_layers", flags)

    path = write_gguf(tmp_path / "q35.gguf", "qwen35", meta, hybrid_tensors([1, 4]))
    cfg = normalized(path)
    assert cfg["layer_types"] == ["linear_attention" if f else "full_attention" for f in flags]
    assert "full_attention_interval" not in cfg  # not periodic: only layer_types is emitted

    path = write_gguf(tmp_path / "q35b.gguf", "qwen35", lambda w: qwen35_meta(w, interval=None),
                      hybrid_tensors([3, 7]))
    assert normalized(path)["full_attention_interval"] == 4  # llama.cpp's default interval


def test_qwen3moe_fields(tmp_path):
    def meta(w):
        base_meta(w, blocks=3, ff=48)
        w.add_expert_count(8)
        w.add_expert_used_count(2)
        w.add_expert_feed_forward_length(12)

    tensors = {"token_embd.weight": (V, H), "output.weight": (V, H),
               "blk.0.ffn_gate_inp.weight": (8, H), "blk.2.ffn_gate_inp.weight": (8, H)}
    cfg = normalized(write_gguf(tmp_path / "moe.gguf", "qwen3moe", meta, tensors))
    assert cfg["architectures"] == ["Qwen3MoeForCausalLM"] and cfg["model_type"] == "qwen3_moe"
    assert (cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"]) == (8, 2, 12)
    assert cfg["norm_topk_prob"] is True and cfg["decoder_sparse_step"] == 1
    assert cfg["mlp_only_layers"] == [1]  # blk.1 has no router: a dense layer
    assert cfg["intermediate_size"] == 48


def test_qwen3next_and_qwen35moe_fields(tmp_path):
    def meta(arch):
        def f(w):
            qwen35_meta(w, layers=4)
            w.add_expert_count(8)
            w.add_expert_used_count(2)
            w.add_expert_shared_feed_forward_length(20)
        return f

    routers = [f"blk.{i}.ffn_gate_inp.weight" for i in range(4)]
    nxt = normalized(write_gguf(tmp_path / "next.gguf", "qwen3next", meta("qwen3next"),
                                hybrid_tensors([3], extra=routers)))
    assert nxt["model_type"] == "qwen3_next" and "attn_output_gate" not in nxt
    assert nxt["moe_intermediate_size"] == 40 // 2  # llama.cpp fallback n_ff / n_expert_used
    assert nxt["shared_expert_intermediate_size"] == 20 and nxt["mlp_only_layers"] == []
    assert nxt["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert "mrope_section" not in nxt["rope_parameters"]

    moe = normalized(write_gguf(tmp_path / "q35moe.gguf", "qwen35moe", meta("qwen35moe"),
                                hybrid_tensors([3], extra=routers)))
    assert moe["architectures"] == ["Qwen3_5MoeForCausalLM"] and moe["model_type"] == "qwen3_5_moe_text"
    assert "intermediate_size" not in moe and "norm_topk_prob" not in moe
    assert (moe["num_experts"], moe["num_experts_per_tok"], moe["shared_expert_intermediate_size"]) == (8, 2, 20)
    assert moe["attn_output_gate"] is True


def test_yarn_scaling_goes_to_rope_parameters(tmp_path):
    def meta(w):
        base_meta(w, blocks=1)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(32768)

    cfg = normalized(write_gguf(tmp_path / "y.gguf", "qwen3", meta, {"token_embd.weight": (V, H)}))
    assert cfg["rope_parameters"] == {"rope_type": "yarn", "rope_theta": 1_000_000.0, "partial_rotary_factor": 1.0,
                                      "factor": 4.0, "original_max_position_embeddings": 32768}


def _error(path) -> ConfigError:
    with open_gguf(path) as src, pytest.raises(ConfigError) as info:
        normalize_text_config(src)
    assert info.value.file == str(path)
    return info.value


def test_missing_required_key_names_file_and_key(tmp_path):
    def meta(w):
        qwen35_meta(w)
        del w.kv_data[0]["qwen35.ssm.group_count"]

    err = _error(write_gguf(tmp_path / "q.gguf", "qwen35", meta, hybrid_tensors([3, 7])))
    assert err.json_path == "qwen35.ssm.group_count" and err.rule == "required_field_missing"
    assert "linear_num_key_heads" in err.message


@pytest.mark.parametrize("case, rule, key", [
    ("vocab", "vocab_size_mismatch", "tokenizer.ggml.tokens"),
    ("kinds", "layer_kind_mismatch", "blk.2.attn_q.weight"),
    ("inner", "exact_quotient", "qwen35.ssm.inner_size"),
    ("type", "field_type", "qwen35.attention.head_count"),
    ("nextn", "layer_count", "qwen35.nextn_predict_layers"),
])
def test_inconsistent_metadata_is_a_typed_error(tmp_path, case, rule, key):
    tensors = hybrid_tensors([3, 7])

    def meta(w):
        qwen35_meta(w)
        kv = w.kv_data[0]
        if case == "inner":
            kv["qwen35.ssm.inner_size"] = gguf.GGUFValue(25, gguf.GGUFValueType.UINT32)
        if case == "type":
            kv["qwen35.attention.head_count"] = gguf.GGUFValue("four", gguf.GGUFValueType.STRING)
        if case == "nextn":
            w.add_nextn_predict_layers(8)

    if case == "vocab":
        tensors["token_embd.weight"] = (V + 1, H)
    if case == "kinds":
        tensors["blk.2.attn_q.weight"] = (64, H)
    err = _error(write_gguf(tmp_path / "q.gguf", "qwen35", meta, tensors))
    assert (err.rule, err.json_path) == (rule, key)


def test_unknown_architecture(tmp_path):
    err = _error(write_gguf(tmp_path / "l.gguf", "llama", lambda w: base_meta(w, blocks=1),
                            {"token_embd.weight": (V, H)}))
    assert err.rule == "unsupported_architecture" and "'llama'" in err.message


def test_any_ill_typed_metadata_value_is_a_config_error_not_a_crash(tmp_path):
    """Each metadata value replaced by values of other types, through the Source surface the normaliser
    reads (kind, path, metadata, tensors): a result or a ConfigError, never another exception."""
    from types import SimpleNamespace

    path = write_gguf(tmp_path / "q35.gguf", "qwen35", lambda w: qwen35_meta(w, mtp=1), hybrid_tensors([3, 7, 8]))
    with open_gguf(path) as src:
        real = {k: src.metadata[k] for k in src.metadata}
        rules = set()
        for key in real:
            for bad in ("x", [], [True], -3, 0, 2.5, True, [1.5, 2]):
                fake = SimpleNamespace(kind="gguf", path=src.path, tensors=src.tensors, metadata={**real, key: bad})
                try:
                    normalize_text_config(fake)
                except ConfigError as exc:
                    assert exc.file == str(path)
                    rules.add(exc.rule)
    assert {"field_type", "field_range", "unsupported_architecture", "ratio_range"} <= rules
