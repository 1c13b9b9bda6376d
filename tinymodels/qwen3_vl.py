"""Tiny Qwen3-VL (``Qwen3VLForConditionalGeneration``, ``model_type`` ``qwen3_vl``; text GGUF arch ``qwen3vl``
plus an mmproj GGUF) and the pieces :mod:`tinymodels.qwen3_vl_moe` reuses.

Checked against the sources (via the search tool):

- transformers ``models/qwen3_vl``: ``Qwen3VLConfig`` nests ``text_config`` (``Qwen3VLTextConfig``,
  ``model_type`` ``qwen3_vl_text``: the Qwen3 fields, ``head_dim``, ``rope_parameters`` with
  ``mrope_section`` (sums to ``head_dim / 2``) and ``mrope_interleaved``) and ``vision_config``
  (``Qwen3VLVisionConfig``, ``deepstack_visual_indexes``); ``tie_word_embeddings`` at the root (and in
  ``text_config`` in released files). ``Qwen3VLModel`` saves the text decoder as
  ``model.language_model.*`` (Qwen3's tensors: q/k norms, plain RMSNorm), the tower as ``model.visual.*``
  (:mod:`tinymodels.vision`, with ``deepstack_merger_list.{k}``) and the head as ``lm_head.weight``
  (absent when tied). ``Qwen3VLTextModel.forward`` adds ``deepstack_visual_embeds[k]`` to the hidden
  states after decoder layer ``k``.
- llama.cpp ``conversion/qwen3vl.py``: ``Qwen3VLTextModel(Qwen3Model)`` writes the text GGUF (arch
  ``qwen3vl``; tensors as Qwen3 names them, no value change, vision tensors skipped) with
  ``n_deepstack_layers = len(deepstack_visual_indexes)``; ``TextModel.set_gguf_parameters`` adds
  ``rope.dimension_sections`` (``mrope_section`` padded to 4). ``Qwen3VLVisionModel`` writes the mmproj
  (:func:`tinymodels.vision.write_mmproj`).

Default dims: the tiny Qwen3 text (4 layers, hidden 128, 4 query / 2 KV heads of 32, vocab 512, tied),
``mrope_section`` ``[8, 4, 4]``, theta 5e6; a 3-block tower with deepstack mergers at blocks ``[1, 2]`` (so
HF merger ``k`` is GGUF ``v.deepstack.{k + 1}``), projecting to 128. Logical parameters: Qwen3's ``text/*``
(values seeded by the ``model.*`` names, so they equal :mod:`tinymodels.qwen3`'s) and ``vision/*``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, qwen3, tokenizer, vision
from tinymodels.gguf_writer import PlannedTensor

MODEL_NAME = "qwen3vl"  # the name `python -m tinymodels` and regression cases use

ARCH = gguf.MODEL_ARCH.QWEN3VL
TOKENIZER_PRE = "qwen2"
#: text-config keys a composite config does not carry inside text_config
_ROOT_ONLY = ("architectures", "transformers_version", "layer_types", "max_window_layers", "sliding_window",
              "use_sliding_window")


def vision_config(text_cfg: Mapping, **overrides) -> dict:
    """The tower's ``vision_config``: 3 blocks, deepstack mergers at blocks 1 and 2, projecting to the text."""
    return vision.config("qwen3_vl", **{"depth": 3, "deepstack_visual_indexes": [1, 2],
                                        "out_hidden_size": text_cfg["hidden_size"], **overrides})


def compose(text_cfg: Mapping, vision_cfg: Mapping, architecture: str, model_type: str, text_type: str) -> dict:
    """``config.json`` of a conditional-generation checkpoint (image/video ids: the last four ids)."""
    text = {k: v for k, v in text_cfg.items() if k not in _ROOT_ONLY}
    v = text_cfg["vocab_size"]
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "image_token_id": v - 4,
        "video_token_id": v - 3,
        "vision_start_token_id": v - 2,
        "vision_end_token_id": v - 1,
        "text_config": {**text, "model_type": text_type},
        "tie_word_embeddings": text_cfg["tie_word_embeddings"],
        "transformers_version": "5.0.0",
        "vision_config": dict(vision_cfg),
    }


#: transformers 5 ``rope_parameters`` of the tiny text model (``mrope_section`` sums to ``head_dim / 2``)
ROPE = {"rope_theta": 5000000.0, "rope_type": "default", "mrope_section": [8, 4, 4], "mrope_interleaved": True}


