"""MoE generators (Qwen3-MoE, Qwen3.5-MoE with MTP, Qwen3-Next): GGUFs read back with gguf-py's GGUFReader,
HF directories with the safetensors library, llama.cpp's transforms undone here by hand.

The undo is written from ``docs/gguf-conventions.md`` and llama.cpp's converter, not from
tinymodels: banks ``(E, N, K)`` indexed by expert, ``ffn_gate_up_exps`` split in half (gate first),
norms −1 (zero-centred archs, not ``ssm_norm``), ``A_log = log(−ssm_a)``, Qwen3.5 V heads tiled →
grouped, Qwen3-Next ``ssm_ba`` de-interleaved per key head, the MTP block at ``blk.{L}``.
"""

from __future__ import annotations

import json
import tracemalloc

import ml_dtypes  # noqa: F401  (registers numpy bfloat16 for safetensors' numpy backend)
import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize
from safetensors import safe_open

from tinymodels import gguf_writer, qwen3_moe, qwen3_next, qwen35_moe

Q = GGMLQuantizationType


def read_gguf(path):
    reader = GGUFReader(path)
    arrays = {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(
        tuple(int(d) for d in reversed(t.shape.tolist()))) for t in reader.tensors}
    types = {t.name: t.tensor_type for t in reader.tensors}
    dims = {t.name: tuple(int(d) for d in t.shape.tolist()) for t in reader.tensors}
    return reader, arrays, types, dims


def read_hf(path) -> dict[str, np.ndarray]:
    index = path / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for name in files:
        with safe_open(path / name, framework="np") as f:
            out.update({k: f.get_tensor(k).astype(np.float32) for k in f.keys()})
    return out


def tiled_to_grouped(x, hk, r, hd, axis=0):
    moved = np.moveaxis(x, axis, 0)
    grouped = moved.reshape(r, hk, hd, *moved.shape[1:]).swapaxes(0, 1).reshape(moved.shape)
    return np.moveaxis(grouped, 0, axis)


def undo_moe(g, cfg, b, q, shared):
    """An expert bank ``(E, N, K)``: expert ``e`` is ``bank[e]``; fused banks are ``[gate | up]``."""
    out = {q + "moe/router": g[b + "ffn_gate_inp.weight"]}
    if b + "ffn_gate_up_exps.weight" in g:
        fused, inter = g[b + "ffn_gate_up_exps.weight"], cfg["moe_intermediate_size"]
        gate, up = fused[:, :inter], fused[:, inter:]
    else:
        gate, up = g[b + "ffn_gate_exps.weight"], g[b + "ffn_up_exps.weight"]
    down = g[b + "ffn_down_exps.weight"]
    for e in range(cfg["num_experts"]):
        out[q + f"moe/experts/{e}/gate"], out[q + f"moe/experts/{e}/up"] = gate[e], up[e]
        out[q + f"moe/experts/{e}/down"] = down[e]
    if shared:
        for part in ("gate", "up", "down"):
            out[q + f"moe/shared_expert/{part}"] = g[b + f"ffn_{part}_shexp.weight"]
        out[q + "moe/shared_expert_gate"] = g[b + "ffn_gate_inp_shexp.weight"]
    return out


def undo_attention(g, cfg, b, q, shift, gated):
    nh, hd = cfg["num_attention_heads"], cfg["head_dim"]
    out = {q + "attention/" + k: g[b + f"attn_{v}.weight"] for k, v in (("key", "k"), ("value", "v"), ("output", "output"))}
    out[q + "attention/query_norm"] = g[b + "attn_q_norm.weight"] - shift
    out[q + "attention/key_norm"] = g[b + "attn_k_norm.weight"] - shift
    attn_q = g[b + "attn_q.weight"]
    if gated:
        heads = attn_q.reshape(nh, 2, hd, -1)
        out[q + "attention/query"], out[q + "attention/gate"] = heads[:, 0].reshape(nh * hd, -1), heads[:, 1].reshape(nh * hd, -1)
    else:
        out[q + "attention/query"] = attn_q
    return out


