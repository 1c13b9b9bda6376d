"""Gate B for the ``.txt`` metadata: grammar, required fields and their typed values (docs/calbin.md §4–§5).

Parsing is :mod:`converters.acceptance.calbin.grammar` (one parser per line form); this module turns its records
into findings and a ``typed`` dict of checked values that the later gates read:

- runtime (§4.1): ``calcc_ver`` (non-empty), ``devices`` (``deviceN: [..]`` lists), ``device_memory_required``
  (``(value, unit, bytes_per_unit)``), ``model_arch``, ``model_type`` (must be ``llm``), ``n_batch``,
  ``max_seq_len``; at least one ``dram_rsvd`` and one parameter mapping.
- submodel (§5.1): ``model_arch``, ``smodel_type``, ``n_batch``, ``calc_mchip``, ``calc_utype`` (list),
  ``workload`` (quantity), ``ccu_stack_config``; at least one ``ibuf`` and one ``obuf``.
"""

from __future__ import annotations

import re

from converters.acceptance.calbin.context import Ctx, Submodel
from converters.acceptance.calbin.grammar import (
    RUNTIME_FORMS,
    SUBMODEL_FORMS,
    Metadata,
    parse_int,
    parse_list,
    parse_metadata,
    parse_quantity,
)
from converters.acceptance.calbin.inventory import RUNTIME_META, SUBMODEL_META

_DEVICE_RE = re.compile(r"device\d+")

# key -> (kind, required): kind "text" | "int" | "list" | "quantity"
RUNTIME_FIELDS = {
    "calcc_ver": "text", "device_memory_required": "quantity", "model_arch": "text", "model_type": "text",
    "n_batch": "int", "max_seq_len": "int",
}
SUBMODEL_FIELDS = {
    "model_arch": "text", "smodel_type": "text", "n_batch": "int", "calc_mchip": "text", "calc_utype": "list",
    "workload": "quantity", "ccu_stack_config": "text",
}
_PARSERS = {"text": lambda v: v, "int": parse_int, "list": parse_list, "quantity": parse_quantity}


def load_runtime(ctx: Ctx) -> None:
    if RUNTIME_META not in ctx.files or ctx.files[RUNTIME_META].size == 0:
        return
    meta = _parse(ctx, RUNTIME_META, RUNTIME_FORMS)
    if meta is None:
        return
    ctx.check("B", "runtime_metadata_grammar")
    _typed_fields(ctx, meta, RUNTIME_FIELDS)
    devices = {}
    for f in meta.fields:
        if _DEVICE_RE.fullmatch(f.key):
            names = parse_list(f.value)
            if names is None or not names:
                ctx.emit("META_GRAMMAR", f"{f.key} must be a non-empty [name, ...] list", file=meta.file,
                         line=f.line)
            else:
                devices[f.key] = names
    if not devices:
        ctx.emit("META_REQUIRED", "no deviceN: [..] compatible-chip line", file=meta.file)
    meta.typed["devices"] = devices
    model_type = meta.typed.get("model_type")
    if model_type is not None and model_type != "llm":
        ctx.emit("META_MODEL_TYPE", f"model_type is {model_type!r}; the top level must be 'llm'",
                 file=meta.file, line=meta.values("model_type")[0].line)
    if not any(r.domain == "dram" for r in meta.reservations):
        ctx.emit("META_REQUIRED", "no dram_rsvd reservation line", file=meta.file)
    if not meta.mappings:
        ctx.emit("META_REQUIRED", "no parameter mapping line (<file> offset .. vaddr .. size .. chip ..)",
                 file=meta.file)
    ctx.runtime = meta


def load_submodel(ctx: Ctx, sub: Submodel) -> None:
    rel = f"{sub.rel}/{SUBMODEL_META}"
    if rel not in ctx.files or ctx.files[rel].size == 0:
        return
    meta = _parse(ctx, rel, SUBMODEL_FORMS)
    if meta is None:
        return
    ctx.check("B", "submodel_metadata_grammar")
    _typed_fields(ctx, meta, SUBMODEL_FIELDS)
    for direction in ("ibuf", "obuf"):
        if not any(b.direction == direction for b in meta.buffers):
            ctx.emit("META_REQUIRED", f"no {direction} line", file=rel)
    seen: dict[str, int] = {}
    for b in meta.buffers:
        if b.name in seen:
            ctx.emit("META_REQUIRED", f"buffer {b.name} declared twice (first on line {seen[b.name]})",
                     file=rel, line=b.line)
        seen.setdefault(b.name, b.line)
    sub.meta = meta


def _parse(ctx: Ctx, rel: str, forms) -> Metadata | None:
    try:
        meta = parse_metadata(ctx.path(rel), rel, forms)
    except OSError as exc:
        ctx.emit("FS_UNREADABLE", f"cannot read: {exc.strerror or exc}", file=rel)
        return None
    for issue in meta.issues:
        ctx.emit("META_GRAMMAR", issue.message, file=rel, line=issue.line)
    return meta


def _typed_fields(ctx: Ctx, meta: Metadata, spec: dict[str, str]) -> None:
    """Each dictionary field exactly once with a value of its kind; unknown keys are reported."""
    for f in meta.fields:
        if not f.known and not _DEVICE_RE.fullmatch(f.key):
            ctx.emit("META_UNKNOWN_FIELD", f"field {f.key!r} is not in the field dictionary", file=meta.file,
                     line=f.line)
    for key, kind in spec.items():
        lines = meta.values(key)
        if not lines:
            ctx.emit("META_REQUIRED", f"required field {key} is missing", file=meta.file)
            continue
        if len(lines) > 1:
            ctx.emit("META_REQUIRED", f"field {key} appears {len(lines)} times (lines "
                     f"{', '.join(str(x.line) for x in lines)})", file=meta.file, line=lines[1].line)
            continue
        value = _PARSERS[kind](lines[0].value)
        if value is None:
            expected = {"int": "a decimal integer", "list": "a [a,b,...] list",
                        "quantity": "'N UNIT' with a byte unit (B, Byte, KB, MB, GB, ...)"}[kind]
            ctx.emit("META_GRAMMAR", f"{key} value must be {expected}", file=meta.file, line=lines[0].line)
            continue
        meta.typed[key] = value
