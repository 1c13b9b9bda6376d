"""Tiny Qwen3.5-MoE text model (``Qwen3_5MoeForCausalLM``, ``model_type`` ``qwen3_5_moe_text``, GGUF arch
``qwen35moe``): the Qwen3.5 hybrid schedule (:mod:`tinymodels.qwen35`) with a sparse MoE block and a
gated shared expert in every layer (:mod:`tinymodels.qwen3_moe`), optionally an MTP head
(``mtp_num_hidden_layers``, :mod:`tinymodels.mtp`) whose layer has the same MoE block.

Checked against the sources (via the search tool):

- transformers ``models/qwen3_5_moe/configuration_qwen3_5_moe.py`` @008e5743: ``Qwen3_5MoeTextConfig``
  (``model_type`` ``qwen3_5_moe_text``) has no ``intermediate_size``, and ``moe_intermediate_size``,
  ``shared_expert_intermediate_size``, ``num_experts``, ``num_experts_per_tok``; ``layer_types`` from
  ``full_attention_interval`` as in Qwen3.5. ``Qwen3_5MoeSparseMoeBlock``: ``gate`` (top-k router,
  softmax then top-k then renormalise), ``experts`` (``gate_up_proj [E, 2I, H]``, ``down_proj [E, H, I]``),
  ``shared_expert`` (an MLP of ``shared_expert_intermediate_size``) and ``shared_expert_gate``
  (``Linear(H, 1)``, sigmoid-gated).
- llama.cpp ``conversion/qwen.py`` @03173d5e: ``Qwen3_5MoeTextModel`` (registered for
  ``Qwen3_5MoeForCausalLM`` and ``Qwen3_5MoeForConditionalGeneration``) = ``_Qwen35MtpMixin`` +
  ``_Qwen35MRopeMixin`` + ``_LinearAttentionVReorderBase`` → ``Qwen3NextModel`` → ``Qwen2MoeModel``:
  the Qwen3.5 value transforms (V heads tiled, ``+1`` norms, ``-exp(A_log)``, squeezed conv) plus the
  expert stacking of ``Qwen2MoeModel``; ``MODEL_ARCH.QWEN35MOE`` → ``"qwen35moe"`` (gguf-py
  ``MODEL_ARCH_NAMES``), whose tensor list includes ``FFN_GATE_UP_EXP`` (``--fuse-gate-up-exps``).
  Metadata: Qwen3.5's keys without ``feed_forward_length`` (no ``intermediate_size``) plus
  ``expert_count``, ``expert_used_count``, ``expert_feed_forward_length``,
  ``expert_shared_feed_forward_length``.

Default dims: 4 layers (full attention at 3), hidden 128, 8 experts (top-2) of 64, shared expert of 128,
attention 4/2 heads of 32, gated delta net 2 key / 4 value heads of 32, vocab 512.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, mtp, qwen3, qwen3_moe, qwen35, tokenizer
from tinymodels.gguf_writer import PlannedTensor

MODEL_NAME = "qwen35moe"  # the name `python -m tinymodels` and regression cases use
MOE = True  # takes expert_layout (HF) and fused_gate_up (GGUF)

ARCH = gguf.MODEL_ARCH.QWEN35MOE


def config(**overrides) -> dict:
    """The ``config.json`` of a ``Qwen3_5MoeForCausalLM`` (transformers 5 fields), with overrides."""
    base = {k: v for k, v in qwen35.config().items() if k != "intermediate_size"}
    base.update({
        "architectures": ["Qwen3_5MoeForCausalLM"],
        "model_type": "qwen3_5_moe_text",
        "moe_intermediate_size": 64,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": 128,
        "num_hidden_layers": 4,
    })
    cfg = qwen3.apply_overrides(base, overrides, qwen35._layer_types)
    qwen3_moe.check_moe(cfg)
    return cfg


def _block(prefix: str, cfg: Mapping, layout: str | None, fused_gate_up: bool) -> list:
    if layout is None:
        return qwen3_moe.moe_gguf_specs(prefix, cfg, fused_gate_up, shared=True)
    return qwen3_moe.moe_hf_specs(prefix, cfg, layout, shared=True)


def text_specs(cfg: Mapping, expert_layout: str | None = "per_expert", fused_gate_up: bool = False) -> list:
    """Text HF tensors (``expert_layout`` given) or the GGUF-side specs (``None``), in a stable order."""
    return qwen35.hybrid_specs(cfg, qwen35._gdn_specs, lambda p, layer: _block(p, cfg, expert_layout, fused_gate_up))


def mtp_specs(cfg: Mapping, expert_layout: str | None = "per_expert", fused_gate_up: bool = False) -> list:
    return mtp.mtp_specs(cfg, lambda p, c: _block(p, c, expert_layout, fused_gate_up))


def tensor_specs(cfg: Mapping, expert_layout: str = "per_expert") -> list:
    """Every HF tensor (``model.*``, ``lm_head``, ``mtp.*``) in the chosen expert layout."""
    return text_specs(cfg, expert_layout) + mtp_specs(cfg, expert_layout)


def hf_tensors(cfg: Mapping, seed: int = 0, expert_layout: str = "per_expert") -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact)."""
    return {s.name: s.values(seed) for s in tensor_specs(cfg, expert_layout)}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """Contract names (Qwen3.5 conventions) with ``moe/*`` in every layer, and ``mtp/*`` when present."""
    hf = hf_tensors(cfg, seed)
    out = qwen3.common_logical(hf, cfg, mlp_layers=())
    for layer, kind in enumerate(cfg["layer_types"]):
        if kind == "full_attention":
            out.update(qwen3.attention_logical(hf, cfg, layer, gated=True))
        else:
            out.update(qwen35.gdn_logical(hf, cfg, layer))
        out.update(qwen3_moe.moe_logical(f"model.layers.{layer}", cfg, layer, shared=True, seed=seed))

    def mtp_moe(prefix: str, index: int) -> dict[str, np.ndarray]:
        block = qwen3_moe.moe_logical(prefix, cfg, 0, shared=True, seed=seed)
        return {k.replace("text/layers/0/", f"mtp/layers/{index}/", 1): v for k, v in block.items()}

    out.update(mtp.mtp_logical(cfg, seed, mtp_moe))
    return out


def gguf_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32", fused_gate_up: bool = False) -> list[PlannedTensor]:
    transform = lambda s: qwen35._llama_cpp_transform(cfg, s)  # noqa: E731
    return (qwen3.gguf_plan(cfg, text_specs(cfg, None, fused_gate_up), ARCH, matrix_type, seed, transform)
            + mtp.gguf_tensors(cfg, mtp_specs(cfg, None, fused_gate_up), ARCH, matrix_type, seed, transform))


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, expert_layout: str = "per_expert", **overrides) -> Path:
    """The HF checkpoint directory, experts per expert or fused (transformers 5 ``gate_up_proj``)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg, expert_layout), tokenizer.resources(), seed=seed,
                                  dtype=dtype, shards=shards)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               fused_gate_up: bool = False, **overrides) -> Path:
    """The GGUF llama.cpp's converter writes (``fused_gate_up``: ``--fuse-gate-up-exps``)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)

    def metadata(w: gguf.GGUFWriter) -> None:
        qwen35.add_metadata(w, cfg, matrix_type, "Tiny Qwen3.5-MoE")
        qwen3_moe.add_moe_metadata(w, cfg)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[ARCH], metadata,
                                       gguf_tensors(cfg, seed, matrix_type, fused_gate_up))