def undo_gdn(g, cfg, b, q, next_layout):
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv, r = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"], hv // hk
    kd = hk * dk
    qkv, conv = g[b + "attn_qkv.weight"], g[b + "ssm_conv1d.weight"]
    untile = (lambda x, hd, axis=0: x) if next_layout else (lambda x, hd, axis=0: tiled_to_grouped(x, hk, r, hd, axis))
    out = {q + "gdn/query": qkv[:kd], q + "gdn/key": qkv[kd : 2 * kd], q + "gdn/value": untile(qkv[2 * kd :], dv),
           q + "gdn/z": untile(g[b + "attn_gate.weight"], dv),
           q + "gdn/conv1d": np.concatenate([conv[: 2 * kd], untile(conv[2 * kd :], dv)]),
           q + "gdn/dt_bias": untile(g[b + "ssm_dt.bias"], 1),
           q + "gdn/a_log": np.log(-untile(g[b + "ssm_a"], 1).astype(np.float64)),
           q + "gdn/norm": g[b + "ssm_norm.weight"], q + "gdn/output": untile(g[b + "ssm_out.weight"], dv, 1)}
    if next_layout:  # ssm_ba: per key head [b (r rows) | a (r rows)]
        ba = g[b + "ssm_ba.weight"].reshape(hk, 2 * r, -1)
        out[q + "gdn/b"], out[q + "gdn/a"] = ba[:, :r].reshape(hv, -1), ba[:, r:].reshape(hv, -1)
    else:
        out[q + "gdn/b"], out[q + "gdn/a"] = untile(g[b + "ssm_beta.weight"], 1), untile(g[b + "ssm_alpha.weight"], 1)
    return out


def undo(g, cfg, *, shift, gated, next_layout=False, shared=False):
    out = {"text/token_embedding": g["token_embd.weight"], "text/output_head": g.get("output.weight", g["token_embd.weight"]),
           "text/final_norm": g["output_norm.weight"] - shift}
    for layer, kind in enumerate(cfg["layer_types"]):
        b, q = f"blk.{layer}.", f"text/layers/{layer}/"
        out[q + "input_norm"] = g[b + "attn_norm.weight"] - shift
        post = b + ("post_attention_norm.weight" if shift else "ffn_norm.weight")
        out[q + "post_attention_norm"] = g[post] - shift
        if kind == "full_attention":
            out.update(undo_attention(g, cfg, b, q, shift, gated))
        else:
            out.update(undo_gdn(g, cfg, b, q, next_layout))
        if b + "ffn_gate_inp.weight" in g:
            out.update(undo_moe(g, cfg, b, q, shared))
        else:
            out.update({q + f"mlp/{p}": g[b + f"ffn_{p}.weight"] for p in ("gate", "up", "down")})
    for i in range(cfg.get("mtp_num_hidden_layers", 0)):
        L = cfg["num_hidden_layers"]
        b, q = f"blk.{L + i}.", f"mtp/layers/{i}/"
        out["mtp/fc"] = g[f"blk.{L}.nextn.eh_proj.weight"]
        out["mtp/pre_fc_norm_embedding"] = g[f"blk.{L}.nextn.enorm.weight"] - shift
        out["mtp/pre_fc_norm_hidden"] = g[f"blk.{L}.nextn.hnorm.weight"] - shift
        out["mtp/norm"] = g[f"blk.{L}.nextn.shared_head_norm.weight"] - shift
        out[q + "input_norm"] = g[b + "attn_norm.weight"] - shift
        out[q + "post_attention_norm"] = g[b + "post_attention_norm.weight"] - shift
        out.update(undo_attention(g, cfg, b, q, shift, gated=True))
        out.update(undo_moe(g, cfg, b, q, shared))
    return out


