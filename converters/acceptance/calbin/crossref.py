"""Gate C, identity cross-references (docs/calbin.md §3, §4.1, §5.1, §5.3, §9 Gate C, §10):
submodel roles, model name / batch / context / heads / KV layers, and the I/O buffer contract.

Declared files, chip masks, ping/pong and the parameter map are in :mod:`declarations`. Every check
compares values that both sides actually declare; a side whose parse failed was already reported, and
the comparison is skipped rather than guessed.
"""

from __future__ import annotations

import math
import re

from converters.acceptance.calbin.context import Ctx, Submodel
from converters.acceptance.calbin.dtypes import tensor_bytes
from converters.acceptance.calbin.inventory import RUNTIME_META, SUBMODEL_META

_PAST_RE = re.compile(r"past_(key|value)_(\d+)")


def _info(sub: Submodel, block: str, key: str):
    return ((sub.cfg or {}).get(block) or {}).get(key)


def _meta_line(sub: Submodel, key: str) -> int | None:
    lines = sub.meta.values(key) if sub.meta else []
    return lines[0].line if lines else None


def match_submodels(ctx: Ctx) -> None:
    """one_model_cfg keys name the submodel directories one to one (``XREF_SUBMODEL``)."""
    cfgs = (ctx.manifest or {}).get("one_model_cfg")
    if not isinstance(cfgs, dict):
        return
    ctx.check("C", "submodel_directories")
    by_name = {s.name: s for s in ctx.submodels}
    for name, cfg in cfgs.items():
        if name in by_name:
            by_name[name].cfg = cfg
        else:
            ctx.emit("XREF_SUBMODEL", f"one_model_cfg names submodel {name!r} but there is no such directory",
                     file=ctx.manifest_rel, path=f"one_model_cfg.{name}")
    for s in ctx.submodels:
        if s.name not in cfgs:
            ctx.emit("XREF_SUBMODEL", f"submodel directory {s.name!r} has no one_model_cfg entry",
                     file=f"{s.rel}/{SUBMODEL_META}")


def roles(ctx: Ctx) -> None:
    """Exactly one prefill and one decode; directory name, is_prefill and smodel_type agree (§5.1, §10)."""
    ctx.check("B", "submodel_roles")
    kinds = [s.kind for s in ctx.submodels]
    if kinds.count("prefill") != 1 or kinds.count("decode") != 1:
        listing = ", ".join(f"{s.name}={s.kind}" for s in ctx.submodels) or "none"
        ctx.emit("SUBMODEL_ROLES", f"need exactly one prefill and one decode submodel; found {listing}")
    for s in ctx.submodels:
        is_prefill = _info(s, "model_info", "is_prefill")
        if s.dir_role and isinstance(is_prefill, bool) and (s.dir_role == "prefill") != is_prefill:
            ctx.emit("SUBMODEL_ROLES", f"directory says {s.dir_role} but model_info.is_prefill is "
                     f"{str(is_prefill).lower()}", file=ctx.manifest_rel,
                     path=f"one_model_cfg.{s.name}.model_info.is_prefill")
        smodel = s.meta.typed.get("smodel_type") if s.meta else None
        if smodel is None or s.kind is None:
            continue
        rel, line = f"{s.rel}/{SUBMODEL_META}", _meta_line(s, "smodel_type")
        if s.kind == "prefill" and smodel == "llm_decode":
            ctx.emit("META_SMODEL_TYPE", "prefill submodel declares smodel_type llm_decode (known vendor defect; "
                     "isolated testing may continue, the vendor must fix it)", file=rel, line=line)
        elif smodel != f"llm_{s.kind}":
            ctx.emit("SUBMODEL_ROLES", f"{s.kind} submodel declares smodel_type {smodel!r}", file=rel, line=line)


