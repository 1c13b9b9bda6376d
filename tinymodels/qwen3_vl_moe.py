"""Tiny Qwen3-VL-MoE (``Qwen3VLMoeForConditionalGeneration``, ``model_type`` ``qwen3_vl_moe``; text GGUF arch
``qwen3vlmoe`` plus an mmproj GGUF): :mod:`tinymodels.qwen3_vl`'s composite checkpoint and tower around
:mod:`tinymodels.qwen3_moe`'s sparse decoder.

Checked against the sources (via the search tool):

- transformers ``models/qwen3_vl_moe``: ``text_config`` is ``Qwen3VLMoeTextConfig`` (``model_type``
  ``qwen3_vl_moe_text``: Qwen3-VL's fields plus ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``decoder_sparse_step``, ``mlp_only_layers``); the router
  (``Qwen3VLMoeTextTopKRouter``, ``mlp.gate.weight [E, H]``) always renormalises the top-k weights.
  transformers' weight conversion for ``qwen3_vl_moe`` merges per-expert ``mlp.experts.{e}.{gate,up,down}
  _proj.weight`` tensors (``expert_layout="per_expert"``); the released checkpoints store the experts fused
  and transposed, ``experts.gate_up_proj [E, H, 2I]`` (per expert ``[gate | up]ᵀ``) and ``down_proj [E, I, H]``
  (``expert_layout="fused"``), which the converter reads transposed (docs/qwen3-vl.md §Fused transposed experts).
- llama.cpp ``conversion/qwen3vl.py`` ``Qwen3VLMoeTextModel(Qwen3MoeModel)``: GGUF arch ``qwen3vlmoe``,
  experts stacked into ``ffn_{gate,up,down}_exps`` as for Qwen3-MoE (:mod:`tinymodels.qwen3_moe`),
  ``n_deepstack_layers`` and ``rope.dimension_sections`` as for Qwen3-VL.

Default dims: :mod:`tinymodels.qwen3_moe`'s (2 layers, hidden 128, 8 experts top-2 of 64, untied) with
Qwen3-VL's mRoPE and tower (deepstack mergers at blocks ``[1, 2]``, two text layers take them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from tinymodels import qwen3, qwen3_moe, qwen3_vl, vision
from tinymodels.synth import StackedSpec

MODEL_NAME = "qwen3vlmoe"  # the name `python -m tinymodels` and regression cases use
MOE = True  # takes expert_layout (HF) and fused_gate_up (GGUF: refused, as for qwen3moe)

ARCH = gguf.MODEL_ARCH.QWEN3VLMOE


def config(**overrides) -> dict:
    """The ``config.json`` of a ``Qwen3VLMoeForConditionalGeneration``; overrides as for
    :func:`tinymodels.qwen3_vl.config` (text fields; ``vision_config``: tower overrides)."""
    tower = overrides.pop("vision_config", {})
    text = qwen3_moe.config(**{"rope_parameters": dict(qwen3_vl.ROPE), **overrides})
    text.pop("norm_topk_prob")  # Qwen3VLMoeTextConfig has no switch: the router always renormalises
    return qwen3_vl.compose(text, qwen3_vl.vision_config(text, **tower), "Qwen3VLMoeForConditionalGeneration",
                            "qwen3_vl_moe", "qwen3_vl_moe_text")


@dataclass(frozen=True)
class TransposedBank:
    """An expert bank ``(E, N, K)`` stored as ``(E, K, N)`` (each expert's matrix transposed), with the
    spec surface the writers use; values stay those of the per-expert parts."""

    inner: StackedSpec

    name = property(lambda self: self.inner.name)
    rows = property(lambda self: self.inner.rows)
    size = property(lambda self: self.inner.size)
    row_size = property(lambda self: self.inner.row_size)
    shape = property(lambda self: (self.inner.shape[0], self.inner.shape[2], self.inner.shape[1]))

    def values(self, seed: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        return np.ascontiguousarray(self.inner.values(seed, start, stop).transpose(0, 2, 1))


def text_specs(text: Mapping, expert_layout: str) -> list:
    """Qwen3-MoE's HF text specs; ``fused``: each layer's experts as the released transposed banks."""
    if expert_layout not in qwen3_moe.EXPERT_LAYOUTS:
        raise ValueError(f"expert layout {expert_layout!r} not supported; choose one of {qwen3_moe.EXPERT_LAYOUTS}")
    specs = qwen3_moe.tensor_specs(text, expert_layout)
    return [TransposedBank(s) if isinstance(s, StackedSpec) else s for s in specs]


def hf_tensors(cfg: Mapping, seed: int = 0, expert_layout: str = "per_expert") -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact) in the chosen expert layout."""
    specs = qwen3_vl.checkpoint_specs(text_specs(qwen3_vl.flat_text(cfg), expert_layout), cfg["vision_config"])
    return {s.name: s.values(seed) for s in specs}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """``text/*`` (Qwen3-MoE's: dense ``mlp/*`` or ``moe/*`` per layer) and ``vision/*``."""
    return {**qwen3_moe.logical_parameters(qwen3_vl.flat_text(cfg), seed),
            **vision.logical_parameters(cfg["vision_config"], seed)}


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, expert_layout: str = "per_expert", **overrides) -> Path:
    """The HF directory (text under ``model.language_model.*``, experts per expert or fused and transposed;
    tower; resources)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return qwen3_vl.write_checkpoint(path, cfg, text_specs(qwen3_vl.flat_text(cfg), expert_layout), seed, dtype,
                                     shards)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               fused_gate_up: bool = False, **overrides) -> Path:
    """The text GGUF llama.cpp's ``Qwen3VLMoeTextModel`` writes (expert banks, deepstack count, mRoPE)."""
    if fused_gate_up:
        raise ValueError("qwen3vlmoe has no ffn_gate_up_exps in gguf-py's MODEL_TENSORS")
    cfg = qwen3.resolve_config(cfg, overrides, config)
    text = qwen3_vl.flat_text(cfg)
    qwen3_moe.check_gguf_layers(text, ARCH)
    tensors = qwen3.gguf_plan(text, qwen3_moe.tensor_specs(text, None), ARCH, matrix_type, seed, lambda spec: None)
    return qwen3_vl.write_text_gguf(path, cfg, ARCH, "Tiny Qwen3-VL-MoE", tensors,
                                    lambda w: qwen3_moe.add_moe_metadata(w, text), matrix_type)


def write_mmproj(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0,
                 matrix_type: str = "F32") -> Path:
    """The tower's mmproj GGUF (as :func:`tinymodels.qwen3_vl.write_mmproj`)."""
    return qwen3_vl.write_mmproj(path, config() if cfg is None else cfg, seed, matrix_type)
