"""Tiny Qwen3-MoE (``Qwen3MoeForCausalLM``, ``model_type`` ``qwen3_moe``, GGUF arch ``qwen3moe``) and the
mixture-of-experts pieces :mod:`tinymodels.qwen35_moe` and :mod:`tinymodels.qwen3_next` reuse.

Checked against the sources (via the search tool):

- transformers 5 ``models/qwen3_moe`` (``Qwen3MoeSparseMoeBlock``: ``gate`` = ``Qwen3MoeTopKRouter`` with
  ``weight [E, H]``; ``experts`` = ``Qwen3MoeExperts`` with the 3-D parameters
  ``gate_up_proj [E, 2·I, H]`` (per expert ``[gate (I rows) | up (I rows)]``, split by ``chunk(2)``)
  and ``down_proj [E, H, I]``, saved without a ``.weight`` suffix); older checkpoints (Qwen3-30B-A3B)
  and transformers 4 save one ``nn.Linear`` per expert, ``mlp.experts.{e}.{gate,up,down}_proj.weight``.
  A layer is sparse iff it is not in ``mlp_only_layers`` and ``(l + 1) % decoder_sparse_step == 0``;
  dense layers keep ``mlp.{gate,up,down}_proj`` of ``intermediate_size``. Qwen3-MoE has no shared
  expert; Qwen3.5-MoE and Qwen3-Next add ``mlp.shared_expert.{gate,up,down}_proj`` of
  ``shared_expert_intermediate_size`` and ``mlp.shared_expert_gate`` (``Linear(H, 1)``: ``[1, H]``).
- llama.cpp ``conversion/qwen.py`` @03173d5e ``Qwen2MoeModel.modify_tensors`` (inherited by
  ``Qwen3MoeModel``, ``Qwen3NextModel``, ``Qwen3_5MoeTextModel``): per-expert tensors are stacked with
  ``torch.stack(dim=0)`` into ``model.layers.{l}.mlp.experts.{down,gate,up}_proj.weight`` (yielded in
  that order) → ``ffn_{down,gate,up}_exps`` of numpy shape ``(E, N, K)``, i.e. GGUF dims ``(K, N, E)``:
  ``(H, I, E)`` for gate/up, ``(I, H, E)`` for down; a fused HF ``gate_up_proj [E, 2I, H]`` is split
  on dim −2 into the same two tensors and ``down_proj [E, H, I]`` passes unchanged, so both HF layouts
  give the same GGUF. ``conversion/base.py`` @00bd27a6: with ``--fuse-gate-up-exps`` the gate and up
  banks are concatenated on dim 1 into ``ffn_gate_up_exps`` ``(E, 2I, H)`` (gate first); the routers
  ``ffn_gate_inp`` and ``ffn_gate_inp_shexp`` are always F32; the shared expert maps to
  ``ffn_{gate,up,down}_shexp``. gguf-py ``MODEL_TENSORS``: ``qwen3moe`` has no ``FFN_GATE_UP_EXP`` (the
  fused form is refused here), ``qwen35moe`` and ``qwen3next`` have it; neither ``qwen3moe`` nor
  ``qwen3next`` lists the dense ``FFN_GATE``/``FFN_UP``/``FFN_DOWN``, so ``mlp_only_layers`` configs
  are written as HF directories only (the GGUF writers refuse them).
- Metadata: ``TextModel.set_gguf_parameters`` adds ``expert_count`` (``num_experts``) and
  ``expert_used_count``; ``Qwen2MoeModel`` adds ``expert_feed_forward_length``
  (``moe_intermediate_size``) and, when present, ``expert_shared_feed_forward_length``.

Logical parameters (extending the contract; HF values and row order, one expert = one HF expert):
``text/layers/{l}/moe/router [E, H]``, ``text/layers/{l}/moe/experts/{e}/gate [I, H]``,
``.../experts/{e}/up [I, H]``, ``.../experts/{e}/down [H, I]``; with a shared expert
``text/layers/{l}/moe/shared_expert/{gate,up,down}`` and ``text/layers/{l}/moe/shared_expert_gate
[1, H]``. Sparse layers have no ``mlp/*``. Every expert's values come from its own per-expert spec
(:class:`tinymodels.synth.TensorSpec` seeded by the per-expert HF name), so two swapped experts differ.

Default dims: 2 layers, hidden 128, 8 experts (top-2) of 64, dense ``intermediate_size`` 256 (used by
``mlp_only_layers``), 4 query / 2 KV heads of 32, vocab 512, untied head.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, hf_writer, qwen3, tokenizer
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import StackedSpec, TensorSpec

MODEL_NAME = "qwen3moe"  # the name `python -m tinymodels` and regression cases use
MOE = True  # takes expert_layout (HF) and fused_gate_up (GGUF)

ARCH = gguf.MODEL_ARCH.QWEN3MOE
TOKENIZER_PRE = "qwen2"
EXPERT_LAYOUTS = ("per_expert", "fused")
PROJECTIONS = ("gate", "up", "down")


def config(**overrides) -> dict:
    """The ``config.json`` of a ``Qwen3MoeForCausalLM`` (transformers 5 fields), with overrides."""
    base = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": qwen3._special("<|endoftext|>"),
        "eos_token_id": qwen3._special("<|im_end|>"),
        "decoder_sparse_step": 1,
        "dtype": "bfloat16",
        "head_dim": 32,
        "hidden_act": "silu",
        "hidden_size": 128,
        "initializer_range": 0.02,
        "intermediate_size": 256,
        "layer_types": [],
        "max_position_embeddings": 4096,
        "max_window_layers": 2,
        "mlp_only_layers": [],
        "moe_intermediate_size": 64,
        "norm_topk_prob": True,
        "num_attention_heads": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "output_router_logits": False,
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "router_aux_loss_coef": 0.001,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "transformers_version": "5.0.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 512,
    }
    cfg = qwen3.apply_overrides(base, overrides, lambda c: ["full_attention"] * c["num_hidden_layers"])
    check_moe(cfg)
    return cfg


def check_moe(cfg: Mapping) -> None:
    if not 1 <= cfg["num_experts_per_tok"] <= cfg["num_experts"]:
        raise ValueError("num_experts_per_tok must be between 1 and num_experts")


def sparse_layers(cfg: Mapping) -> list[int]:
    """Layers with a sparse MoE block (transformers ``Qwen3MoeDecoderLayer`` / ``Qwen3NextDecoderLayer``)."""
    step = cfg.get("decoder_sparse_step", 1)
    dense = set(cfg.get("mlp_only_layers") or [])
    return [n for n in range(cfg["num_hidden_layers"]) if n not in dense and (n + 1) % step == 0]


def expert_specs(prefix: str, cfg: Mapping, expert: int) -> tuple[TensorSpec, TensorSpec, TensorSpec]:
    """One expert's HF ``(gate, up, down)`` (per-expert names; the seed of its values)."""
    h, i = cfg["hidden_size"], cfg["moe_intermediate_size"]
    e = f"{prefix}.mlp.experts.{expert}"
    return (TensorSpec(f"{e}.gate_proj.weight", (i, h), "linear"), TensorSpec(f"{e}.up_proj.weight", (i, h), "linear"),
            TensorSpec(f"{e}.down_proj.weight", (h, i), "residual"))


