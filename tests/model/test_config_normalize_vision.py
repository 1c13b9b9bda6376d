"""Vision config normalisation: an mmproj GGUF written here the way llama.cpp's MmprojModel +
Qwen3VLVisionModel write it, and the HF ``vision_config`` of the same tower."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

from converters.model.config_normalize import ConfigError, explain_vision_config, normalize_vision_config
from converters.sources import open_gguf, open_hf_dir

VISION = {"depth": 4, "hidden_size": 32, "hidden_act": "gelu_pytorch_tanh", "intermediate_size": 48,
          "num_heads": 2, "in_channels": 3, "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2,
          "out_hidden_size": 64, "num_position_embeddings": 16}


def write_mmproj(path, vision: dict, deepstack: list[bool] | None, *, image_size=None, halves: int = 2):
    """MmprojModel.set_gguf_parameters + Qwen3VLVisionModel (Conv3d split in time into .weight/.weight.1)."""
    v = vision
    w = gguf.GGUFWriter(str(path), "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(v["out_hidden_size"])
    w.add_vision_image_size(image_size or int(v["num_position_embeddings"] ** 0.5 * v["patch_size"]))
    w.add_vision_patch_size(v["patch_size"])
    w.add_vision_embedding_length(v["hidden_size"])
    w.add_vision_feed_forward_length(v["intermediate_size"])
    w.add_vision_block_count(v["depth"])
    w.add_vision_head_count(v["num_heads"])
    w.add_vision_image_mean([0.48145466, 0.4578275, 0.40821073])
    w.add_vision_image_std([0.26862954, 0.26130258, 0.27577711])
    w.add_clip_projector_type(gguf.VisionProjectorType.QWEN3VL)
    w.add_vision_use_gelu(True)
    w.add_vision_spatial_merge_size(v["spatial_merge_size"])
    w.add_vision_attention_layernorm_eps(1e-6)
    if deepstack is not None:
        w.add_vision_is_deepstack_layers(deepstack)
    p, hid = v["patch_size"], v["hidden_size"]
    for t in range(halves):
        w.add_tensor("v.patch_embd.weight" + (f".{t}" if t else ""), np.zeros((hid, v["in_channels"], p, p), np.float32))
    w.add_tensor("v.patch_embd.bias", np.zeros(hid, np.float32))
    w.add_tensor("v.position_embd.weight", np.zeros((v["num_position_embeddings"], hid), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_hf(path, config: dict):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    save_file({"model.visual.pos_embed.weight": np.zeros((16, 32), np.float32)}, str(path / "model.safetensors"))
    return path


def test_qwen3_5_tower_from_mmproj_and_hf_agree(tmp_path):
    mmproj = write_mmproj(tmp_path / "mmproj.gguf", VISION, [False] * 4)
    with open_gguf(mmproj) as src:
        ex = explain_vision_config(src, text_arch="qwen35")
    assert ex.config == {"model_type": "qwen3_5_vision", **VISION}
    assert ex.evidence["temporal_patch_size"] == "derived (tensor_series_length)"
    assert ex.evidence["in_channels"] == "derived (tensor_dim)"

    hf = write_hf(tmp_path / "hf", {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
                                    "vision_config": {**VISION, "model_type": "qwen3_5"}, "text_config": {}})
    with open_hf_dir(hf) as src:
        assert normalize_vision_config(src) == ex.config

    with open_gguf(mmproj) as src:
        assert normalize_vision_config(src, text_arch="qwen35moe")["model_type"] == "qwen3_5_moe_vision"


def test_qwen3_vl_deepstack_from_mmproj(tmp_path):
    flags = [False, True, False, True]
    with open_gguf(write_mmproj(tmp_path / "mmproj.gguf", VISION, flags)) as src:
        cfg = normalize_vision_config(src)  # deepstack layers identify Qwen3-VL without text_arch
    assert cfg == {"model_type": "qwen3_vl", **VISION, "deepstack_visual_indexes": [1, 3]}


def test_hf_defaults_and_required_geometry(tmp_path):
    vision = {k: VISION[k] for k in ("depth", "hidden_size", "intermediate_size", "num_heads", "patch_size",
                                      "out_hidden_size", "num_position_embeddings")}
    hf = write_hf(tmp_path / "hf", {"architectures": ["Qwen3_5ForConditionalGeneration"], "vision_config": vision})
    with open_hf_dir(hf) as src:
        ex = explain_vision_config(src)
    assert ex.config == {"model_type": "qwen3_5_vision", **VISION}
    assert "Qwen3VLVisionConfig.temporal_patch_size" in ex.evidence["temporal_patch_size"]

    del vision["num_heads"]
    hf = write_hf(tmp_path / "hf2", {"architectures": ["Qwen3_5ForConditionalGeneration"], "vision_config": vision})
    with open_hf_dir(hf) as src, pytest.raises(ConfigError) as info:
        normalize_vision_config(src)
    assert (info.value.json_path, info.value.file) == ("vision_config.num_heads", str(hf / "config.json"))

    hf = write_hf(tmp_path / "hf3", {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text"})
    with open_hf_dir(hf) as src, pytest.raises(ConfigError) as info:
        normalize_vision_config(src)
    assert (info.value.json_path, info.value.rule) == ("vision_config", "required_field_missing")


@pytest.mark.parametrize("case, rule", [
    ("ambiguous", "vision_family_ambiguous"),
    ("deepstack_in_qwen35", "field_mismatch"),
    ("image_size", "field_mismatch"),
    ("one_half", None),
])
def test_mmproj_inconsistencies(tmp_path, case, rule):
    kwargs = {"deepstack": [False] * 4}
    if case == "deepstack_in_qwen35":
        kwargs["deepstack"] = [False, True, False, False]
    if case == "image_size":
        kwargs["image_size"] = 20
    if case == "one_half":
        kwargs["halves"] = 1
    path = write_mmproj(tmp_path / "m.gguf", VISION, **kwargs)
    text_arch = None if case == "ambiguous" else "qwen35"
    with open_gguf(path) as src:
        if rule is None:  # a single time half is read as it is: temporal_patch_size 1
            assert normalize_vision_config(src, text_arch=text_arch)["temporal_patch_size"] == 1
            return
        with pytest.raises(ConfigError) as info:
            normalize_vision_config(src, text_arch=text_arch)
    assert info.value.rule == rule and info.value.file == str(path)


def test_any_ill_typed_mmproj_value_is_a_config_error_not_a_crash(tmp_path):
    from types import SimpleNamespace

    path = write_mmproj(tmp_path / "m.gguf", VISION, [False, True, False, False])
    with open_gguf(path) as src:
        real = {k: src.metadata[k] for k in src.metadata}
        rules = set()
        for key in real:
            for bad in ("x", [], [[1]], [True, 3], -2, 0, 2.5, True):
                fake = SimpleNamespace(kind="gguf", path=src.path, tensors=src.tensors, metadata={**real, key: bad})
                for text_arch in (None, "qwen35"):
                    try:
                        normalize_vision_config(fake, text_arch=text_arch)
                    except ConfigError as exc:
                        rules.add(exc.rule)
    assert {"field_type", "field_range", "unsupported_architecture", "field_mismatch"} <= rules