def model_name(ctx: Ctx) -> None:
    """model_name == manifest file stem == every model_arch (§3.4, §4.1, §5.1); directory name advisory."""
    name = ctx.model_name
    if name is None:
        return
    ctx.check("C", "model_name")
    if ctx.manifest_rel and ctx.manifest_rel.rsplit(".", 1)[0] != name:
        ctx.emit("XREF_MODEL_NAME", f"manifest file is {ctx.manifest_rel} but model_name is {name!r}",
                 file=ctx.manifest_rel, path="model_name")
    metas = [(ctx.runtime, RUNTIME_META)] + [(s.meta, f"{s.rel}/{SUBMODEL_META}") for s in ctx.submodels]
    for meta, rel in metas:
        arch = meta.typed.get("model_arch") if meta else None
        if arch is not None and arch != name:
            ctx.emit("XREF_MODEL_NAME", f"model_arch {arch!r} != manifest model_name {name!r}", file=rel,
                     line=meta.values("model_arch")[0].line)
    if ctx.root.resolve().name != name:
        ctx.emit("PACKAGE_DIR_NAME", f"package directory is named {ctx.root.resolve().name!r}, model_name is "
                 f"{name!r}; serving must take the alias from the manifest, not the directory")


def package_context(ctx: Ctx) -> int | None:
    """The package's context length: the runtime's ``max_seq_len``, else the manifest's ``seq_len`` (§3.1)."""
    max_seq = (ctx.runtime.typed if ctx.runtime else {}).get("max_seq_len")
    return max_seq if max_seq is not None else (ctx.manifest or {}).get("seq_len")


def batch_and_context(ctx: Ctx) -> tuple[int | None, int | None]:
    """Batch and max context agree everywhere (§3.1, §3.2, §4.1, §5.1); returns the calbin (batch, context)."""
    ctx.check("C", "batch")
    ctx.check("C", "context")
    rt = ctx.runtime.typed if ctx.runtime else {}
    n_batch, max_seq = rt.get("n_batch"), rt.get("max_seq_len")
    seq_len = (ctx.manifest or {}).get("seq_len")
    if max_seq is not None and seq_len is not None and max_seq != seq_len:
        ctx.emit("XREF_CONTEXT", f"runtime max_seq_len {max_seq} != manifest seq_len {seq_len}",
                 file=RUNTIME_META, line=ctx.runtime.values("max_seq_len")[0].line)
    context = package_context(ctx)
    for s in ctx.submodels:
        where = f"one_model_cfg.{s.name}"
        mb, ms = _info(s, "model_info", "batch_num"), _info(s, "model_info", "max_seq_len")
        sub_batch = s.meta.typed.get("n_batch") if s.meta else None
        if mb is not None and n_batch is not None and mb != n_batch:
            ctx.emit("XREF_BATCH", f"model_info.batch_num {mb} != runtime n_batch {n_batch}",
                     file=ctx.manifest_rel, path=f"{where}.model_info.batch_num")
        if sub_batch is not None and n_batch is not None and sub_batch != n_batch:
            ctx.emit("XREF_BATCH", f"submodel n_batch {sub_batch} != runtime n_batch {n_batch}",
                     file=f"{s.rel}/{SUBMODEL_META}", line=_meta_line(s, "n_batch"))
        if ms is not None and context is not None and ms != context:
            ctx.emit("XREF_CONTEXT", f"model_info.max_seq_len {ms} != calbin context {context}",
                     file=ctx.manifest_rel, path=f"{where}.model_info.max_seq_len")
        shapes = (s.cfg or {}).get("input_shape")
        if not isinstance(shapes, dict):
            continue  # no manifest entry, or its input_shape was already reported
        batch = n_batch if n_batch is not None else mb
        for key, shape in shapes.items():
            if shape and batch is not None and shape[0] != batch:
                ctx.emit("XREF_BATCH", f"input {key} batch dimension {shape[0]} != batch {batch}",
                         file=ctx.manifest_rel, path=f"{where}.input_shape.{key}")
        _token_lengths(ctx, s, shapes, context, where)
    return (n_batch if n_batch is not None else None), context


def _token_lengths(ctx: Ctx, s: Submodel, shapes: dict, context: int | None, where: str) -> None:
    ids, pos = shapes.get("input_ids"), shapes.get("position_ids")
    if ids is None:
        ctx.emit("MANIFEST_SCHEMA", "input_shape has no input_ids", file=ctx.manifest_rel, path=f"{where}.input_shape")
        return
    if pos is not None and pos != ids:
        ctx.emit("XREF_CONTEXT", f"position_ids shape {pos} != input_ids shape {ids}", file=ctx.manifest_rel,
                 path=f"{where}.input_shape.position_ids")
    if context is None or s.kind is None or len(ids) != 2:
        return
    want_tokens, want_past = (context, 0) if s.kind == "prefill" else (1, context - 1)
    if ids[1] != want_tokens:
        ctx.emit("XREF_CONTEXT", f"{s.kind} input_ids length {ids[1]} != {want_tokens} for context {context}",
                 file=ctx.manifest_rel, path=f"{where}.input_shape.input_ids")
    for key, shape in shapes.items():
        if _PAST_RE.fullmatch(key) and len(shape) == 4 and shape[2] != want_past:
            ctx.emit("XREF_CONTEXT", f"{s.kind} {key} past length {shape[2]} != {want_past} (context {context})",
                     file=ctx.manifest_rel, path=f"{where}.input_shape.{key}")


