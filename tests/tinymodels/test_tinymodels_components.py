"""Component generators: Qwen3.5 MTP head (HF ``mtp.*``, GGUF ``blk.{L}``), vision tower (mmproj GGUF and the
``Qwen3_5ForConditionalGeneration`` directory), z-lab DFlash / DFlash2 drafters, proposal token counts.
Files are read back with gguf-py's GGUFReader and the safetensors library; the mmproj names and the
Conv3d split are undone here from llama.cpp's converter conventions, not from tinymodels."""

from __future__ import annotations

import json

import ml_dtypes  # noqa: F401  (registers numpy bfloat16 for safetensors' numpy backend)
import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize
from safetensors import safe_open

from tinymodels import dflash, qwen35, token_counts, tokenizer, vision
from tinymodels.__main__ import main

Q = GGMLQuantizationType


def read_gguf(path):
    reader = GGUFReader(path)
    arrays = {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(
        tuple(int(d) for d in reversed(t.shape.tolist()))) for t in reader.tensors}
    return reader, arrays, {t.name: t.tensor_type for t in reader.tensors}


def read_hf(path) -> dict[str, np.ndarray]:
    index = path / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    out = {}
    for name in files:
        with safe_open(path / name, framework="np") as f:
            out.update({k: f.get_tensor(k).astype(np.float32) for k in f.keys()})
    return out


# ---- MTP --------------------------------------------------------------------------------------------

def test_qwen35_mtp_gguf_block_and_hf_names(tmp_path):
    cfg = qwen35.config(layers=4, mtp_num_hidden_layers=1)
    reader, g, types = read_gguf(qwen35.write_gguf(tmp_path / "m.gguf", cfg, matrix_type="Q8_0"))
    assert reader.fields["qwen35.block_count"].contents() == 5 and reader.fields["qwen35.nextn_predict_layers"].contents() == 1
    block = sorted(n.removeprefix("blk.4.") for n in g if n.startswith("blk.4."))
    assert block == sorted(["nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight",
                            "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                            "attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight",
                            "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"])
    assert types["blk.4.nextn.eh_proj.weight"] == Q.Q8_0 and types["blk.4.nextn.enorm.weight"] == Q.F32
    ref = qwen35.logical_parameters(cfg)
    mtp_ref = {k: v for k, v in ref.items() if k.startswith("mtp/")}
    assert len(mtp_ref) == 16 and ref["mtp/fc"].shape == (128, 256)
    # norms are written +1 (renamed to ...norm.weight before modify_tensors), matrices whole
    np.testing.assert_array_equal(g["blk.4.nextn.enorm.weight"] - 1, ref["mtp/pre_fc_norm_embedding"])
    np.testing.assert_array_equal(g["blk.4.nextn.hnorm.weight"] - 1, ref["mtp/pre_fc_norm_hidden"])
    np.testing.assert_array_equal(g["blk.4.nextn.shared_head_norm.weight"] - 1, ref["mtp/norm"])
    np.testing.assert_array_equal(g["blk.4.attn_q_norm.weight"] - 1, ref["mtp/layers/0/attention/query_norm"])
    np.testing.assert_array_equal(g["blk.4.post_attention_norm.weight"] - 1, ref["mtp/layers/0/post_attention_norm"])
    heads = g["blk.4.attn_q.weight"].reshape(4, 2, 32, 128)  # per head [query | gate], Q8_0: within a step
    np.testing.assert_allclose(heads[:, 1].reshape(128, 128), ref["mtp/layers/0/attention/gate"], atol=0.02)
    assert not np.allclose(heads[:, 0].reshape(128, 128), ref["mtp/layers/0/attention/gate"], atol=0.02)
    hf = read_hf(qwen35.write_hf_dir(tmp_path / "hf", cfg, shards=1))
    assert {n for n in hf if n.startswith("mtp.")} == {
        "mtp.fc.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight",
        *(f"mtp.layers.0.{n}.weight" for n in ("input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
                                               "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                               "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj",
                                               "mlp.up_proj", "mlp.down_proj"))}
    np.testing.assert_array_equal(hf["mtp.fc.weight"], ref["mtp/fc"])
    np.testing.assert_array_equal(hf["mtp.layers.0.mlp.down_proj.weight"], ref["mtp/layers/0/mlp/down"])
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["mtp_num_hidden_layers"] == 1
    assert not any(k.startswith("mtp/") for k in qwen35.logical_parameters(qwen35.config(layers=4)))


