"""The Qwen3.5 / Qwen3.5-MoE multi-token-prediction (MTP) head: HF ``mtp.*`` tensors, logical parameters
and the GGUF blocks llama.cpp writes for it. Enabled by the HF config field ``mtp_num_hidden_layers``
(:func:`tinymodels.qwen35.config` / :func:`tinymodels.qwen35_moe.config` with
``mtp_num_hidden_layers=1``).

Checked against the sources (via the search tool):

- HF checkpoints (read by vLLM ``qwen3_next_mtp`` / ``qwen3_5_mtp``; transformers ignores them):
  ``mtp.fc.weight [H, 2H]`` applied to ``cat[pre_fc_norm_embedding(emb), pre_fc_norm_hidden(h)]``
  (embedding first), ``mtp.pre_fc_norm_embedding.weight``, ``mtp.pre_fc_norm_hidden.weight``,
  ``mtp.norm.weight`` and ``mtp.layers.{i}.*``, each a full-attention decoder layer (gated ``q_proj``,
  ``q_norm``/``k_norm``, the model's MLP: dense, or the sparse block with shared expert for MoE). All
  these norms are zero-centred Qwen3.5 RMSNorms. Embedding and head are the text model's.
  ``Qwen3_5ForConditionalGeneration`` checkpoints keep them top-level (``mtp.*``, not
  ``model.language_model.mtp.*``).
- llama.cpp ``conversion/qwen.py`` @03173d5e ``_Qwen35MtpMixin`` (``Qwen3_5TextModel``,
  ``Qwen3_5MoeTextModel``): ``block_count = num_hidden_layers + mtp_num_hidden_layers``;
  ``{arch}.nextn_predict_layers = mtp_num_hidden_layers``; ``filter_tensors`` renames
  ``mtp.layers.{i}.X`` → ``model.layers.{L+i}.X`` (standard per-layer names: ``attn_norm``, ``attn_q``
  written whole, ``attn_k``, ``attn_v``, ``attn_output``, ``attn_q_norm``, ``attn_k_norm``,
  ``post_attention_norm``, ``ffn_*`` or the expert banks) and ``mtp.fc`` / ``pre_fc_norm_embedding`` /
  ``pre_fc_norm_hidden`` / ``norm`` → ``model.layers.{L}.{eh_proj, enorm, hnorm, shared_head.norm}``,
  i.e. gguf-py ``blk.{L}.nextn.{eh_proj, enorm, hnorm, shared_head_norm}``. The rename happens before
  ``modify_tensors``, so every one of these norms ends in ``norm.weight`` and gets the ``+1``;
  ``eh_proj`` keeps HF shape ``[H, 2H]`` (GGUF dims ``(2H, H)``) and the matrix type.
  gguf-py 0.19's ``MODEL_TENSORS[QWEN35]`` does not list the ``NEXTN_*`` kinds yet (llama.cpp's does,
  so its ``TensorNameMap`` maps them); the names here are formatted from ``gguf.TENSOR_NAMES``.

Logical parameters (contract extension; HF values, norms un-shifted):
``mtp/fc [H, 2H]``, ``mtp/pre_fc_norm_embedding [H]``, ``mtp/pre_fc_norm_hidden [H]``, ``mtp/norm [H]``,
and per MTP layer ``mtp/layers/{i}/input_norm``, ``.../post_attention_norm``,
``.../attention/{query, gate, key, value, output, query_norm, key_norm}`` (query and gate split per head
as for text) and ``.../mlp/{gate, up, down}`` or ``.../moe/...`` (same names as
:mod:`tinymodels.qwen3_moe` under ``mtp/layers/{i}``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import gguf
import numpy as np

from tinymodels import gguf_writer, qwen3
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import TensorSpec

NEXTN = {  # HF mtp.* → (llama.cpp rename, gguf-py tensor kind)
    "fc": ("eh_proj", gguf.MODEL_TENSOR.NEXTN_EH_PROJ),
    "pre_fc_norm_embedding": ("enorm", gguf.MODEL_TENSOR.NEXTN_ENORM),
    "pre_fc_norm_hidden": ("hnorm", gguf.MODEL_TENSOR.NEXTN_HNORM),
    "norm": ("shared_head.norm", gguf.MODEL_TENSOR.NEXTN_SHARED_HEAD_NORM),
}

LayerMlp = Callable[[str, Mapping], list]


def layers(cfg: Mapping) -> int:
    return int(cfg.get("mtp_num_hidden_layers") or 0)


def mtp_specs(cfg: Mapping, layer_mlp: LayerMlp) -> list:
    """HF ``mtp.*`` tensors; ``layer_mlp(prefix, cfg)`` gives the MLP specs of one MTP layer."""
    n = layers(cfg)
    if not n:
        return []
    h = cfg["hidden_size"]
    specs: list = [
        TensorSpec("mtp.fc.weight", (h, 2 * h), "linear"),
        TensorSpec("mtp.pre_fc_norm_embedding.weight", (h,), "norm_zero"),
        TensorSpec("mtp.pre_fc_norm_hidden.weight", (h,), "norm_zero"),
    ]
    for i in range(n):
        p = f"mtp.layers.{i}"
        specs.append(TensorSpec(f"{p}.input_layernorm.weight", (h,), "norm_zero"))
        specs += qwen3.attention_specs(p, cfg, "norm_zero", gated=True)
        specs.append(TensorSpec(f"{p}.post_attention_layernorm.weight", (h,), "norm_zero"))
        specs += layer_mlp(p, cfg)
    return specs + [TensorSpec("mtp.norm.weight", (h,), "norm_zero")]


def mtp_logical(cfg: Mapping, seed: int, layer_logical: Callable[[str, int], dict[str, np.ndarray]]) -> dict:
    """``mtp/...`` logical parameters; ``layer_logical(prefix, i)`` gives one layer's MLP/MoE entries
    under ``mtp/layers/{i}``."""
    n = layers(cfg)
    if not n:
        return {}
    h = cfg["hidden_size"]
    out = {"mtp/fc": TensorSpec("mtp.fc.weight", (h, 2 * h), "linear").values(seed)}
    for key in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        out[f"mtp/{key}"] = TensorSpec(f"mtp.{key}.weight", (h,), "norm_zero").values(seed)
    for i in range(n):
        p = f"mtp.layers.{i}"
        hf = {s.name: s.values(seed) for s in qwen3.attention_specs(p, cfg, "norm_zero", gated=True)}
        attention = _attention_logical(hf, cfg, p)
        out.update({f"mtp/layers/{i}/{k}": v for k, v in attention.items()})
        for key, hf_key in (("input_norm", "input_layernorm"), ("post_attention_norm", "post_attention_layernorm")):
            out[f"mtp/layers/{i}/{key}"] = TensorSpec(f"{p}.{hf_key}.weight", (h,), "norm_zero").values(seed)
        out.update(layer_logical(p, i))
    return out


def _attention_logical(hf: Mapping[str, np.ndarray], cfg: Mapping, prefix: str) -> dict[str, np.ndarray]:
    """``qwen3.attention_logical`` for an ``mtp.layers.{i}`` prefix, keys relative to the layer."""
    renamed = {k.replace(prefix, "model.layers.0", 1): v for k, v in hf.items()}
    return {k.removeprefix("text/layers/0/"): v for k, v in qwen3.attention_logical(renamed, cfg, 0, gated=True).items()}


def llama_cpp_name(name: str, cfg: Mapping) -> str:
    """``_Qwen35MtpMixin.filter_tensors``: the HF name llama.cpp maps instead of ``name``."""
    base = cfg["num_hidden_layers"]
    parts = name.split(".", 3)
    if len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal():
        return f"model.layers.{base + int(parts[2])}.{parts[3]}"
    if len(parts) == 3 and parts[1] in NEXTN:
        return f"model.layers.{base}.{NEXTN[parts[1]][0]}.{parts[2]}"
    raise KeyError(f"{name}: not an MTP tensor")


def gguf_name(name: str, cfg: Mapping, arch: gguf.MODEL_ARCH) -> str:
    parts = name.split(".")
    if len(parts) == 3 and parts[1] in NEXTN:
        return gguf.TENSOR_NAMES[NEXTN[parts[1]][1]].format(bid=cfg["num_hidden_layers"]) + ".weight"
    names = gguf_writer.tensor_name_map(arch, cfg["num_hidden_layers"] + layers(cfg))
    mapped = names.get_name(llama_cpp_name(name, cfg), try_suffixes=(".weight", ".bias"))
    if mapped is None:
        raise KeyError(f"{name}: no GGUF name for {arch.name}")
    return mapped


def gguf_tensors(cfg: Mapping, specs: list, arch: gguf.MODEL_ARCH, matrix_type: str, seed: int,
                 transform: Callable[[TensorSpec], qwen3.Transform | None]) -> list[PlannedTensor]:
    """The MTP blocks as llama.cpp writes them; ``transform`` sees the renamed spec (its ``+1`` rule)."""
    plan = []
    for spec in specs:
        name = gguf_name(spec.name, cfg, arch)
        probe = TensorSpec(llama_cpp_name(spec.name, cfg), spec.shape, spec.init) if isinstance(spec, TensorSpec) else None
        change = transform(probe) if probe is not None else None
        flat_rows = None
        if change is None:
            rows, shape, whole = (lambda a, b, s=spec: s.values(seed, a, b)), spec.shape, False
            if hasattr(spec, "flat_values"):
                flat_rows = lambda a, b, s=spec: s.flat_values(seed, a, b)  # noqa: E731
        else:
            fn, shape = change
            rows, whole = (lambda a, b, s=spec, f=fn: f(s.values(seed))[a:b]), True
        plan.append(PlannedTensor(name, tuple(shape), gguf_writer.tensor_qtype(name, shape, matrix_type), rows, whole,
                                  flat_rows))
    return plan


def add_metadata(w: gguf.GGUFWriter, cfg: Mapping) -> None:
    if layers(cfg):
        w.add_nextn_predict_layers(layers(cfg))