def _experts(prefix: str, cfg: Mapping) -> list[tuple[TensorSpec, TensorSpec, TensorSpec]]:
    return [expert_specs(prefix, cfg, e) for e in range(cfg["num_experts"])]


def shared_expert_specs(prefix: str, cfg: Mapping) -> list[TensorSpec]:
    h, i = cfg["hidden_size"], cfg["shared_expert_intermediate_size"]
    s = f"{prefix}.mlp.shared_expert"
    return [
        TensorSpec(f"{s}.gate_proj.weight", (i, h), "linear"),
        TensorSpec(f"{s}.up_proj.weight", (i, h), "linear"),
        TensorSpec(f"{s}.down_proj.weight", (h, i), "residual"),
        TensorSpec(f"{prefix}.mlp.shared_expert_gate.weight", (1, h), "linear"),
    ]


def moe_hf_specs(prefix: str, cfg: Mapping, layout: str, shared: bool) -> list[TensorSpec | StackedSpec]:
    """The HF tensors of one sparse block: router, experts in ``layout``, optional shared expert."""
    if layout not in EXPERT_LAYOUTS:
        raise ValueError(f"expert layout {layout!r} not supported; choose one of {', '.join(EXPERT_LAYOUTS)}")
    specs: list[TensorSpec | StackedSpec] = [
        TensorSpec(f"{prefix}.mlp.gate.weight", (cfg["num_experts"], cfg["hidden_size"]), "linear")]
    experts = _experts(prefix, cfg)
    if layout == "per_expert":
        specs += [spec for triple in experts for spec in triple]
    else:  # transformers 5 Qwen3MoeExperts parameters
        specs.append(StackedSpec(f"{prefix}.mlp.experts.gate_up_proj", tuple((g, u) for g, u, _ in experts)))
        specs.append(StackedSpec(f"{prefix}.mlp.experts.down_proj", tuple((d,) for _, _, d in experts)))
    return specs + (shared_expert_specs(prefix, cfg) if shared else [])


