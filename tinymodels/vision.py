"""Tiny Qwen3-VL / Qwen3.5 vision tower: HF ``model.visual.*`` tensors, the ``Qwen3_5ForConditionalGeneration``
checkpoint directory (text under ``model.language_model.*``, ``preprocessor_config.json``) and the mmproj
GGUF llama.cpp writes for the tower.

Checked against the sources (via the search tool):

- transformers ``Qwen3VLVisionModel`` / ``Qwen3_5VisionModel`` (``Qwen3VLVisionPatchMerger`` as ported
  by several runtimes; ``configuration_qwen3_5_moe.py`` @008e5743 for ``Qwen3_5MoeVisionConfig``, whose
  fields the dense ``Qwen3_5VisionConfig`` shares): ``patch_embed.proj`` is a ``Conv3d`` with bias,
  weight ``[hidden, in_channels, temporal_patch_size, p, p]``; ``pos_embed`` an ``Embedding``
  ``[num_position_embeddings, hidden]``; blocks ``norm1``/``norm2`` (LayerNorm with bias),
  ``attn.qkv [3·hidden, hidden]`` (+bias), ``attn.proj`` (+bias), ``mlp.linear_fc1 [intermediate, hidden]``
  and ``mlp.linear_fc2`` (+biases); ``merger`` = ``Qwen3VLVisionPatchMerger``: ``norm`` over ``hidden``
  (pre-shuffle), ``linear_fc1 [hidden·m², hidden·m²]``, ``linear_fc2 [out_hidden_size, hidden·m²]``
  (``m`` = ``spatial_merge_size``); Qwen3-VL adds ``deepstack_merger_list.{k}`` (same shapes, ``norm``
  over ``hidden·m²``, post-shuffle) for the layers ``deepstack_visual_indexes[k]``. Qwen3.5's tower has
  no deepstack (its config lacks the field; ``model_type`` ``qwen3_5_vision``, an old ``qwen3_5``
  being renamed by ``Qwen3_5Config``). ``Qwen3_5ForConditionalGeneration`` saves
  ``model.language_model.*``, ``model.visual.*``, ``lm_head.weight`` and top-level ``mtp.*``.
- llama.cpp ``conversion/qwen3vl.py`` @06e514f6 ``Qwen3VLVisionModel`` and ``conversion/base.py``
  @00bd27a6 ``MmprojModel``: the Conv3d is split in time into ``v.patch_embd.weight`` (``t = 0``,
  ``[hidden, C, p, p]``) and ``v.patch_embd.weight.1`` (``t = 1``; only ``temporal_patch_size == 2`` is
  accepted), ``v.patch_embd.bias``; ``merger.linear_fc1/2`` → ``mm.0`` / ``mm.2``, ``merger.norm`` →
  ``v.post_ln``; ``deepstack_merger_list.{k}.{norm,linear_fc1,linear_fc2}`` →
  ``v.deepstack.{deepstack_visual_indexes[k]}.{norm,fc1,fc2}``; the rest by gguf-py's ``TensorNameMap``
  for ``MODEL_ARCH.MMPROJ`` (``v.position_embd``, ``v.blk.N.{ln1, ln2, attn_qkv, attn_out, ffn_up,
  ffn_down}``). No value transform. Types: the patch halves F32 (F16 for an F16 file),
  ``v.position_embd`` F32, 1-D tensors F32, other matrices the file type. Metadata:
  ``general.architecture = "clip"``, ``general.type = "mmproj"``, ``clip.has_vision_encoder``,
  ``clip.vision.{projection_dim (text hidden), image_size (int(sqrt(num_position_embeddings)·p)),
  patch_size, embedding_length, feed_forward_length, block_count, attention.head_count, image_mean,
  image_std, spatial_merge_size, attention.layer_norm_epsilon (the text rms_norm_eps),
  is_deepstack_layers}``, ``clip.projector_type = "qwen3vl_merger"``, ``clip.use_gelu``.

Logical parameters (contract extension; HF values):
``vision/patch_embedding [hidden, C, T, p, p]`` (the Conv3d re-joined), ``vision/patch_embedding_bias``,
``vision/position_embedding [num_position_embeddings, hidden]``; per block ``vision/layers/{i}/``
``input_norm``, ``input_norm_bias``, ``post_attention_norm``, ``post_attention_norm_bias`` (norm1, norm2),
``attention/qkv``, ``attention/qkv_bias``, ``attention/output``, ``attention/output_bias``,
``mlp/up``, ``mlp/up_bias``, ``mlp/down``, ``mlp/down_bias`` (linear_fc1, linear_fc2);
``vision/merger/{norm, norm_bias, fc1, fc1_bias, fc2, fc2_bias}``; Qwen3-VL only
``vision/deepstack/{k}/{norm, norm_bias, fc1, fc1_bias, fc2, fc2_bias}`` (``k`` = list index).

Default dims: 2 blocks of hidden 64, 2 heads, intermediate 128, patch 8, 8×8 position grid, merge 2,
output 128 (the tiny Qwen3.5's hidden size).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, mtp, qwen3, qwen35, tokenizer
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import TensorSpec

FAMILIES = {"qwen3_5": "qwen3_5_vision", "qwen3_vl": "qwen3_vl"}
CLIP_MEAN_STD = ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5])  # Qwen3-VL / Qwen3.5 preprocessor_config.json


def config(family: str = "qwen3_5", **overrides) -> dict:
    """The ``vision_config`` of the tower (transformers 5 fields); ``family`` ``qwen3_vl`` adds deepstack."""
    if family not in FAMILIES:
        raise ValueError(f"vision family {family!r} not supported; choose one of {', '.join(FAMILIES)}")
    cfg = {
        "model_type": FAMILIES[family],
        "depth": 2,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 64,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 128,
        "num_heads": 2,
        "num_position_embeddings": 64,
        "out_hidden_size": 128,
        "patch_size": 8,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    if family == "qwen3_vl":
        cfg["deepstack_visual_indexes"] = [0]
    cfg.update(overrides)
    side = math.isqrt(cfg["num_position_embeddings"])
    if side * side != cfg["num_position_embeddings"]:
        raise ValueError("num_position_embeddings must be a square (image_size = sqrt(n) · patch_size)")
    if any(not 0 <= i < cfg["depth"] for i in cfg.get("deepstack_visual_indexes", [])):
        raise ValueError("deepstack_visual_indexes must be block indexes")
    return cfg


def _linear(prefix: str, rows: int, cols: int, init: str = "linear") -> list[TensorSpec]:
    return [TensorSpec(f"{prefix}.weight", (rows, cols), init), TensorSpec(f"{prefix}.bias", (rows,), "bias")]


def _layer_norm(prefix: str, width: int) -> list[TensorSpec]:
    return [TensorSpec(f"{prefix}.weight", (width,), "norm_one"), TensorSpec(f"{prefix}.bias", (width,), "bias")]


def _merger(prefix: str, cfg: Mapping, norm_width: int) -> list[TensorSpec]:
    merged = cfg["hidden_size"] * cfg["spatial_merge_size"] ** 2
    return (_layer_norm(f"{prefix}.norm", norm_width) + _linear(f"{prefix}.linear_fc1", merged, merged)
            + _linear(f"{prefix}.linear_fc2", cfg["out_hidden_size"], merged))


def tower_specs(cfg: Mapping, prefix: str = "model.visual") -> list[TensorSpec]:
    """The tower's HF tensors, in a stable order."""
    h, p = cfg["hidden_size"], cfg["patch_size"]
    specs = [
        TensorSpec(f"{prefix}.patch_embed.proj.weight", (h, cfg["in_channels"], cfg["temporal_patch_size"], p, p), "linear"),
        TensorSpec(f"{prefix}.patch_embed.proj.bias", (h,), "bias"),
        TensorSpec(f"{prefix}.pos_embed.weight", (cfg["num_position_embeddings"], h), "embedding"),
    ]
    for i in range(cfg["depth"]):
        b = f"{prefix}.blocks.{i}"
        specs += _layer_norm(f"{b}.norm1", h) + _linear(f"{b}.attn.qkv", 3 * h, h) + _linear(f"{b}.attn.proj", h, h, "residual")
        specs += _layer_norm(f"{b}.norm2", h) + _linear(f"{b}.mlp.linear_fc1", cfg["intermediate_size"], h)
        specs += _linear(f"{b}.mlp.linear_fc2", h, cfg["intermediate_size"], "residual")
    specs += _merger(f"{prefix}.merger", cfg, h)
    merged = h * cfg["spatial_merge_size"] ** 2
    for k in range(len(cfg.get("deepstack_visual_indexes", []))):
        specs += _merger(f"{prefix}.deepstack_merger_list.{k}", cfg, merged)
    return specs


