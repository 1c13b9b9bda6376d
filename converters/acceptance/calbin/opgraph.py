"""Op I/O YAML (docs/calbin.md §6) and per-chip profparts (§7.1): parsing and graph statistics.

Op YAML: each top-level key is a unique op instance; each ``args_N``/``outs_N`` value is the 4-tuple
``[device_virtual_address, shape_tuple, PrimitiveType, producer_or_role]``. Classification (§6):
``const_N`` → constant/weight, ``input_N`` → model input, anything else → activation. The shape is a
list of ints or a tuple string like ``"(1, 64)"``. A dtype outside the table makes the entry's bytes
unknown; the caller then refuses the capacity figure (``OP_DTYPE_UNKNOWN``) instead of counting 0.

Address statistics merge ``[vaddr, vaddr + bytes)`` per category: the union is static address coverage,
not peak live memory (no live intervals are known), and repeated addresses are aliases or lifetime
reuse — reported, not judged.

Profparts: one op instance name per line (blank lines ignored).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from converters.acceptance.calbin.context import Ctx, Submodel
from converters.acceptance.calbin.dtypes import tensor_bytes
from converters.acceptance.calbin.intervals import coverage

_SLOT_RE = re.compile(r"(args|outs)_(\d+)")
_ROLE_RE = re.compile(r"(const|input)_(\d+)")
_TUPLE_RE = re.compile(r"\(\s*(\d{1,20}(?:\s*,\s*\d{1,20}){0,63})?\s*,?\s*\)")
_OP_NAME_RE = re.compile(r"[A-Za-z_][\w.\-/:]*")
_TYPE_SUFFIX_RE = re.compile(r"_\d+$")
U64 = 1 << 64


@dataclass(frozen=True)
class Entry:
    op: str
    slot: str
    vaddr: int
    shape: tuple[int, ...]
    dtype: str
    role: str
    nbytes: int | None  # None: unknown dtype

    @property
    def category(self) -> str:
        m = _ROLE_RE.fullmatch(self.role)
        return {"const": "const", "input": "input"}[m[1]] if m else "activation"

    @property
    def input_index(self) -> int | None:
        m = _ROLE_RE.fullmatch(self.role)
        return int(m[2]) if m and m[1] == "input" else None


@dataclass
class OpGraph:
    file: str
    ops: dict[str, list[Entry]] = field(default_factory=dict)
    unknown_dtypes: set[str] = field(default_factory=set)

    def histogram(self) -> dict[str, int]:
        c = Counter(_TYPE_SUFFIX_RE.sub("", name) for name in self.ops)
        return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))

    def entries(self) -> list[Entry]:
        return [e for es in self.ops.values() for e in es]


@dataclass
class Profparts:
    file: str
    chip: int
    names: list[tuple[int, str]] = field(default_factory=list)  # (line, op)


def load_ops(ctx: Ctx, sub: Submodel) -> None:
    rels = sorted(r for r, e in ctx.files.items() if e.role == "op_io_yaml" and r.startswith(sub.rel + "/"))
    if not rels or ctx.files[rels[0]].size == 0:
        return
    rel = rels[0]
    if len(rels) > 1:
        ctx.emit("OP_YAML_SCHEMA", f"{len(rels)} op I/O YAML files in one submodel; using {rel}", file=rels[1])
    ctx.check("B", "op_yaml_schema")
    doc = ctx.load_mapping(rel, "a mapping of op instances")
    if doc is None:
        return
    graph = OpGraph(rel)
    for op, slots in doc.items():
        if not isinstance(op, str) or not isinstance(slots, dict) or not slots:
            ctx.emit("OP_YAML_SCHEMA", "op entry must map a name to a non-empty mapping of args_N/outs_N",
                     file=rel, path=str(op))
            continue
        entries = []
        for slot, value in slots.items():
            entry = _entry(ctx, rel, op, slot, value)
            if entry is not None:
                entries.append(entry)
                if entry.nbytes is None:
                    graph.unknown_dtypes.add(entry.dtype)
                    ctx.emit("OP_DTYPE_UNKNOWN", f"PrimitiveType {entry.dtype!r} is not in the dtype table; "
                             "the capacity report is refused", file=rel, path=f"{op}.{slot}")
        graph.ops[op] = entries
    sub.ops = graph


def _entry(ctx: Ctx, rel: str, op: str, slot: object, value: object) -> Entry | None:
    path = f"{op}.{slot}"
    if not isinstance(slot, str) or not _SLOT_RE.fullmatch(slot):
        ctx.emit("OP_YAML_SCHEMA", f"key {slot!r} is not args_N/outs_N", file=rel, path=path)
        return None
    if not isinstance(value, list) or len(value) != 4:
        ctx.emit("OP_YAML_SCHEMA", "value must be the 4-tuple [vaddr, shape, PrimitiveType, producer_or_role]",
                 file=rel, path=path)
        return None
    vaddr, shape, dtype, role = value
    shape_t = _shape(shape)
    problems = []
    if not isinstance(vaddr, int) or isinstance(vaddr, bool) or not 0 <= vaddr < U64:
        problems.append("device_virtual_address is not an unsigned 64-bit integer")
    if shape_t is None:
        problems.append("shape_tuple is not a list or tuple of non-negative ints")
    if not isinstance(dtype, str) or not dtype:
        problems.append("PrimitiveType is not a name")
    if not isinstance(role, str) or not role:
        problems.append("producer_or_role is not a name")
    if problems:
        ctx.emit("OP_YAML_SCHEMA", "; ".join(problems), file=rel, path=path)
        return None
    nbytes = tensor_bytes(shape_t, dtype)
    if nbytes is not None and vaddr + nbytes > U64:
        ctx.emit("OP_YAML_SCHEMA", f"range of {nbytes} bytes runs past 2**64", file=rel, path=path)
        return None
    return Entry(op, slot, vaddr, shape_t, dtype, role, nbytes)


def _shape(shape: object) -> tuple[int, ...] | None:
    if isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return tuple(shape)
    if isinstance(shape, str) and (m := _TUPLE_RE.fullmatch(shape.strip())):
        return tuple(int(d) for d in m[1].split(",")) if m[1] else ()
    return None


def address_stats(graph: OpGraph) -> dict | None:
    """Per category and overall: union/total/overlap bytes of ``[vaddr, vaddr+bytes)``; None if refused."""
    if graph.unknown_dtypes:
        return None
    entries = graph.entries()
    out = {}
    for cat in ("const", "input", "activation", "all"):
        sel = [e for e in entries if cat == "all" or e.category == cat]
        cov = coverage([e.vaddr for e in sel], [e.nbytes for e in sel])
        out[cat] = {"entries": len(sel), "union_bytes": cov.union_bytes, "total_bytes": cov.total_bytes,
                    "overlap_bytes": cov.overlap_bytes, "overlapping_entries": cov.overlapping_pairs}
    return out


def load_profparts(ctx: Ctx, sub: Submodel) -> None:
    pat = re.compile(re.escape(sub.rel) + r"/[^/]+\.chip(\d+)\.profparts")
    for rel in sorted(ctx.files):
        m = pat.fullmatch(rel)
        if not m or ctx.files[rel].size == 0:
            continue
        chip = int(m[1])
        if chip in sub.profparts:
            ctx.emit("PROFPARTS_GRAMMAR", f"second profparts file for chip {chip}", file=rel)
            continue
        ctx.check("B", "profparts_grammar")
        pp = Profparts(rel, chip)
        try:
            with ctx.path(rel).open("rb") as fh:
                for number, raw in enumerate(fh, start=1):
                    text = raw.decode("utf-8", "replace").strip()
                    if not text:
                        continue
                    if len(raw) > 4096 or not _OP_NAME_RE.fullmatch(text):
                        ctx.emit("PROFPARTS_GRAMMAR", "line is not a single op instance name", file=rel,
                                 line=number)
                        continue
                    pp.names.append((number, text))
        except OSError as exc:
            ctx.emit("FS_UNREADABLE", f"cannot read: {exc.strerror or exc}", file=rel)
            continue
        sub.profparts[chip] = pp