def moe_gguf_specs(prefix: str, cfg: Mapping, fused_gate_up: bool, shared: bool) -> list[TensorSpec | StackedSpec]:
    """The specs llama.cpp turns into GGUF tensors, named as ``Qwen2MoeModel`` names its merged banks."""
    experts = _experts(prefix, cfg)
    m = f"{prefix}.mlp.experts"
    specs: list[TensorSpec | StackedSpec] = [
        TensorSpec(f"{prefix}.mlp.gate.weight", (cfg["num_experts"], cfg["hidden_size"]), "linear"),
        StackedSpec(f"{m}.down_proj.weight", tuple((d,) for _, _, d in experts)),
    ]
    if fused_gate_up:
        specs.append(StackedSpec(f"{m}.gate_up_proj.weight", tuple((g, u) for g, u, _ in experts)))
    else:
        specs.append(StackedSpec(f"{m}.gate_proj.weight", tuple((g,) for g, _, _ in experts)))
        specs.append(StackedSpec(f"{m}.up_proj.weight", tuple((u,) for _, u, _ in experts)))
    return specs + (shared_expert_specs(prefix, cfg) if shared else [])


def moe_logical(prefix: str, cfg: Mapping, layer: int, shared: bool, seed: int) -> dict[str, np.ndarray]:
    """The logical parameters of one sparse block (HF values, one entry per expert and projection)."""
    q = f"text/layers/{layer}/moe"
    out = {f"{q}/router": TensorSpec(f"{prefix}.mlp.gate.weight", (cfg["num_experts"], cfg["hidden_size"]),
                                     "linear").values(seed)}
    for e, triple in enumerate(_experts(prefix, cfg)):
        for part, spec in zip(PROJECTIONS, triple, strict=True):
            out[f"{q}/experts/{e}/{part}"] = spec.values(seed)
    if shared:
        gate, up, down, shared_gate = shared_expert_specs(prefix, cfg)
        for part, spec in zip(PROJECTIONS, (gate, up, down), strict=True):
            out[f"{q}/shared_expert/{part}"] = spec.values(seed)
        out[f"{q}/shared_expert_gate"] = shared_gate.values(seed)
    return out


def add_moe_metadata(w: gguf.GGUFWriter, cfg: Mapping) -> None:
    w.add_expert_count(cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if "shared_expert_intermediate_size" in cfg:
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])


def _layer_mlp(prefix: str, cfg: Mapping, layer: int, layout: str | None, fused_gate_up: bool) -> list:
    """HF (``layout`` given) or GGUF-side specs of one layer's feed-forward block."""
    if layer not in sparse_layers(cfg):
        return qwen3.mlp_specs(prefix, cfg)
    if layout is None:
        return moe_gguf_specs(prefix, cfg, fused_gate_up, shared=False)
    return moe_hf_specs(prefix, cfg, layout, shared=False)


def tensor_specs(cfg: Mapping, expert_layout: str | None = "per_expert", fused_gate_up: bool = False) -> list:
    """HF tensors (``expert_layout`` given) or the GGUF-side specs (``expert_layout=None``), stable order."""
    return qwen3.decoder_specs(cfg, ["full_attention"] * cfg["num_hidden_layers"],
                               lambda p, kind: qwen3.attention_specs(p, cfg, "norm_one", gated=False),
                               lambda p, layer: _layer_mlp(p, cfg, layer, expert_layout, fused_gate_up), "norm_one")


def hf_tensors(cfg: Mapping, seed: int = 0, expert_layout: str = "per_expert") -> dict[str, np.ndarray]:
    """HF name → float32 ground-truth values (bf16-exact) in the chosen expert layout."""
    return {s.name: s.values(seed) for s in tensor_specs(cfg, expert_layout)}