# ---- vision -----------------------------------------------------------------------------------------

MMPROJ_BLOCK = {"ln1": "input_norm", "ln2": "post_attention_norm", "attn_qkv": "attention/qkv",
                "attn_out": "attention/output", "ffn_up": "mlp/up", "ffn_down": "mlp/down"}
MMPROJ_MERGER = {"v.post_ln": "norm", "mm.0": "fc1", "mm.2": "fc2"}


def undo_mmproj(g, vcfg):
    """llama.cpp's mmproj names back to the logical names; the two time halves re-joined on axis 2."""
    out = {"vision/patch_embedding": np.stack([g["v.patch_embd.weight"], g["v.patch_embd.weight.1"]], axis=2),
           "vision/patch_embedding_bias": g["v.patch_embd.bias"], "vision/position_embedding": g["v.position_embd.weight"]}
    for name, value in g.items():
        stem, _, kind = name.rpartition(".")
        suffix = "" if kind == "weight" else "_bias"
        if name.startswith("v.blk."):
            _, _, i, tensor = stem.split(".")
            out[f"vision/layers/{i}/{MMPROJ_BLOCK[tensor]}{suffix}"] = value
        elif stem in MMPROJ_MERGER:
            out[f"vision/merger/{MMPROJ_MERGER[stem]}{suffix}"] = value
        elif name.startswith("v.deepstack."):
            _, _, layer, tensor = stem.split(".")
            k = vcfg["deepstack_visual_indexes"].index(int(layer))
            out[f"vision/deepstack/{k}/{tensor}{suffix}"] = value
    return out


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_vl"])
def test_mmproj_rejoins_to_the_tower(tmp_path, family):
    vcfg = vision.config(family)
    reader, g, types = read_gguf(vision.write_mmproj(tmp_path / "mm.gguf", vcfg, qwen35.config()))
    field = lambda k: reader.fields[k].contents()  # noqa: E731
    assert field("general.architecture") == "clip" and field("general.type") == "mmproj"
    assert field("clip.projector_type") == "qwen3vl_merger" and field("clip.has_vision_encoder") is True
    assert field("clip.vision.projection_dim") == 128 and field("clip.vision.image_size") == 64
    assert field("clip.vision.block_count") == 2 and field("clip.vision.spatial_merge_size") == 2
    assert field("clip.vision.image_mean") == pytest.approx([0.5] * 3) and field("clip.use_gelu") is True
    deepstack = [False, False] if family == "qwen3_5" else [True, False]
    assert field("clip.vision.is_deepstack_layers") == deepstack
    assert g["v.patch_embd.weight"].shape == (64, 3, 8, 8) and g["mm.0.weight"].shape == (256, 256)
    ref = vision.logical_parameters(vcfg)
    got = undo_mmproj(g, vcfg)
    assert got.keys() == ref.keys()
    for name, value in ref.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)
    assert ref["vision/merger/norm"].shape == (64,)
    if family == "qwen3_vl":
        assert ref["vision/deepstack/0/norm"].shape == (256,)  # post-shuffle norm


def test_mmproj_types_follow_the_converter(tmp_path):
    vcfg = vision.config()
    _, g, types = read_gguf(vision.write_mmproj(tmp_path / "f16.gguf", vcfg, matrix_type="F16"))
    assert types["v.patch_embd.weight"] == types["v.patch_embd.weight.1"] == Q.F16
    assert types["v.position_embd.weight"] == Q.F32 and types["v.blk.0.attn_qkv.bias"] == Q.F32
    assert types["v.blk.1.ffn_down.weight"] == types["mm.2.weight"] == Q.F16
    _, g8, types8 = read_gguf(vision.write_mmproj(tmp_path / "q8.gguf", vcfg, matrix_type="Q8_0"))
    assert types8["v.patch_embd.weight.1"] == Q.F32 and types8["v.blk.0.attn_qkv.weight"] == Q.Q8_0
    np.testing.assert_array_equal(g8["v.patch_embd.weight.1"], vision.logical_parameters(vcfg)["vision/patch_embedding"][:, :, 1])
    with pytest.raises(ValueError, match="temporal_patch_size"):
        vision.write_mmproj(tmp_path / "t.gguf", vision.config(temporal_patch_size=3))
    with pytest.raises(ValueError, match="out_hidden_size"):
        vision.write_mmproj(tmp_path / "o.gguf", vision.config(out_hidden_size=64))
    assert not (tmp_path / "t.gguf").exists()


