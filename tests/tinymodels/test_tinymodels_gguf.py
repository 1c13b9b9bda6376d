"""GGUFs written by tinymodels, read back with gguf-py's GGUFReader, transforms undone here by hand.

The undo (``logical_from_gguf``) is written independently of tinymodels from the conventions in
``docs/gguf-conventions.md``: norms −1 (not ``ssm_norm``), ``A_log = log(−ssm_a)``,
value heads tiled → grouped, ``attn_q`` split per head into query | gate.
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from converters.acceptance import golden
from tinymodels import gguf_writer, qwen3, qwen35, tokenizer

Q = GGMLQuantizationType


def read_gguf(path) -> tuple[GGUFReader, dict[str, np.ndarray], dict[str, GGMLQuantizationType]]:
    reader = GGUFReader(path)
    arrays, types = {}, {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))  # GGUF dims are fastest-first
        arrays[t.name] = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(shape)
        types[t.name] = t.tensor_type
    return reader, arrays, types


def field(reader: GGUFReader, key: str):
    return reader.fields[key].contents()


def tiled_to_grouped(x: np.ndarray, axis: int, hk: int, r: int, hd: int) -> np.ndarray:
    moved = np.moveaxis(x, axis, 0)
    rest = moved.shape[1:]
    grouped = moved.reshape(r, hk, hd, *rest).transpose(1, 0, 2, *range(3, 3 + len(rest)))
    return np.moveaxis(grouped.reshape(moved.shape), 0, axis)


def logical_from_gguf(g: dict[str, np.ndarray], cfg: dict) -> dict[str, np.ndarray]:
    """Undo llama.cpp's Qwen3.5 / Qwen3 transforms; returns the contract's logical parameters."""
    shift = 1.0 if cfg["model_type"].startswith("qwen3_5") else 0.0
    out = {"text/token_embedding": g["token_embd.weight"], "text/final_norm": g["output_norm.weight"] - shift,
           "text/output_head": g.get("output.weight", g["token_embd.weight"])}
    hk, hv = cfg.get("linear_num_key_heads", 0), cfg.get("linear_num_value_heads", 0)
    dk, dv = cfg.get("linear_key_head_dim", 0), cfg.get("linear_value_head_dim", 0)
    nh, hd = cfg["num_attention_heads"], cfg["head_dim"]
    for layer, kind in enumerate(cfg["layer_types"]):
        b, q = f"blk.{layer}.", f"text/layers/{layer}/"
        out[q + "input_norm"] = g[b + "attn_norm.weight"] - shift
        post = b + ("post_attention_norm.weight" if shift else "ffn_norm.weight")
        out[q + "post_attention_norm"] = g[post] - shift
        for part in ("gate", "up", "down"):
            out[q + f"mlp/{part}"] = g[b + f"ffn_{part}.weight"]
        if kind == "full_attention":
            attn_q = g[b + "attn_q.weight"]
            if shift:  # per head [query (hd rows) | gate (hd rows)]
                heads = attn_q.reshape(nh, 2, hd, -1)
                out[q + "attention/query"] = heads[:, 0].reshape(nh * hd, -1)
                out[q + "attention/gate"] = heads[:, 1].reshape(nh * hd, -1)
            else:
                out[q + "attention/query"] = attn_q
            out[q + "attention/key"] = g[b + "attn_k.weight"]
            out[q + "attention/value"] = g[b + "attn_v.weight"]
            out[q + "attention/output"] = g[b + "attn_output.weight"]
            out[q + "attention/query_norm"] = g[b + "attn_q_norm.weight"] - shift
            out[q + "attention/key_norm"] = g[b + "attn_k_norm.weight"] - shift
            continue
        r, kd = hv // hk, hk * dk
        qkv, conv = g[b + "attn_qkv.weight"], g[b + "ssm_conv1d.weight"]
        out[q + "gdn/query"], out[q + "gdn/key"] = qkv[:kd], qkv[kd : 2 * kd]
        out[q + "gdn/value"] = tiled_to_grouped(qkv[2 * kd :], 0, hk, r, dv)
        out[q + "gdn/z"] = tiled_to_grouped(g[b + "attn_gate.weight"], 0, hk, r, dv)
        out[q + "gdn/b"] = tiled_to_grouped(g[b + "ssm_beta.weight"], 0, hk, r, 1)
        out[q + "gdn/a"] = tiled_to_grouped(g[b + "ssm_alpha.weight"], 0, hk, r, 1)
        out[q + "gdn/conv1d"] = np.concatenate([conv[: 2 * kd], tiled_to_grouped(conv[2 * kd :], 0, hk, r, dv)])
        out[q + "gdn/dt_bias"] = tiled_to_grouped(g[b + "ssm_dt.bias"], 0, hk, r, 1)
        out[q + "gdn/a_log"] = np.log(-tiled_to_grouped(g[b + "ssm_a"], 0, hk, r, 1).astype(np.float64))
        out[q + "gdn/norm"] = g[b + "ssm_norm.weight"]
        out[q + "gdn/output"] = tiled_to_grouped(g[b + "ssm_out.weight"], 1, hk, r, dv)
    return out


@pytest.fixture(scope="module")
def q35_f32(tmp_path_factory):
    cfg = qwen35.config()
    path = qwen35.write_gguf(tmp_path_factory.mktemp("q35") / "tiny.gguf", cfg)
    return cfg, path, read_gguf(path)


def test_qwen35_f32_gguf_undone_equals_logical_parameters(q35_f32):
    cfg, _, (_, g, _) = q35_f32
    ref = qwen35.logical_parameters(cfg)
    got = logical_from_gguf(g, cfg)
    assert got.keys() == ref.keys()
    for name, value in ref.items():
        if name.endswith("/a_log"):
            np.testing.assert_allclose(got[name], value, rtol=2e-7, atol=0, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_qwen35_v_heads_are_tiled_and_norms_shifted_in_the_file(q35_f32):
    cfg, _, (_, g, _) = q35_f32
    hf = qwen35.hf_tensors(cfg)
    z = hf["model.layers.0.linear_attn.in_proj_z.weight"].reshape(4, 32, 128)  # grouped: (k0v0, k0v1, k1v0, k1v1)
    gguf_z = g["blk.0.attn_gate.weight"].reshape(4, 32, 128)  # tiled: (k0v0, k1v0, k0v1, k1v1)
    for tiled, grouped in enumerate([0, 2, 1, 3]):
        np.testing.assert_array_equal(gguf_z[tiled], z[grouped])
    out = hf["model.layers.0.linear_attn.out_proj.weight"].reshape(128, 4, 32)
    np.testing.assert_array_equal(g["blk.0.ssm_out.weight"].reshape(128, 4, 32)[:, 1], out[:, 2])
    a_log = hf["model.layers.4.linear_attn.A_log"]
    np.testing.assert_allclose(g["blk.4.ssm_a"], -np.exp(a_log[[0, 2, 1, 3]]), rtol=1e-6)
    np.testing.assert_array_equal(g["blk.0.ssm_norm.weight"], hf["model.layers.0.linear_attn.norm.weight"])
    np.testing.assert_array_equal(g["blk.3.attn_q_norm.weight"], hf["model.layers.3.self_attn.q_norm.weight"] + 1)
    np.testing.assert_array_equal(g["blk.3.attn_q.weight"], hf["model.layers.3.self_attn.q_proj.weight"])


def test_qwen35_metadata_and_tokenizer(q35_f32):
    cfg, _, (reader, g, types) = q35_f32
    expect = {
        "general.architecture": "qwen35", "general.file_type": 0, "qwen35.block_count": 8,
        "qwen35.embedding_length": 128, "qwen35.feed_forward_length": 256, "qwen35.context_length": 4096,
        "qwen35.attention.head_count": 4, "qwen35.attention.head_count_kv": 2,
        "qwen35.attention.key_length": 32, "qwen35.attention.value_length": 32,
        "qwen35.rope.freq_base": 1e7, "qwen35.rope.dimension_count": 8,
        "qwen35.rope.dimension_sections": [2, 1, 1, 0], "qwen35.full_attention_interval": 4,
        "qwen35.ssm.conv_kernel": 4, "qwen35.ssm.state_size": 32, "qwen35.ssm.group_count": 2,
        "qwen35.ssm.time_step_rank": 4, "qwen35.ssm.inner_size": 128,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen35",
        "tokenizer.ggml.eos_token_id": 354, "tokenizer.ggml.bos_token_id": 352,
        "tokenizer.ggml.padding_token_id": 352, "tokenizer.ggml.add_bos_token": False,
        "tokenizer.chat_template": tokenizer.CHAT_TEMPLATE,
    }
    for key, value in expect.items():
        assert field(reader, key) == pytest.approx(value), key
    assert field(reader, "qwen35.attention.layer_norm_rms_epsilon") == pytest.approx(1e-6)
    tok = tokenizer.tokenizer_json()
    assert field(reader, "tokenizer.ggml.tokens") == tokenizer.gguf_token_list(tok, 512)[0]
    assert field(reader, "tokenizer.ggml.merges") == [" ".join(m) for m in tok["model"]["merges"]]
    assert len(field(reader, "tokenizer.ggml.token_type")) == 512
    layers_with_q = sorted(int(n.split(".")[1]) for n in g if n.endswith("attn_q.weight"))
    assert layers_with_q == [i for i, k in enumerate(cfg["layer_types"]) if k == "full_attention"] == [3, 7]
    assert "blk.0.ffn_norm.weight" not in g and all(t == Q.F32 for t in types.values())


def test_qwen35_q8_0_matrices_within_quantization_bound_rest_exact(tmp_path):
    cfg = qwen35.config()
    _, g, types = read_gguf(qwen35.write_gguf(tmp_path / "q8.gguf", cfg, matrix_type="Q8_0"))
    f32 = {t: Q.F32 for t in ("ssm_conv1d.weight", "ssm_a", "ssm_dt.bias", "ssm_norm.weight", "attn_norm.weight")}
    assert types["blk.0.attn_qkv.weight"] == Q.Q8_0 and types["token_embd.weight"] == Q.Q8_0
    assert all(types[f"blk.0.{n}"] == t for n, t in f32.items())
    ref, got = qwen35.logical_parameters(cfg), logical_from_gguf(g, cfg)
    for name, value in ref.items():
        if value.ndim == 2 and not name.endswith("conv1d"):
            blocks = value.reshape(value.shape[0], -1, 32)
            step = np.abs(blocks).max(axis=-1, keepdims=True) / 127  # one Q8_0 step per block
            err = np.abs(got[name].reshape(blocks.shape) - blocks)
            # half a step for rounding, plus 127 × the fp16 rounding of the step (2**-11 relative)
            assert np.all(err <= step * (0.5 + 127 * 2.0**-11) + 1e-7), name
            assert not np.array_equal(got[name], value), name  # really quantized
        elif name.endswith("/a_log"):
            np.testing.assert_allclose(got[name], value, rtol=2e-7)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    logits = golden.compare_logits(golden.forward(cfg, ref, [5, 77, 300, 352]),
                                   golden.forward(cfg, got, [5, 77, 300, 352]))
    assert logits["top1_agreement"] == 1.0 and logits["cosine"] > 0.999


@pytest.mark.parametrize("matrix", ["F16", "BF16"])
def test_qwen35_half_precision_files_are_exact(tmp_path, matrix):
    cfg = qwen35.config(layers=4)
    _, g, types = read_gguf(qwen35.write_gguf(tmp_path / "h.gguf", cfg, matrix_type=matrix))
    assert types["blk.3.attn_q.weight"] == Q[matrix] and types["blk.3.attn_q_norm.weight"] == Q.F32
    got, ref = logical_from_gguf(g, cfg), qwen35.logical_parameters(cfg)
    for name in ref:
        if not name.endswith("a_log"):
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)


def test_qwen3_dense_gguf_tied_no_shift(tmp_path):
    cfg = qwen3.config()
    reader, g, types = read_gguf(qwen3.write_gguf(tmp_path / "q3.gguf", cfg))
    assert field(reader, "general.architecture") == "qwen3" and field(reader, "tokenizer.ggml.pre") == "qwen2"
    assert "output.weight" not in g and "blk.0.ffn_norm.weight" in g  # tied head, qwen3 ffn_norm
    assert "qwen3.rope.dimension_count" not in reader.fields
    ref, got = qwen3.logical_parameters(cfg), logical_from_gguf(g, cfg)
    assert got.keys() == ref.keys()
    for name, value in ref.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_type_rules_follow_the_converter():
    assert gguf_writer.tensor_qtype("blk.0.attn_norm.weight", (128,), "Q8_0") == Q.F32
    assert gguf_writer.tensor_qtype("blk.0.ssm_conv1d.weight", (256, 4), "Q8_0") == Q.F32
    assert gguf_writer.tensor_qtype("blk.0.ssm_a", (4,), "BF16") == Q.F32
    assert gguf_writer.tensor_qtype("token_embd.weight", (512, 256), "TQ2_0") == Q.F16
    assert gguf_writer.tensor_qtype("blk.0.ffn_down.weight", (128, 256), "TQ2_0") == Q.TQ2_0
    assert gguf_writer.tensor_qtype("blk.0.ffn_up.weight", (256, 128), "TQ2_0") == Q.F16  # 128 % 256: fallback
    with pytest.raises(ValueError, match="not supported"):
        gguf_writer.matrix_type("Q4_K")


def test_streaming_in_small_chunks_gives_identical_bytes(tmp_path, monkeypatch):
    cfg = qwen3.config(layers=1)
    whole = qwen3.write_gguf(tmp_path / "a.gguf", cfg, matrix_type="Q8_0").read_bytes()
    monkeypatch.setattr(gguf_writer, "CHUNK_ELEMENTS", 300)  # a few rows per chunk
    chunked = qwen3.write_gguf(tmp_path / "b.gguf", cfg, matrix_type="Q8_0").read_bytes()
    assert whole == chunked


def test_refuses_to_overwrite_and_leaves_no_partial_file(tmp_path):
    target = tmp_path / "x.gguf"
    target.write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        qwen3.write_gguf(target, qwen3.config(layers=1))
    assert target.read_bytes() == b"keep"
    with pytest.raises(ValueError, match="not supported"):
        qwen3.write_gguf(tmp_path / "y.gguf", qwen3.config(layers=1), matrix_type="IQ2_XS")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.gguf"]


def test_cli_writes_both_forms(tmp_path):
    from tinymodels.__main__ import main

    assert main(["qwen35", "--hf", str(tmp_path / "hf"), "--gguf", str(tmp_path / "m.gguf"), "--set", "layers=4",
                 "--matrix-type", "Q8_0", "--shards", "1"]) == 0
    reader, _, types = read_gguf(tmp_path / "m.gguf")
    assert field(reader, "qwen35.block_count") == 4 and types["blk.3.attn_q.weight"] == Q.Q8_0
    assert (tmp_path / "hf" / "model.safetensors").is_file()
    assert main(["qwen3", "--gguf", str(tmp_path / "m.gguf")]) == 1