def hf_tensors(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    return {s.name: s.values(seed) for s in tower_specs(cfg)}


LOGICAL_BLOCK = {  # HF block suffix → logical suffix
    "norm1.weight": "input_norm", "norm1.bias": "input_norm_bias",
    "norm2.weight": "post_attention_norm", "norm2.bias": "post_attention_norm_bias",
    "attn.qkv.weight": "attention/qkv", "attn.qkv.bias": "attention/qkv_bias",
    "attn.proj.weight": "attention/output", "attn.proj.bias": "attention/output_bias",
    "mlp.linear_fc1.weight": "mlp/up", "mlp.linear_fc1.bias": "mlp/up_bias",
    "mlp.linear_fc2.weight": "mlp/down", "mlp.linear_fc2.bias": "mlp/down_bias",
}
LOGICAL_MERGER = {"norm.weight": "norm", "norm.bias": "norm_bias", "linear_fc1.weight": "fc1",
                  "linear_fc1.bias": "fc1_bias", "linear_fc2.weight": "fc2", "linear_fc2.bias": "fc2_bias"}


def logical_name(hf_name: str, prefix: str = "model.visual") -> str:
    rest = hf_name.removeprefix(prefix + ".")
    top = {"patch_embed.proj.weight": "patch_embedding", "patch_embed.proj.bias": "patch_embedding_bias",
           "pos_embed.weight": "position_embedding"}
    if rest in top:
        return f"vision/{top[rest]}"
    parts = rest.split(".", 2)
    if parts[0] == "blocks":
        return f"vision/layers/{parts[1]}/{LOGICAL_BLOCK[parts[2]]}"
    if parts[0] == "merger":
        return f"vision/merger/{LOGICAL_MERGER[rest.split('.', 1)[1]]}"
    if parts[0] == "deepstack_merger_list":
        return f"vision/deepstack/{parts[1]}/{LOGICAL_MERGER[parts[2]]}"
    raise KeyError(f"{hf_name}: not a vision tower tensor")


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """``vision/...`` logical parameters (HF values; the Conv3d whole)."""
    return {logical_name(s.name): s.values(seed) for s in tower_specs(cfg)}


def preprocessor_config(cfg: Mapping) -> dict:
    """``preprocessor_config.json`` as Qwen3-VL / Qwen3.5 checkpoints ship it, sized for the tower."""
    mean, std = CLIP_MEAN_STD
    side = math.isqrt(cfg["num_position_embeddings"]) * cfg["patch_size"]
    return {
        "image_mean": mean,
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "image_std": std,
        "merge_size": cfg["spatial_merge_size"],
        "patch_size": cfg["patch_size"],
        "processor_class": "Qwen3VLProcessor",
        "size": {"longest_edge": side * side, "shortest_edge": (cfg["patch_size"] * cfg["spatial_merge_size"]) ** 2},
        "temporal_patch_size": cfg["temporal_patch_size"],
    }


def _mmproj_name(name: str, cfg: Mapping, names: gguf.TensorNameMap) -> str:
    rest = name.removeprefix("model.visual.")
    if rest.startswith("merger."):
        kind, tail = rest.split(".", 2)[1:]
        if kind == "norm":
            return gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.V_POST_NORM] + f".{tail}"
        return gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.V_MMPROJ].format(bid={"linear_fc1": 0, "linear_fc2": 2}[kind]) + f".{tail}"
    if rest.startswith("deepstack_merger_list."):
        _, k, kind, tail = rest.split(".", 3)
        tensor = {"norm": gguf.MODEL_TENSOR.V_DS_NORM, "linear_fc1": gguf.MODEL_TENSOR.V_DS_FC1,
                  "linear_fc2": gguf.MODEL_TENSOR.V_DS_FC2}[kind]
        return gguf.TENSOR_NAMES[tensor].format(bid=cfg["deepstack_visual_indexes"][int(k)]) + f".{tail}"
    mapped = names.get_name("visual." + rest, try_suffixes=(".weight", ".bias"))
    if mapped is None:
        raise KeyError(f"{name}: no mmproj name")
    return mapped