def test_conditional_generation_directory(tmp_path):
    text_cfg = qwen35.config(layers=4, mtp_num_hidden_layers=1)
    path = vision.write_hf_dir(tmp_path / "vl", text_cfg, vision.config())
    hf = read_hf(path)
    prefixes = {n.split(".")[0] + "." + n.split(".")[1] if n.startswith("model.") else n.split(".")[0] for n in hf}
    assert prefixes == {"model.language_model", "model.visual", "lm_head", "mtp"}
    ref = vision.checkpoint_logical_parameters(text_cfg, vision.config())
    np.testing.assert_array_equal(hf["model.language_model.layers.3.self_attn.k_proj.weight"], ref["text/layers/3/attention/key"])
    np.testing.assert_array_equal(hf["model.language_model.embed_tokens.weight"], ref["text/token_embedding"])
    np.testing.assert_array_equal(hf["model.visual.blocks.1.attn.qkv.bias"], ref["vision/layers/1/attention/qkv_bias"])
    np.testing.assert_array_equal(hf["model.visual.patch_embed.proj.weight"], ref["vision/patch_embedding"])
    np.testing.assert_array_equal(hf["mtp.norm.weight"], ref["mtp/norm"])
    # the text values are those of the plain Qwen3.5 checkpoint: only the names moved
    np.testing.assert_array_equal(ref["text/layers/0/gdn/z"], qwen35.logical_parameters(text_cfg)["text/layers/0/gdn/z"])
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["Qwen3_5ForConditionalGeneration"] and config["model_type"] == "qwen3_5"
    assert config["text_config"]["model_type"] == "qwen3_5_text" and config["vision_config"]["model_type"] == "qwen3_5_vision"
    assert "deepstack_visual_indexes" not in config["vision_config"]
    pre = json.loads((path / "preprocessor_config.json").read_text())
    assert (pre["patch_size"], pre["temporal_patch_size"], pre["merge_size"]) == (8, 2, 2)
    assert json.loads((path / "tokenizer.json").read_text()) == tokenizer.tokenizer_json()
    with pytest.raises(ValueError, match="deepstack"):
        vision.write_hf_dir(tmp_path / "x", text_cfg, vision.config("qwen3_vl"))