def assert_same(got, ref):
    assert got.keys() == ref.keys(), sorted(set(got) ^ set(ref))
    for name, value in ref.items():
        if name.endswith("/a_log"):
            np.testing.assert_allclose(got[name], value, rtol=2e-7, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_qwen3moe_gguf_banks_are_stacked_experts(tmp_path):
    cfg = qwen3_moe.config()
    reader, g, types, dims = read_gguf(qwen3_moe.write_gguf(tmp_path / "m.gguf", cfg))
    assert reader.fields["general.architecture"].contents() == "qwen3moe"
    meta = {k: reader.fields[f"qwen3moe.{k}"].contents() for k in
            ("expert_count", "expert_used_count", "expert_feed_forward_length", "feed_forward_length")}
    assert meta == {"expert_count": 8, "expert_used_count": 2, "expert_feed_forward_length": 64, "feed_forward_length": 256}
    assert dims["blk.1.ffn_gate_exps.weight"] == (128, 64, 8) and dims["blk.1.ffn_down_exps.weight"] == (64, 128, 8)
    assert dims["blk.1.ffn_gate_inp.weight"] == (128, 8) and "blk.1.ffn_gate_up_exps.weight" not in g
    assert_same(undo(g, cfg, shift=0.0, gated=False), qwen3_moe.logical_parameters(cfg))


def test_qwen3moe_q8_0_banks_within_bound_router_f32(tmp_path):
    cfg = qwen3_moe.config()
    _, g, types, _ = read_gguf(qwen3_moe.write_gguf(tmp_path / "m.gguf", cfg, matrix_type="Q8_0"))
    assert types["blk.1.ffn_gate_inp.weight"] == Q.F32 and types["blk.1.ffn_down_exps.weight"] == Q.Q8_0
    ref, got = qwen3_moe.logical_parameters(cfg), undo(g, cfg, shift=0.0, gated=False)
    assert got.keys() == ref.keys()
    for e in range(8):
        bank = ref[f"text/layers/1/moe/experts/{e}/down"].reshape(128, -1, 32)
        step = np.abs(bank).max(axis=-1, keepdims=True) / 127
        err = np.abs(got[f"text/layers/1/moe/experts/{e}/down"].reshape(bank.shape) - bank)
        assert np.all(err <= step * (0.5 + 127 * 2.0**-11) + 1e-7) and err.max() > 0
    np.testing.assert_array_equal(got["text/layers/1/moe/router"], ref["text/layers/1/moe/router"])
    with pytest.raises(ValueError, match="ffn_gate_up_exps"):
        qwen3_moe.write_gguf(tmp_path / "f.gguf", cfg, fused_gate_up=True)
    assert not (tmp_path / "f.gguf").exists()


def test_dense_layers_are_hf_only(tmp_path):
    cfg = qwen3_moe.config(mlp_only_layers=[0])
    ref = qwen3_moe.logical_parameters(cfg)
    assert "text/layers/0/mlp/gate" in ref and "text/layers/0/moe/router" not in ref
    assert "text/layers/1/mlp/gate" not in ref and "text/layers/1/moe/router" in ref
    hf = read_hf(qwen3_moe.write_hf_dir(tmp_path / "hf", cfg, shards=1))
    np.testing.assert_array_equal(hf["model.layers.0.mlp.gate_proj.weight"], ref["text/layers/0/mlp/gate"])
    assert hf["model.layers.0.mlp.gate_proj.weight"].shape == (256, 128) and "model.layers.0.mlp.gate.weight" not in hf
    for module, config in ((qwen3_moe, cfg), (qwen3_next, qwen3_next.config(mlp_only_layers=[1]))):
        with pytest.raises(ValueError, match="no GGUF names"):
            module.write_gguf(tmp_path / "d.gguf", config)
    assert qwen3_next.config(decoder_sparse_step=2)["num_hidden_layers"] == 4
    assert qwen3_moe.sparse_layers(qwen3_next.config(decoder_sparse_step=2)) == [1, 3]


def test_hf_expert_layouts_hold_the_same_experts(tmp_path):
    cfg = qwen3_moe.config()
    per = read_hf(qwen3_moe.write_hf_dir(tmp_path / "per", cfg, expert_layout="per_expert"))
    fused = read_hf(qwen3_moe.write_hf_dir(tmp_path / "fused", cfg, expert_layout="fused", shards=1))
    assert per.keys() - fused.keys() == {f"model.layers.{n}.mlp.experts.{e}.{p}_proj.weight"
                                         for n in range(2) for e in range(8) for p in ("gate", "up", "down")}
    assert fused.keys() - per.keys() == {f"model.layers.{n}.mlp.experts.{p}" for n in range(2)
                                         for p in ("gate_up_proj", "down_proj")}
    gate_up, down = fused["model.layers.1.mlp.experts.gate_up_proj"], fused["model.layers.1.mlp.experts.down_proj"]
    assert gate_up.shape == (8, 128, 128) and down.shape == (8, 128, 64)
    ref = qwen3_moe.logical_parameters(cfg)
    for e in range(8):
        p = f"model.layers.1.mlp.experts.{e}."
        np.testing.assert_array_equal(gate_up[e], np.concatenate([per[p + "gate_proj.weight"], per[p + "up_proj.weight"]]))
        np.testing.assert_array_equal(down[e], per[p + "down_proj.weight"])
        np.testing.assert_array_equal(gate_up[e, :64], ref[f"text/layers/1/moe/experts/{e}/gate"])
        np.testing.assert_array_equal(down[e], ref[f"text/layers/1/moe/experts/{e}/down"])
    np.testing.assert_array_equal(per["model.layers.0.mlp.gate.weight"], ref["text/layers/0/moe/router"])
    config = json.loads((tmp_path / "fused" / "config.json").read_text())
    assert config["architectures"] == ["Qwen3MoeForCausalLM"] and config["num_experts"] == 8


def test_every_expert_is_distinguishable():
    ref = qwen3_moe.logical_parameters(qwen3_moe.config())
    for part in ("gate", "up", "down"):
        experts = [ref[f"text/layers/0/moe/experts/{e}/{part}"] for e in range(8)]
        for i in range(8):
            for j in range(i + 1, 8):
                assert not np.allclose(experts[i], experts[j]), (part, i, j)
    # the same expert of another layer differs too: a bank bound to the wrong layer is caught
    assert not np.allclose(ref["text/layers/0/moe/experts/3/gate"], ref["text/layers/1/moe/experts/3/gate"])


def test_qwen35moe_fused_bank_and_mtp_block(tmp_path):
    cfg = qwen35_moe.config(mtp_num_hidden_layers=1)
    path = qwen35_moe.write_gguf(tmp_path / "m.gguf", cfg, matrix_type="BF16", fused_gate_up=True)
    reader, g, types, dims = read_gguf(path)
    field = lambda k: reader.fields[k].contents()  # noqa: E731
    assert field("general.architecture") == "qwen35moe" and field("qwen35moe.block_count") == 5
    assert field("qwen35moe.nextn_predict_layers") == 1 and field("qwen35moe.expert_shared_feed_forward_length") == 128
    assert "qwen35moe.feed_forward_length" not in reader.fields
    assert dims["blk.2.ffn_gate_up_exps.weight"] == (128, 128, 8) and "blk.2.ffn_gate_exps.weight" not in g
    assert dims["blk.4.nextn.eh_proj.weight"] == (256, 128) and types["blk.4.nextn.eh_proj.weight"] == Q.BF16
    assert types["blk.2.ffn_gate_inp_shexp.weight"] == Q.F32 and dims["blk.2.ffn_gate_inp_shexp.weight"] == (128, 1)
    assert types["blk.4.nextn.enorm.weight"] == Q.F32
    assert_same(undo(g, cfg, shift=1.0, gated=True, shared=True), qwen35_moe.logical_parameters(cfg))


def test_qwen35moe_hf_fused_layout_and_mtp_names(tmp_path):
    cfg = qwen35_moe.config(mtp_num_hidden_layers=1)
    hf = read_hf(qwen35_moe.write_hf_dir(tmp_path / "hf", cfg, expert_layout="fused"))
    ref = qwen35_moe.logical_parameters(cfg)
    gate_up = hf["mtp.layers.0.mlp.experts.gate_up_proj"]
    np.testing.assert_array_equal(gate_up[7, 64:], ref["mtp/layers/0/moe/experts/7/up"])
    np.testing.assert_array_equal(hf["mtp.fc.weight"], ref["mtp/fc"])
    np.testing.assert_array_equal(hf["model.layers.3.mlp.shared_expert_gate.weight"], ref["text/layers/3/moe/shared_expert_gate"])
    assert hf["mtp.fc.weight"].shape == (128, 256) and "model.layers.0.mlp.gate_proj.weight" not in hf
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "qwen3_5_moe_text" and "intermediate_size" not in config
    assert config["layer_types"][3] == "full_attention" and config["mtp_num_hidden_layers"] == 1


def test_qwen3next_gguf_regroups_qkvz_and_keeps_ba(tmp_path):
    cfg = qwen3_next.config()
    reader, g, types, dims = read_gguf(qwen3_next.write_gguf(tmp_path / "n.gguf", cfg))
    assert reader.fields["general.architecture"].contents() == "qwen3next"
    assert reader.fields["qwen3next.rope.dimension_count"].contents() == 8
    assert "qwen3next.rope.dimension_sections" not in reader.fields
    hf = qwen3_next.hf_tensors(cfg)
    np.testing.assert_array_equal(g["blk.0.ssm_ba.weight"], hf["model.layers.0.linear_attn.in_proj_ba.weight"])
    qkvz = hf["model.layers.0.linear_attn.in_proj_qkvz.weight"].reshape(2, 32 + 32 + 64 + 64, 128)
    np.testing.assert_array_equal(g["blk.0.attn_qkv.weight"][32:64], qkvz[1, :32])  # query of key head 1
    np.testing.assert_array_equal(g["blk.0.attn_gate.weight"][64:], qkvz[1, 128:])  # z of key head 1
    assert "blk.0.ssm_beta.weight" not in g and dims["blk.0.ssm_ba.weight"] == (128, 8)
    assert_same(undo(g, cfg, shift=1.0, gated=True, next_layout=True, shared=True), qwen3_next.logical_parameters(cfg))


def test_qwen3next_hf_split_matches_logical(tmp_path):
    cfg = qwen3_next.config()
    hf = read_hf(qwen3_next.write_hf_dir(tmp_path / "hf", cfg, expert_layout="fused", dtype="f32"))
    ref = qwen3_next.logical_parameters(cfg)
    ba = hf["model.layers.1.linear_attn.in_proj_ba.weight"].reshape(2, 4, 128)  # (key heads, [b0 b1 a0 a1])
    np.testing.assert_array_equal(ref["text/layers/1/gdn/b"], ba[:, :2].reshape(4, 128))
    np.testing.assert_array_equal(ref["text/layers/1/gdn/a"], ba[:, 2:].reshape(4, 128))
    qkvz = hf["model.layers.1.linear_attn.in_proj_qkvz.weight"].reshape(2, 192, 128)
    np.testing.assert_array_equal(ref["text/layers/1/gdn/value"], qkvz[:, 64:128].reshape(128, 128))
    np.testing.assert_array_equal(hf["model.layers.2.mlp.experts.down_proj"][6], ref["text/layers/2/moe/experts/6/down"])


def test_bank_memory_does_not_grow_with_the_bank(tmp_path, monkeypatch):
    def bank(experts):
        return qwen3_moe.config(layers=1, hidden=512, heads=4, head_dim=128, kv_heads=1, num_experts=experts,
                                num_experts_per_tok=2, moe_intermediate_size=512, intermediate_size=512)

    small, large = bank(2), bank(8)
    whole = qwen3_moe.write_gguf(tmp_path / "whole.gguf", small).read_bytes()
    monkeypatch.setattr(gguf_writer, "CHUNK_ELEMENTS", 1 << 15)  # 128 KiB of float32: an expert is 1 MiB
    peaks = []
    for name, cfg in (("small", small), ("large", large)):
        tracemalloc.start()
        qwen3_moe.write_gguf(tmp_path / f"{name}.gguf", cfg)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert (tmp_path / "small.gguf").read_bytes() == whole  # chunking below one expert changes no byte
    one_expert = 512 * 512 * 4
    assert qwen3_moe.bank_nbytes(large, "F32") == 8 * one_expert
    assert peaks[1] - peaks[0] < one_expert / 4, peaks  # 6 more experts per bank, no more memory
    cfg = qwen3_moe.bank_config(6 << 30, "Q8_0", hidden=4096, num_experts=16)
    assert 5.9 * 2**30 < qwen3_moe.bank_nbytes(cfg, "Q8_0") <= 6 << 30 and cfg["moe_intermediate_size"] % 32 == 0


def test_determinism(tmp_path):
    cfg = qwen3_next.config(layers=4, num_experts=4)
    a = qwen3_next.write_gguf(tmp_path / "a.gguf", cfg, seed=3).read_bytes()
    b = qwen3_next.write_gguf(tmp_path / "b.gguf", cfg, seed=3).read_bytes()
    c = qwen3_next.write_gguf(tmp_path / "c.gguf", cfg, seed=4).read_bytes()
    assert a == b and a != c and len(a) == len(c)