def mmproj_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32") -> list[PlannedTensor]:
    """The mmproj tensors in llama.cpp's order and types (the Conv3d split in time)."""
    if cfg["temporal_patch_size"] != 2:
        raise ValueError("llama.cpp's Qwen3VLVisionModel only supports temporal_patch_size 2")
    names = gguf_writer.tensor_name_map(gguf.MODEL_ARCH.MMPROJ, cfg["depth"])
    plan = []
    for spec in tower_specs(cfg):
        if spec.name.endswith("patch_embed.proj.weight"):
            patch = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.V_ENC_EMBD_PATCH] + ".weight"
            half = (spec.shape[0], spec.shape[1], *spec.shape[3:])
            for t, name in enumerate((patch, patch + ".1")):
                rows = lambda a, b, s=spec, t=t: s.values(seed, a, b)[:, :, t]  # noqa: E731
                plan.append(PlannedTensor(name, half, gguf_writer.tensor_qtype(name, half, matrix_type), rows))
            continue
        name = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.V_ENC_EMBD_PATCH] + ".bias" if spec.name.endswith(
            "patch_embed.proj.bias") else _mmproj_name(spec.name, cfg, names)
        rows = lambda a, b, s=spec: s.values(seed, a, b)  # noqa: E731
        plan.append(PlannedTensor(name, spec.shape, gguf_writer.tensor_qtype(name, spec.shape, matrix_type), rows))
    return plan