def heads_and_layers(ctx: Ctx) -> dict:
    """past_key/past_value pairing, layer count, heads, head_dim, RoPE theta, decoder-only (§3.1, §3.2).

    Returns the model figures (layers, q_heads, kv_heads, head_dim) the capacity gate uses.
    """
    ctx.check("C", "kv_pairing")
    ctx.check("C", "heads_layers")
    config = ctx.config or {}
    figures: dict = {}
    for s in ctx.submodels:
        where = f"one_model_cfg.{s.name}"
        shapes = (s.cfg or {}).get("input_shape")
        if not isinstance(shapes, dict):
            continue  # no manifest entry, or its input_shape was already reported
        idx = {"key": set(), "value": set()}
        for key in shapes:
            if m := _PAST_RE.fullmatch(key):
                idx[m[1]].add(int(m[2]))
        n = len(idx["key"])
        if idx["key"] != idx["value"] or idx["key"] != set(range(n)):
            only_k = sorted(idx["key"] - idx["value"])[:8]
            only_v = sorted(idx["value"] - idx["key"])[:8]
            gaps = sorted(set(range(max(idx["key"] | idx["value"] | {-1}) + 1)) - idx["key"])[:8]
            ctx.emit("XREF_KV_PAIRING", f"past_key indices without past_value {only_k}, past_value without "
                     f"past_key {only_v}, missing key indices {gaps}", file=ctx.manifest_rel,
                     path=f"{where}.input_shape")
        layers = config.get("num_hidden_layers")
        if isinstance(layers, int) and n != layers:
            ctx.emit("XREF_LAYERS", f"{n} past_key inputs but config num_hidden_layers is {layers}",
                     file=ctx.manifest_rel, path=f"{where}.input_shape")
        figures.setdefault("layers", n)
        info = (s.cfg or {}).get("model_info") or {}
        _heads(ctx, s, info, shapes, config, where, figures)
        theta, rope = info.get("theta_base"), config.get("rope_theta")
        if isinstance(rope, (int, float)) and theta is not None and not math.isclose(theta, rope, rel_tol=1e-9):
            ctx.emit("XREF_ROPE_THETA", f"theta_base {theta} != config rope_theta {rope}", file=ctx.manifest_rel,
                     path=f"{where}.model_info.theta_base")
        for flag in ("is_encoder", "alibi"):
            if info.get(flag) is True:
                ctx.emit("XREF_ARCH", f"{flag} is true for a decoder-only RoPE model", file=ctx.manifest_rel,
                         path=f"{where}.model_info.{flag}")
    return figures


