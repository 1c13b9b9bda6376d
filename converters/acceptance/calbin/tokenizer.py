"""Tokenizer and HF config of the package (docs/calbin.md §8): parse, then service-consistency checks.

- Gate B: the §8 JSON files parse (``config.json`` read through :func:`text_view`) (duplicate keys rejected, size bounded); the vocab GGUF starts with
  the ``GGUF`` magic. Failures are ``TOKENIZER_FILE_INVALID`` (serving needs them; the calbin itself
  can still be judged).
- Gate C: logits' last dimension == ``config.vocab_size`` and every tokenizer id < ``vocab_size``
  (``XREF_VOCAB``); BOS/EOS/PAD agree across ``tokenizer_config``/``generation_config``/``config``
  (``TOKENIZER_SPECIAL_TOKENS``); a tokenizer or config context above the calbin ``max_seq_len`` means
  serving must cap at the calbin value (``TOKENIZER_CONTEXT``).
"""

from __future__ import annotations

import json
from typing import Any

from converters.acceptance.calbin.context import Ctx
from converters.acceptance.calbin.inventory import TOKENIZER_DIR

MAX_JSON_BYTES = 512 << 20
JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json", "vocab.json")


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(f"duplicate key {k!r}")
        out[k] = v
    return out


def load(ctx: Ctx) -> None:
    for name in JSON_FILES:
        rel = f"{TOKENIZER_DIR}/{name}"
        entry = ctx.files.get(rel)
        if entry is None or entry.size == 0:
            continue
        ctx.check("B", "tokenizer_json")
        if entry.size > MAX_JSON_BYTES:
            ctx.emit("TOKENIZER_FILE_INVALID", f"{entry.size} bytes exceeds the JSON bound", file=rel)
            continue
        try:
            doc = json.loads(ctx.path(rel).read_bytes().decode("utf-8"), object_pairs_hook=_no_duplicates)
        except (ValueError, OSError, RecursionError) as exc:
            ctx.emit("TOKENIZER_FILE_INVALID", f"not valid JSON: {exc or 'nesting too deep'}", file=rel)
            continue
        if not isinstance(doc, dict):
            ctx.emit("TOKENIZER_FILE_INVALID", "top level is not an object", file=rel)
            continue
        ctx.tokenizer[name] = doc
    config = ctx.tokenizer.get("config.json")
    if config is not None:
        config = text_view(config)
        for key in ("vocab_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
            if not _is_int(config.get(key)):
                ctx.emit("TOKENIZER_FILE_INVALID", f"config.json {key} missing or not an int",
                         file=f"{TOKENIZER_DIR}/config.json", path=key)
        ctx.config = config
    for rel, entry in ctx.files.items():
        if entry.role == "tokenizer" and rel.endswith(".gguf") and entry.size:
            ctx.check("B", "vocab_gguf_magic")
            try:
                with ctx.path(rel).open("rb") as fh:
                    magic = fh.read(4)
            except OSError as exc:
                ctx.emit("FS_UNREADABLE", f"cannot read: {exc.strerror or exc}", file=rel)
                continue
            if magic != b"GGUF":
                ctx.emit("TOKENIZER_FILE_INVALID", "vocab GGUF does not start with the GGUF magic", file=rel)


def text_view(config: dict) -> dict:
    """The text model's fields of ``config.json`` in every spelling checkpoints use (docs/architectures.md
    §Config spellings): a ``text_config`` object's keys over the root's (Qwen3-VL, Qwen3.5), and ``rope_theta``
    from ``rope_parameters`` / ``rope_scaling`` (flat or per layer type: transformers 5) when not a top key."""
    text = config.get("text_config")
    view = {**config, **text} if isinstance(text, dict) else dict(config)
    if "rope_theta" not in view:
        for key in ("rope_parameters", "rope_scaling"):
            rope = view.get(key)
            rope = rope.get("full_attention", rope) if isinstance(rope, dict) else None
            if isinstance(rope, dict) and "rope_theta" in rope:
                view["rope_theta"] = rope["rope_theta"]
                break
    return view


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def token_ids(tok: dict) -> dict[str, int]:
    """content → id from tokenizer.json's ``model.vocab`` and ``added_tokens``."""
    ids: dict[str, int] = {}
    vocab = (tok.get("model") or {}).get("vocab")
    if isinstance(vocab, dict):
        ids.update({k: v for k, v in vocab.items() if _is_int(v)})
    for a in tok.get("added_tokens") or []:
        if isinstance(a, dict) and isinstance(a.get("content"), str) and _is_int(a.get("id")):
            ids[a["content"]] = a["id"]
    return ids


def check_service(ctx: Ctx, calbin_context: int | None, logits_dim: int | None) -> dict:
    """Gate C service checks; returns the report's ``tokenizer`` section."""
    section: dict[str, Any] = {
        "sha256": {r.split("/", 1)[1]: e.sha256 for r, e in sorted(ctx.files.items()) if e.role == "tokenizer"},
    }
    config = ctx.config or {}
    tok = ctx.tokenizer.get("tokenizer.json")
    tcfg = ctx.tokenizer.get("tokenizer_config.json") or {}
    gen = ctx.tokenizer.get("generation_config.json") or {}
    vocab_size = config.get("vocab_size") if _is_int(config.get("vocab_size")) else None
    section["config_vocab_size"] = vocab_size
    if vocab_size is not None and logits_dim is not None:
        ctx.check("C", "vocab_vs_logits")
        if vocab_size != logits_dim:
            ctx.emit("XREF_VOCAB", f"config vocab_size {vocab_size} != logits last dimension {logits_dim}",
                     file=f"{TOKENIZER_DIR}/config.json", path="vocab_size")
    ids = token_ids(tok) if tok else {}
    if ids and vocab_size is not None:
        ctx.check("C", "tokenizer_ids_in_vocab")
        top = max(ids.values())
        section["tokenizer_tokens"] = len(ids)
        if top >= vocab_size:
            ctx.emit("XREF_VOCAB", f"tokenizer id {top} >= config vocab_size {vocab_size}",
                     file=f"{TOKENIZER_DIR}/tokenizer.json")
    claims = {"tokenizer_config.model_max_length": tcfg.get("model_max_length"),
              "config.max_position_embeddings": config.get("max_position_embeddings")}
    section["context_claims"] = {k: v for k, v in claims.items() if _is_int(v)}
    section["serving_context_cap"] = calbin_context
    if calbin_context is not None:
        ctx.check("C", "tokenizer_context")
        for where, value in section["context_claims"].items():
            if value > calbin_context:
                fname, key = where.split(".")
                ctx.emit("TOKENIZER_CONTEXT", f"{where} = {value} exceeds the calbin max_seq_len "
                         f"{calbin_context}; serving must cap the context at {calbin_context}",
                         file=f"{TOKENIZER_DIR}/{fname}.json", path=key)
    if ids:
        ctx.check("C", "special_tokens")
        _special_tokens(ctx, ids, tcfg, gen, config)
    return section


def _special_tokens(ctx: Ctx, ids: dict[str, int], tcfg: dict, gen: dict, config: dict) -> None:
    def content(v: object) -> str | None:
        if isinstance(v, dict):
            v = v.get("content")
        return v if isinstance(v, str) else None

    def id_set(v: object) -> set[int]:
        if _is_int(v):
            return {v}
        return {x for x in v if _is_int(x)} if isinstance(v, list) else set()

    for name in ("bos", "eos", "pad"):
        text = content(tcfg.get(f"{name}_token"))
        if text is None:
            continue
        if text not in ids:
            ctx.emit("TOKENIZER_SPECIAL_TOKENS", f"{name}_token {text!r} is not a token of tokenizer.json",
                     file=f"{TOKENIZER_DIR}/tokenizer_config.json", path=f"{name}_token")
            continue
        for fname, doc in (("generation_config.json", gen), ("config.json", config)):
            declared = id_set(doc.get(f"{name}_token_id"))
            if declared and ids[text] not in declared:
                ctx.emit("TOKENIZER_SPECIAL_TOKENS", f"{name}_token {text!r} is id {ids[text]}, but {fname} "
                         f"declares {name}_token_id {sorted(declared)}", file=f"{TOKENIZER_DIR}/{fname}",
                         path=f"{name}_token_id")