def write_mmproj(path: str | os.PathLike[str], cfg: Mapping | None = None, text_cfg: Mapping | None = None,
                 seed: int = 0, matrix_type: str = "F32") -> Path:
    """The mmproj GGUF of the tower (``text_cfg`` gives ``projection_dim`` and the layer-norm epsilon)."""
    cfg = config() if cfg is None else cfg
    text_cfg = qwen35.config() if text_cfg is None else text_cfg
    if cfg["out_hidden_size"] != text_cfg["hidden_size"]:
        raise ValueError("the merger must project to the text hidden size (out_hidden_size)")
    mean, std = CLIP_MEAN_STD
    deepstack = set(cfg.get("deepstack_visual_indexes", []))

    def metadata(w: gguf.GGUFWriter) -> None:
        w.add_type(gguf.GGUFType.MMPROJ)
        w.add_name("Tiny Qwen vision tower")
        w.add_file_type(gguf_writer.matrix_type(matrix_type)[1])
        w.add_clip_has_vision_encoder(True)
        w.add_vision_projection_dim(text_cfg["hidden_size"])
        w.add_vision_image_size(int(math.isqrt(cfg["num_position_embeddings"]) * cfg["patch_size"]))
        w.add_vision_patch_size(cfg["patch_size"])
        w.add_vision_embedding_length(cfg["hidden_size"])
        w.add_vision_feed_forward_length(cfg["intermediate_size"])
        w.add_vision_block_count(cfg["depth"])
        w.add_vision_head_count(cfg["num_heads"])
        w.add_vision_image_mean(mean)
        w.add_vision_image_std(std)
        w.add_clip_projector_type(gguf.VisionProjectorType.QWEN3VL)
        w.add_vision_use_gelu(True)
        w.add_vision_spatial_merge_size(cfg["spatial_merge_size"])
        w.add_vision_attention_layernorm_eps(text_cfg.get("rms_norm_eps", 1e-6))
        w.add_vision_is_deepstack_layers([i in deepstack for i in range(cfg["depth"])])

    return gguf_writer.write_gguf_file(path, "clip", metadata, mmproj_tensors(cfg, seed, matrix_type))