# ---- DFlash -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2])
def test_dflash_checkpoint(tmp_path, version):
    cfg = dflash.config(version)
    path = dflash.write_hf_dir(tmp_path / "d", cfg)
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    hf = read_hf(path)
    assert not any(n.startswith("model.") for n in hf)
    assert hf["fc.weight"].shape == (128, 3 * 128) and cfg["dflash_config"]["target_layer_ids"] == [1, 3, 5]
    config = json.loads((path / "config.json").read_text())
    c = "dflash" if version == 1 else "dflash2"
    ref = dflash.logical_parameters(cfg)
    for i in range(3):
        q = f"{c}/layers/{i}/attention/"
        np.testing.assert_array_equal(ref[q + "context_key"], ref[q + "key"])
        np.testing.assert_array_equal(ref[q + "context_value"], ref[q + "value"])
        np.testing.assert_array_equal(hf[f"layers.{i}.self_attn.k_proj.weight"], ref[q + "key"])
    np.testing.assert_array_equal(hf["hidden_norm.weight"], ref[f"{c}/hidden_norm"])
    np.testing.assert_array_equal(hf["norm.weight"], ref[f"{c}/final_norm"])
    assert abs(hf["norm.weight"].mean() - 1) < 0.05  # plain Qwen3 RMSNorm, no +1 convention
    if version == 1:
        assert config["architectures"] == ["DFlashDraftModel"] and config["block_size"] == 16
        assert config["dflash_config"] == {"mask_token_id": 511, "target_layer_ids": [1, 3, 5]}
        assert len(ref) == 3 + 3 * 13 and not any("conv" in n or "selector" in n for n in hf)
        return
    assert config["architectures"] == ["DFlash2DraftModel"] and config["is_causal"] is False
    assert config["dflash_config"]["block_size"] == 16 and "block_size" not in config
    assert hf["layers.2.attention_conv.base_kernel"].shape == (2, 2, 128)
    assert hf["layers.2.mlp_conv.kernel_projection.weight"].shape == (2 * 2 * 128 // 16, 128)
    assert hf["candidate_selector.predecessor_codebook"].shape == (512, 16)
    assert "candidate_selector.successor_codebook.weight" not in hf
    np.testing.assert_array_equal(hf["candidate_selector.successor_codebook"], ref["dflash2/candidate_selector/successor_codebook"])
    np.testing.assert_array_equal(hf["layers.0.mlp_conv.base_kernel"], ref["dflash2/layers/0/mlp_conv/base_kernel"])
    assert len(ref) == 3 + 3 * 17 + 3


def test_target_layer_ids_follow_z_lab():
    assert dflash.build_target_layer_ids(24, 1) == [12]
    assert dflash.build_target_layer_ids(64, 2) == [1, 61]
    assert dflash.build_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]  # z-lab Qwen3-8B-DFlash-b16
    assert dflash.config(1, num_hidden_layers=2)["dflash_config"]["target_layer_ids"] == [1, 5]
    with pytest.raises(ValueError, match="conv_group_size"):
        dflash.config(2, conv_group_size=48)


# ---- proposal token counts --------------------------------------------------------------------------

def test_token_counts_files_and_shortlist(tmp_path):
    counts = token_counts.token_counts()
    assert sorted(counts) == list(range(tokenizer.default_size()))
    assert len(set(counts.values())) == len(counts) and min(counts.values()) > 0
    top = token_counts.shortlist(counts, 16)
    assert len(top) == 16 and all(counts[top[i]] > counts[top[i + 1]] for i in range(15))
    assert min(counts[i] for i in top) > max(c for i, c in counts.items() if i not in top)
    tsv = token_counts.write_token_counts(tmp_path / "c.tsv", counts)
    lines = tsv.read_text().splitlines()
    assert lines[0] == "token_id\tcount" and len(lines) == len(counts) + 1
    assert {int(a): int(b) for a, b in (line.split("\t") for line in lines[1:])} == counts
    js = json.loads(token_counts.write_token_counts(tmp_path / "c.json", counts, "json").read_text())
    assert js["vocab_size"] == 512 and {int(k): v for k, v in js["counts"].items()} == counts
    with pytest.raises(FileExistsError):
        token_counts.write_token_counts(tmp_path / "c.tsv", counts)
    assert token_counts.token_counts(seed=1) != counts


# ---- determinism and command line --------------------------------------------------------------------

def test_component_cli_and_determinism(tmp_path):
    assert main(["vision", "--mmproj", str(tmp_path / "a.gguf"), "--vision-family", "qwen3_vl"]) == 0
    assert main(["vision", "--mmproj", str(tmp_path / "b.gguf"), "--vision-family", "qwen3_vl"]) == 0
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()
    assert main(["dflash2", "--hf", str(tmp_path / "d"), "--seed", "5"]) == 0
    assert main(["bonsai", "--gguf", str(tmp_path / "t.gguf"), "--ternary-type", "Q2_0_LEGACY"]) == 0
    assert main(["token-counts", "--counts", str(tmp_path / "c.json"), "--counts-format", "json"]) == 0
    assert main(["qwen35moe", "--gguf", str(tmp_path / "m.gguf"), "--fused-gate-up", "--set", "num_experts=4"]) == 0
    assert main(["token-counts", "--counts", str(tmp_path / "c.json")]) == 1  # refuses to overwrite
    d5 = read_hf(tmp_path / "d")
    np.testing.assert_array_equal(d5["fc.weight"], dflash.hf_tensors(dflash.config(2), seed=5)["fc.weight"])
    assert not np.array_equal(d5["fc.weight"], dflash.hf_tensors(dflash.config(2), seed=0)["fc.weight"])