def logical_parameters(cfg: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """Contract names: globals, norms, attention, and per layer dense ``mlp/*`` or ``moe/*``."""
    hf = hf_tensors(cfg, seed, "per_expert")
    sparse = sparse_layers(cfg)
    out = qwen3.common_logical(hf, cfg, [n for n in range(cfg["num_hidden_layers"]) if n not in sparse])
    for layer in range(cfg["num_hidden_layers"]):
        out.update(qwen3.attention_logical(hf, cfg, layer, gated=False))
        if layer in sparse:
            out.update(moe_logical(f"model.layers.{layer}", cfg, layer, shared=False, seed=seed))
    return out


def check_gguf_layers(cfg: Mapping, arch: gguf.MODEL_ARCH) -> None:
    """llama.cpp cannot name dense FFN tensors of these archs (no ``FFN_GATE`` in gguf-py's
    ``MODEL_TENSORS``): a config with ``mlp_only_layers`` has no GGUF form, only an HF one."""
    dense = set(range(cfg["num_hidden_layers"])) - set(sparse_layers(cfg))
    if dense and gguf.MODEL_TENSOR.FFN_GATE not in gguf.MODEL_TENSORS[arch]:
        raise ValueError(f"dense layers {sorted(dense)} have no GGUF names in {gguf.MODEL_ARCH_NAMES[arch]}")


def gguf_tensors(cfg: Mapping, seed: int = 0, matrix_type: str = "F32", fused_gate_up: bool = False) -> list[PlannedTensor]:
    if fused_gate_up:
        raise ValueError("qwen3moe has no ffn_gate_up_exps in gguf-py's MODEL_TENSORS; fused banks are qwen35moe/qwen3next")
    check_gguf_layers(cfg, ARCH)
    return qwen3.gguf_plan(cfg, tensor_specs(cfg, None), ARCH, matrix_type, seed, lambda spec: None)


def write_hf_dir(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, dtype: str = "bf16",
                 shards: int = 2, expert_layout: str = "per_expert", **overrides) -> Path:
    """The HF checkpoint directory, experts per expert (transformers 4 / Qwen3-30B-A3B) or fused (transformers 5)."""
    cfg = qwen3.resolve_config(cfg, overrides, config)
    return hf_writer.write_hf_dir(path, cfg, tensor_specs(cfg, expert_layout), tokenizer.resources(), seed=seed,
                                  dtype=dtype, shards=shards)


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, matrix_type: str = "F32",
               fused_gate_up: bool = False, **overrides) -> Path:
    """The GGUF llama.cpp's converter writes from either HF layout; expert banks are streamed in chunks."""
    cfg = qwen3.resolve_config(cfg, overrides, config)

    def metadata(w: gguf.GGUFWriter) -> None:
        qwen3.add_base_metadata(w, cfg, "Tiny Qwen3-MoE", matrix_type)
        add_moe_metadata(w, cfg)
        gguf_writer.add_tokenizer(w, tokenizer.resources(), cfg, TOKENIZER_PRE)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[ARCH], metadata,
                                       gguf_tensors(cfg, seed, matrix_type, fused_gate_up))


def bank_config(bank_bytes: int, matrix_type: str = "Q8_0", hidden: int = 2048, num_experts: int = 16) -> dict:
    """A one-layer Qwen3-MoE whose ``ffn_gate_exps`` bank takes about ``bank_bytes`` in ``matrix_type``
    (benchmarks: a bank several times larger than the memory limit of the converter under test)."""
    qtype, _ = gguf_writer.matrix_type(matrix_type)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    per_row = hidden // block * size
    rows = max(32, bank_bytes // (num_experts * per_row) // 32 * 32)  # down's rows are quantized too: % 32
    return config(layers=1, hidden=hidden, heads=max(1, hidden // 128), kv_heads=max(1, hidden // 512),
                  head_dim=128, num_experts=num_experts, num_experts_per_tok=min(2, num_experts),
                  moe_intermediate_size=int(rows), intermediate_size=int(rows))


def bank_nbytes(cfg: Mapping, matrix_type: str) -> int:
    """Bytes of one ``ffn_gate_exps`` bank of ``cfg`` in ``matrix_type``."""
    qtype, _ = gguf_writer.matrix_type(matrix_type)
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return math.prod((cfg["num_experts"], cfg["moe_intermediate_size"], cfg["hidden_size"] // block * size))