@dataclass(frozen=True)
class _Renamed:
    """A spec written under another name (the text model under ``model.language_model.*``) whose values
    stay those of the original name, so the text parameters equal :mod:`tinymodels.qwen35`'s."""

    name: str
    inner: TensorSpec

    shape = property(lambda self: self.inner.shape)
    rows = property(lambda self: self.inner.rows)
    row_size = property(lambda self: self.inner.row_size)
    size = property(lambda self: self.inner.size)

    def values(self, seed: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        return self.inner.values(seed, start, stop)


def model_config(text_cfg: Mapping, vision_cfg: Mapping) -> dict:
    """``config.json`` of a ``Qwen3_5ForConditionalGeneration`` (image/video ids are the last four ids,
    placeholders the tiny tokenizer does not spell)."""
    text = {k: v for k, v in text_cfg.items() if k not in ("architectures", "transformers_version")}
    v = text_cfg["vocab_size"]
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": v - 4,
        "video_token_id": v - 3,
        "vision_start_token_id": v - 2,
        "vision_end_token_id": v - 1,
        "text_config": text,
        "tie_word_embeddings": text_cfg["tie_word_embeddings"],
        "transformers_version": "5.0.0",
        "vision_config": dict(vision_cfg),
    }


def checkpoint_specs(text_cfg: Mapping, vision_cfg: Mapping) -> list:
    """Every tensor of the conditional-generation checkpoint (text renamed, tower, ``mtp.*``)."""
    text = [_Renamed(s.name.replace("model.", "model.language_model.", 1), s) if s.name.startswith("model.") else s
            for s in qwen35.text_specs(text_cfg)]
    return text + tower_specs(vision_cfg) + mtp.mtp_specs(text_cfg, qwen3.mlp_specs)


def checkpoint_logical_parameters(text_cfg: Mapping, vision_cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """``text/*`` (and ``mtp/*``) of :func:`tinymodels.qwen35.logical_parameters` plus ``vision/*``."""
    return {**qwen35.logical_parameters(text_cfg, seed), **logical_parameters(vision_cfg, seed)}


def write_hf_dir(path: str | os.PathLike[str], text_cfg: Mapping | None = None, vision_cfg: Mapping | None = None,
                 seed: int = 0, dtype: str = "bf16", shards: int = 2) -> Path:
    """A ``Qwen3_5ForConditionalGeneration`` directory: config, safetensors, tokenizer, preprocessor config."""
    text_cfg = qwen35.config() if text_cfg is None else text_cfg
    vision_cfg = config() if vision_cfg is None else vision_cfg
    if vision_cfg["model_type"] != FAMILIES["qwen3_5"] or vision_cfg.get("deepstack_visual_indexes"):
        raise ValueError("a Qwen3_5ForConditionalGeneration tower has no deepstack (family qwen3_5)")
    if vision_cfg["out_hidden_size"] != text_cfg["hidden_size"]:
        raise ValueError("the merger must project to the text hidden size (out_hidden_size)")
    resources = {**tokenizer.resources(), "preprocessor_config.json": preprocessor_config(vision_cfg)}
    return hf_writer.write_hf_dir(path, model_config(text_cfg, vision_cfg), checkpoint_specs(text_cfg, vision_cfg),
                                  resources, seed=seed, dtype=dtype, shards=shards)
