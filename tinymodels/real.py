"""Real geometries: the published ``config.json`` of real Qwen checkpoints, and tiny models built to them.

Data (docs/architectures.md §Real geometries): ``real_configs/published/<name>.json`` is a checkpoint's
``config.json`` as released (``real_configs/sources.json`` names the repository and the copy it was read
from); ``real_configs/transformers-5.23.0/<name>.json`` is the same file loaded and saved again by
transformers (:mod:`tinymodels.resave_configs`), the other spelling users' checkpoints carry.

:func:`geometry` turns a real config into the config of the matching tinymodels generator (``qwen2``,
``qwen3``, ``qwen3moe``, ``qwen3next``, ``qwen3vl``, ``qwen35``), keeping the real values unless a knob
changes them:

- ``layers``: keep the first ``layers`` decoder layers (``None``: the real count); the layer pattern
  (``full_attention_interval``) is kept, so a hybrid model keeps its full-attention layers every k-th.
- ``shrink``: divide every width (hidden, intermediate, expert and shared-expert widths, head sizes, the
  vision tower's widths) by this integer; head counts, expert counts and their ratios stay real. A width
  it does not divide is a ValueError. ``mrope_section`` is rescaled to the smaller rotary width (largest
  remainders, the sum kept at rotary width / 2).
- ``vocab``: the vocabulary size (``None``: the real one; tests use the tiny tokenizer's 512).
- ``experts``: the routed-expert count (``None``: the real one, 128 for Qwen3-30B-A3B); the experts per
  token are capped at it.

:func:`respell` writes a generated model's geometry back into the published file (either spelling), so
:func:`write_hf_dir` produces a checkpoint whose ``config.json`` is spelled exactly as the release (or as
transformers re-saves it) with the tiny model's numbers; its tensors are the generator's own.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

from tinymodels import hf_writer, qwen2, qwen3, qwen3_moe, qwen3_next, qwen3_vl, qwen35, tokenizer, vision

REAL_CONFIGS = Path(__file__).resolve().parent / "real_configs"
PUBLISHED = REAL_CONFIGS / "published"
TRANSFORMERS_VERSION = "5.23.0"
RESAVED = REAL_CONFIGS / f"transformers-{TRANSFORMERS_VERSION}"
#: the two spellings of every real config: as released, and as transformers re-saves it
SPELLINGS = {"published": PUBLISHED, "resaved": RESAVED}
_GENERATORS: dict[str, ModuleType] = {"qwen2": qwen2, "qwen3": qwen3, "qwen3moe": qwen3_moe,
                                      "qwen3next": qwen3_next, "qwen3vl": qwen3_vl, "qwen35": qwen35}
#: text fields copied from a real config into the generator's (when the generator has them)
TEXT_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
               "moe_intermediate_size", "num_experts", "num_experts_per_tok", "norm_topk_prob",
               "decoder_sparse_step", "mlp_only_layers", "shared_expert_intermediate_size",
               "full_attention_interval", "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
               "linear_num_key_heads", "linear_num_value_heads", "attn_output_gate", "mtp_num_hidden_layers",
               "vocab_size")
VISION_FIELDS = ("depth", "hidden_size", "intermediate_size", "num_heads", "out_hidden_size",
                 "num_position_embeddings", "deepstack_visual_indexes", "patch_size", "spatial_merge_size",
                 "temporal_patch_size", "in_channels")
#: fields a generator takes although its default config leaves them out
_OPTIONAL = {qwen35: ("mtp_num_hidden_layers",)}
ROPE_FIELDS = ("rope_theta", "partial_rotary_factor", "mrope_section")
_WIDTHS = ("hidden_size", "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size",
           "head_dim", "linear_key_head_dim", "linear_value_head_dim")
#: keys of a published file that take the generated model's value (besides TEXT_FIELDS / VISION_FIELDS)
_PLACED = ("bos_token_id", "eos_token_id", "image_token_id", "video_token_id", "vision_start_token_id",
           "vision_end_token_id", "layer_types", "num_local_experts", *ROPE_FIELDS)


def sources() -> dict[str, dict]:
    """``name`` → where the published file comes from (``published``, ``read_from``, ``tiny``)."""
    return json.loads((REAL_CONFIGS / "sources.json").read_text(encoding="utf-8"))["models"]


def names() -> list[str]:
    return sorted(sources())


def published(name: str, spelling: str = "published") -> dict:
    """The real ``config.json`` (``spelling``: ``published`` as released, ``resaved`` by transformers)."""
    if name not in sources():
        raise KeyError(f"no real config {name!r}; known: {', '.join(names())}")
    if spelling not in SPELLINGS:
        raise ValueError(f"spelling {spelling!r} is not one of {', '.join(SPELLINGS)}")
    return json.loads((SPELLINGS[spelling] / f"{name}.json").read_text(encoding="utf-8"))


def generator(name: str) -> ModuleType:
    """The tinymodels module that generates models of this real config's architecture."""
    return _GENERATORS[sources()[name]["tiny"]]


def _text(cfg: Mapping) -> Mapping:
    return cfg.get("text_config", cfg)


def _rope(text: Mapping) -> dict:
    rope = dict(text.get("rope_scaling") or {})
    rope.update(text.get("rope_parameters") or {})
    return {k: rope.get(k, text.get(k)) for k in ROPE_FIELDS if rope.get(k, text.get(k)) is not None}


def _shrunk(value: int, shrink: int, what: str) -> int:
    if value % shrink:
        raise ValueError(f"shrink {shrink} does not divide {what} = {value}")
    return value // shrink