def _heads(ctx, s, info, shapes, config, where, figures) -> None:
    q, k, v = info.get("q0_head_num"), info.get("k0_head_num"), info.get("v_head_num")
    dims = {key: info.get(key) for key in ("q0_head_dim", "k0_head_dim", "v_head_dim")}
    cfg_q, cfg_kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
    cfg_hd = config.get("head_dim")
    if not isinstance(cfg_hd, int) and isinstance(config.get("hidden_size"), int) and isinstance(cfg_q, int) and cfg_q:
        cfg_hd = config["hidden_size"] // cfg_q
    checks = [("q0_head_num", q, cfg_q, "num_attention_heads"), ("k0_head_num", k, cfg_kv, "num_key_value_heads"),
              ("v_head_num", v, cfg_kv, "num_key_value_heads")]
    checks += [(key, val, cfg_hd, "head_dim") for key, val in dims.items()]
    for key, mine, theirs, cfg_key in checks:
        if mine is not None and isinstance(theirs, int) and mine != theirs:
            ctx.emit("XREF_HEADS", f"model_info.{key} {mine} != config {cfg_key} {theirs}", file=ctx.manifest_rel,
                     path=f"{where}.model_info.{key}")
    for key, shape in shapes.items():
        if not _PAST_RE.fullmatch(key):
            continue
        if len(shape) != 4:
            ctx.emit("XREF_HEADS", f"{key} shape {shape} is not [batch, kv_heads, past, head_dim]",
                     file=ctx.manifest_rel, path=f"{where}.input_shape.{key}")
            continue
        if k is not None and shape[1] != k or dims["k0_head_dim"] is not None and shape[3] != dims["k0_head_dim"]:
            ctx.emit("XREF_HEADS", f"{key} shape {shape} disagrees with k0_head_num {k} / k0_head_dim "
                     f"{dims['k0_head_dim']}", file=ctx.manifest_rel, path=f"{where}.input_shape.{key}")
    for name, val in (("q_heads", q), ("kv_heads", k), ("head_dim", dims["k0_head_dim"])):
        if val is None:
            continue
        if name in figures and figures[name] != val:
            ctx.emit("XREF_HEADS", f"{name} {val} here but {figures[name]} in another submodel",
                     file=ctx.manifest_rel, path=f"{where}.model_info")
        figures.setdefault(name, val)


def io_buffers(ctx: Ctx, batch: int | None) -> int | None:
    """ibuf/obuf contract (§5.3): size formula, known dtype, ping != pong, shapes match the manifest.

    Returns the logits last dimension (from the ``logits`` obuf, else the first obuf) for the vocab check.
    """
    ctx.check("C", "io_size_formula")
    ctx.check("C", "io_shapes")
    logits_dim = None
    for s in ctx.submodels:
        if s.meta is None:
            continue
        rel = f"{s.rel}/{SUBMODEL_META}"
        shapes = (s.cfg or {}).get("input_shape")
        for b in s.meta.buffers:
            expected = tensor_bytes(b.shape, b.dtype)
            if expected is None:
                ctx.emit("IO_DTYPE_UNKNOWN", f"{b.direction} {b.name} dtype {b.dtype!r} is not in the dtype table",
                         file=rel, line=b.line)
            elif expected != b.size:
                ctx.emit("IO_SIZE_MISMATCH", f"{b.direction} {b.name}: product{list(b.shape)} x {b.dtype} = "
                         f"{expected} bytes, line says size {b.size}", file=rel, line=b.line)
            if b.vaddr_ping == b.vaddr_pong:
                ctx.emit("IO_PINGPONG_SAME_VADDR", f"{b.direction} {b.name} uses one address for ping and pong",
                         file=rel, line=b.line, detail={"vaddr": b.vaddr_ping})
            if b.direction == "ibuf" and isinstance(shapes, dict):
                want = shapes.get(b.name)
                if want is None:
                    ctx.emit("XREF_IO_SHAPE", f"ibuf {b.name} is not an input of one_model_cfg.{s.name}",
                             file=rel, line=b.line)
                elif list(b.shape) != want:
                    ctx.emit("XREF_IO_SHAPE", f"ibuf {b.name} shape {list(b.shape)} != manifest input shape {want}",
                             file=rel, line=b.line)
            if b.shape and batch is not None and b.shape[0] != batch:
                ctx.emit("XREF_BATCH", f"{b.direction} {b.name} batch dimension {b.shape[0]} != batch {batch}",
                         file=rel, line=b.line)
        if isinstance(shapes, dict):
            ibufs = {b.name for b in s.meta.buffers if b.direction == "ibuf"}
            for key in ("input_ids", "position_ids"):
                if key in shapes and key not in ibufs:
                    ctx.emit("XREF_IO_SHAPE", f"manifest input {key} has no ibuf line", file=rel)
        obufs = [b for b in s.meta.buffers if b.direction == "obuf"]
        logits = next((b for b in obufs if b.name == "logits"), obufs[0] if obufs else None)
        if logits is not None and logits.shape:
            if logits_dim is not None and logits.shape[-1] != logits_dim:
                ctx.emit("XREF_VOCAB", f"logits last dimension {logits.shape[-1]} here, {logits_dim} in the "
                         "other submodel", file=rel, line=logits.line)
            logits_dim = logits_dim if logits_dim is not None else logits.shape[-1]
    return logits_dim