def text_config(**overrides) -> dict:
    """The flat text config (Qwen3's fields, :data:`ROPE`), overrides as for :func:`tinymodels.qwen3.config`."""
    return qwen3.config(**{"rope_parameters": dict(ROPE), **overrides})


def config(**overrides) -> dict:
    """The ``config.json`` of a ``Qwen3VLForConditionalGeneration``; ``overrides`` are text fields (HF names
    or :data:`tinymodels.qwen3.ALIASES`), ``vision_config`` a dict of tower overrides."""
    tower = overrides.pop("vision_config", {})
    text = text_config(**overrides)
    return compose(text, vision_config(text, **tower), "Qwen3VLForConditionalGeneration", "qwen3_vl",
                   "qwen3_vl_text")


def flat_text(cfg: Mapping) -> dict:
    """The text config as the Qwen3 helpers read it (``text_config`` plus the root's tie flag)."""
    return {**cfg["text_config"], "tie_word_embeddings": cfg["tie_word_embeddings"]}


def checkpoint_specs(text_specs: list, vision_cfg: Mapping | None) -> list:
    """The text specs renamed under ``model.language_model.*`` (values kept) and the tower's (None: no tower)."""
    text = [vision._Renamed(s.name.replace("model.", "model.language_model.", 1), s) if s.name.startswith("model.")
            else s for s in text_specs]
    return text + (vision.tower_specs(vision_cfg) if vision_cfg is not None else [])


def hf_tensors(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact)."""
    return {s.name: s.values(seed) for s in checkpoint_specs(qwen3.tensor_specs(flat_text(cfg)), cfg["vision_config"])}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """``text/*`` (Qwen3's, HF order) and ``vision/*`` (the tower's, deepstack mergers by list index)."""
    return {**qwen3.logical_parameters(flat_text(cfg), seed), **vision.logical_parameters(cfg["vision_config"], seed)}


def write_checkpoint(path, cfg: Mapping, text_specs: list, seed: int, dtype: str, shards: int) -> Path:
    vision_cfg = cfg.get("vision_config")
    resources = {**tokenizer.resources(), **({"preprocessor_config.json": vision.preprocessor_config(vision_cfg)}
                                             if vision_cfg is not None else {})}
    return hf_writer.write_hf_dir(path, cfg, checkpoint_specs(text_specs, vision_cfg), resources, seed=seed,
                                  dtype=dtype, shards=shards)


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, **overrides) -> Path:
    """The HF directory: config, safetensors (text, tower), tokenizer files, ``preprocessor_config.json``."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return write_checkpoint(path, cfg, qwen3.tensor_specs(flat_text(cfg)), seed, dtype, shards)


def add_vl_metadata(w: gguf.GGUFWriter, cfg: Mapping) -> None:
    """What ``TextModel`` / ``Qwen3VLTextModel`` add for Qwen3-VL: mRoPE sections (padded to 4) and the
    deepstack layer count."""
    section = list(cfg["text_config"]["rope_parameters"]["mrope_section"])
    w.add_rope_dimension_sections((section + [0] * 4)[:4])
    w.add_num_deepstack_layers(len((cfg.get("vision_config") or {}).get("deepstack_visual_indexes", [])))


def write_text_gguf(path, cfg: Mapping, arch: gguf.MODEL_ARCH, name: str, tensors: list[PlannedTensor],
                    extra: Callable[[gguf.GGUFWriter], None], matrix_type: str) -> Path:
    text = flat_text(cfg)

    def metadata(w: gguf.GGUFWriter) -> None:
        qwen3.add_base_metadata(w, text, name, matrix_type)
        add_vl_metadata(w, cfg)
        extra(w)
        gguf_writer.add_tokenizer(w, tokenizer.resources(), text, TOKENIZER_PRE)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[arch], metadata, tensors)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               **overrides) -> Path:
    """The text GGUF llama.cpp's ``Qwen3VLTextModel`` writes from :func:`write_hf_dir`'s directory."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    text = flat_text(cfg)
    tensors = qwen3.gguf_plan(text, qwen3.tensor_specs(text), ARCH, matrix_type, seed, lambda spec: None)
    return write_text_gguf(path, cfg, ARCH, "Tiny Qwen3-VL", tensors, lambda w: None, matrix_type)


def write_mmproj(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0,
                 matrix_type: str = "F32") -> Path:
    """The mmproj GGUF llama.cpp's ``Qwen3VLVisionModel`` writes (deepstack mergers as ``v.deepstack.{i}``)."""
    cfg = config() if cfg is None else cfg
    return vision.write_mmproj(path, cfg["vision_config"], flat_text(cfg), seed=seed, matrix_type=matrix_type)