def _mrope(section: list[int], half: int) -> list[int]:
    """``section`` rescaled to sum to ``half`` (largest remainders)."""
    total = sum(section)
    exact = [s * half / total for s in section]
    out = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: out[i] - exact[i])[:half - sum(out)]:
        out[i] += 1
    return out


def geometry(name: str, *, layers: int | None = None, shrink: int = 1, vocab: int | None = None,
             experts: int | None = None) -> dict:
    """The generator config (``generator(name).config``; for Qwen3.5 the text config, its tower under
    ``vision_config``) of the real model ``name`` under the knobs (module docstring)."""
    real = published(name)
    text, module = _text(real), generator(name)
    base = module.config()
    known = set(base) | set(base.get("text_config", {})) | set(_OPTIONAL.get(module, ()))
    over = {k: text[k] for k in TEXT_FIELDS if k in text and k in known}
    if "tie_word_embeddings" in real and "tie_word_embeddings" in known:
        over["tie_word_embeddings"] = real["tie_word_embeddings"]
    rope = _rope(text)
    over.update(rope)
    for key in _WIDTHS:
        if key in over:
            over[key] = _shrunk(over[key], shrink, key)
    if layers is not None:
        over["num_hidden_layers"] = layers
    if vocab is not None:
        over["vocab_size"] = vocab
    if experts is not None:
        over["num_experts"] = experts
        over["num_experts_per_tok"] = min(over["num_experts_per_tok"], experts)
    over.setdefault("vocab_size", tokenizer.default_size())
    if "mrope_section" in over:
        head_dim = over.get("head_dim", over["hidden_size"] // over["num_attention_heads"])
        over["mrope_section"] = _mrope(over["mrope_section"], int(head_dim * rope.get("partial_rotary_factor", 1)) // 2)
    if "vision_config" in real:
        tower = {k: v for k, v in real["vision_config"].items() if k in VISION_FIELDS}
        for key in ("hidden_size", "intermediate_size"):
            tower[key] = _shrunk(tower[key], shrink, f"vision_config.{key}")
        tower["out_hidden_size"] = over["hidden_size"]
        if module is qwen35:
            return {**module.config(**over), "vision_config": vision.config("qwen3_5", **tower)}
        over["vision_config"] = tower
    return module.config(**over)


def _flat(cfg: Mapping) -> dict:
    """Every value of a generated config a published file may hold, by key."""
    text = {k: v for k, v in cfg.items() if k != "vision_config"}
    if "text_config" in cfg:
        text = {**text, **cfg["text_config"]}
    elif "vision_config" in cfg:  # Qwen3.5: the root ids of the conditional-generation config
        text = {**vision.model_config(text, cfg["vision_config"]), **text}
    flat = {**text, **(text.get("rope_parameters") or {})}
    if "num_experts" in flat:
        flat["num_local_experts"] = flat["num_experts"]
    return flat


def _place(holder: dict, values: Mapping, keys: tuple[str, ...]) -> None:
    for key, value in holder.items():
        if key in ("vision_config", "text_config"):
            continue
        if isinstance(value, dict):
            _place(value, values, keys)
        elif key in keys and key in values:
            holder[key] = values[key]


def respell(name: str, cfg: Mapping, spelling: str = "published") -> dict:
    """The published ``config.json`` of ``name`` (either spelling) carrying ``cfg``'s geometry (a
    :func:`geometry` result): each key the release spells is set, where the release puts it, to the
    generated model's value; nothing is added or moved."""
    out = published(name, spelling)
    flat = _flat(cfg)
    keys = (*TEXT_FIELDS, *_PLACED)
    _place(out, flat, keys)
    if "text_config" in out:
        _place(out["text_config"], flat, keys)
    if "vision_config" in out:
        _place(out["vision_config"], cfg["vision_config"], VISION_FIELDS)
    return out


def write_canonical_hf_dir(path: str | os.PathLike[str], name: str, cfg: Mapping, seed: int = 0,
                           dtype: str = "bf16", shards: int = 2) -> Path:
    """The generator's own checkpoint of ``cfg`` (tinymodels' transformers 5 spelling)."""
    if generator(name) is qwen35 and "vision_config" in cfg:
        text = {k: v for k, v in cfg.items() if k != "vision_config"}
        return vision.write_hf_dir(path, text, cfg["vision_config"], seed=seed, dtype=dtype, shards=shards)
    return generator(name).write_hf_dir(path, cfg, seed=seed, dtype=dtype, shards=shards)


def write_hf_dir(path: str | os.PathLike[str], name: str, cfg: Mapping, spelling: str = "published",
                 seed: int = 0, dtype: str = "bf16", shards: int = 2) -> Path:
    """The checkpoint of ``cfg`` with its ``config.json`` spelled as the real one (``spelling``)."""
    path = Path(path)
    staging = path.parent / f".{path.name}.{os.getpid()}.real"
    try:
        write_canonical_hf_dir(staging, name, cfg, seed=seed, dtype=dtype, shards=shards)
        doc = respell(name, cfg, spelling)
        for holder in (doc, doc.get("text_config", {})):
            for key in ("dtype", "torch_dtype"):
                if key in holder:  # the dtype the tensors were written in
                    holder[key] = hf_writer.DTYPES[dtype][2]
        (staging / "config.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.rename(staging, path)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return path


def write_gguf(path: str | os.PathLike[str], name: str, cfg: Mapping, seed: int = 0,
               matrix_type: str = "F32") -> Path:
    """The GGUF llama.cpp would write for the text model of ``cfg``."""
    module = generator(name)
    text = {k: v for k, v in cfg.items() if k != "vision_config"} if module is qwen35 else cfg
    return module.write_gguf(path, text, seed=seed, matrix_type=matrix_type)
