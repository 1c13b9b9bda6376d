"""Gate D, capacity (docs/calbin.md §4.2, §4.3 rules 5–6, §6, §9 Gate D): parameter bytes by chip, the
DRAM/SRAM/sync reservations, the KV formula, the op address union, and the overlap/alias report.

KV-cache bytes (§9, BF16 as in docs/calbin.md §9 Gate D; batch added as a factor for ``--batch``)::

    bytes = batch * layers * kv_heads * 2 (K, V) * head_dim * context * dtype_bytes
    per chip = bytes / chips when kv_heads divide evenly over the chips (tensor-parallel KV heads)

Reservations carry no chip mask; reading them as per chip is a structural inference (C3, §4.2), and
``device_memory_required`` is never used for a capacity decision (§4.1): both are reported as such.
"""

from __future__ import annotations

from converters.acceptance.calbin.context import Ctx
from converters.acceptance.calbin.intervals import coverage, uncovered
from converters.acceptance.calbin.inventory import RUNTIME_META
from converters.acceptance.calbin.opgraph import address_stats

KV_DTYPE, KV_DTYPE_BYTES = "bfloat16", 2
#: device_memory_required is plausible in its unit when within [1, 8] x the per-chip DRAM reservation.
MEMORY_PLAUSIBLE_FACTOR = 8


def parameters(ctx: Ctx, mappings: list) -> dict:
    """Parameter bytes by chip (union of mapped file ranges per chip) and per-file coverage (§4.3 rule 6)."""
    ctx.check("D", "parameter_bytes_by_chip")
    by_chip: dict[str, int] = {}
    by_file: dict[str, dict] = {}
    chips = sorted({bit for m, _ in mappings for bit in range(m.mask.bit_length()) if m.mask >> bit & 1})
    for chip in chips:
        total = 0
        for target in sorted({t for _, t in mappings}):
            sel = [m for m, t in mappings if t == target and m.mask >> chip & 1]
            total += coverage([m.offset for m in sel], [m.size for m in sel]).union_bytes
        by_chip[f"chip{chip}"] = total
    for target in sorted({t for _, t in mappings}):
        sel = [m for m, t in mappings if t == target]
        cov = coverage([m.offset for m in sel], [m.size for m in sel])
        fsize = ctx.files[target].size
        gaps = uncovered(fsize, cov.merged)
        by_file[target] = {"file_bytes": fsize, "mapped_bytes": cov.union_bytes,
                           "uncovered_bytes": sum(b - a for a, b in gaps), "duplicate_bytes": cov.overlap_bytes}
        if gaps or cov.overlap_bytes:
            ctx.emit("PARAM_MAP_COVERAGE", f"{target}: {by_file[target]['uncovered_bytes']} bytes in "
                     f"{len(gaps)} range(s) not mapped, {cov.overlap_bytes} bytes mapped more than once",
                     file=RUNTIME_META, detail={"uncovered_ranges": gaps[:16]})
    files_total = sum(e.size for e in ctx.files.values() if e.role == "param_block")
    return {"by_chip": by_chip, "by_file": by_file, "total_file_bytes": files_total}


def reservations(ctx: Ctx, mappings: list) -> dict:
    """DRAM/SRAM/sync reservation totals; mapping placement and per-chip/domain vaddr overlaps (rule 5)."""
    if ctx.runtime is None:
        return {}
    ctx.check("D", "reservations")
    out: dict = {"scope": "per chip (inferred from identical virtual addresses under different chip masks; C3)"}
    for domain in ("dram", "sram", "sync"):
        rs = [r for r in ctx.runtime.reservations if r.domain == domain]
        out[domain] = {"bytes": sum(r.size for r in rs), "lines": len(rs), "vaddr": [[r.vaddr, r.size] for r in rs]}
    ranges = [(r.domain, r.vaddr, r.vaddr + r.size) for r in ctx.runtime.reservations if r.domain != "sync"]
    placed: dict[tuple[int, str], list] = {}
    for m, _target in mappings:
        dom = next((d for d, a, b in ranges if a <= m.vaddr and m.vaddr + m.size <= b), None)
        if dom is None:
            ctx.emit("PARAM_MAP_OUTSIDE_RESERVATION", f"{m.file} mapping of {m.size} bytes lies in no dram/sram "
                     "reservation", file=RUNTIME_META, line=m.line, detail={"vaddr": m.vaddr})
            dom = "unreserved"
        for chip in range(m.mask.bit_length()):
            if m.mask >> chip & 1:
                placed.setdefault((chip, dom), []).append(m)
    ctx.check("D", "parameter_overlap_report")
    overlaps = {}
    for (chip, dom), ms in sorted(placed.items()):
        cov = coverage([m.vaddr for m in ms], [m.size for m in ms])
        if cov.overlapping_pairs:
            overlaps[f"chip{chip}.{dom}"] = {"mappings": cov.overlapping_pairs, "bytes": cov.overlap_bytes}
            ctx.emit("CAP_VADDR_OVERLAP", f"chip {chip} {dom}: {cov.overlapping_pairs} parameter mapping(s) "
                     f"overlap earlier ones by {cov.overlap_bytes} bytes; allowed only where the compiler declares "
                     "alias/lifetime reuse", file=RUNTIME_META)
    out["parameter_overlaps"] = overlaps
    return out


def device_memory(ctx: Ctx, dram_bytes: int | None) -> dict | None:
    """device_memory_required: reported with its unit, judged for plausibility only (§4.1, §10)."""
    q = ctx.runtime.typed.get("device_memory_required") if ctx.runtime else None
    if q is None:
        return None
    ctx.check("D", "device_memory_required_unit")
    value, unit, per_unit = q
    declared = value * per_unit
    plausible = None
    if dram_bytes:
        plausible = dram_bytes <= declared <= MEMORY_PLAUSIBLE_FACTOR * dram_bytes
        if not plausible:
            ctx.emit("META_MEMORY_UNIT", f"device_memory_required {value} {unit} = {declared:,} bytes is "
                     f"{declared / dram_bytes:.3g}x the per-chip DRAM reservation ({dram_bytes:,} bytes); the unit "
                     "is implausible and the field is not used for capacity", file=RUNTIME_META,
                     line=ctx.runtime.values("device_memory_required")[0].line)
    return {"value": value, "unit": unit, "bytes_if_unit_taken_literally": declared, "plausible": plausible,
            "used_for_capacity": False}


def kv_cache(ctx: Ctx, figures: dict, calbin_batch: int | None, calbin_context: int | None) -> dict | None:
    """The KV formula for the calbin (or requested) context and batch; refusals for over-large requests."""
    layers, kv_heads, head_dim = figures.get("layers"), figures.get("kv_heads"), figures.get("head_dim")
    context = ctx.context if ctx.context is not None else calbin_context
    batch = ctx.batch if ctx.batch is not None else calbin_batch
    ctx.check("D", "kv_formula")
    if ctx.context is not None and calbin_context is not None and ctx.context > calbin_context:
        ctx.emit("CAP_CONTEXT_EXCEEDED", f"requested context {ctx.context} > calbin max_seq_len {calbin_context}")
    if ctx.batch is not None and calbin_batch is not None and ctx.batch > calbin_batch:
        ctx.emit("CAP_BATCH_EXCEEDED", f"requested batch {ctx.batch} > calbin n_batch {calbin_batch}")
    if None in (layers, kv_heads, head_dim, context, batch):
        return None
    total = batch * layers * kv_heads * 2 * head_dim * context * KV_DTYPE_BYTES
    per_chip = None
    if ctx.chips:
        if kv_heads % ctx.chips == 0:
            per_chip = total // ctx.chips
        else:
            ctx.emit("CAP_KV_PER_CHIP_UNKNOWN", f"{kv_heads} KV heads do not divide over {ctx.chips} chips")
    return {
        "formula": "batch * layers * kv_heads * 2 * head_dim * context * dtype_bytes",
        "batch": batch, "layers": layers, "kv_heads": kv_heads, "head_dim": head_dim, "context": context,
        "dtype": KV_DTYPE, "dtype_bytes": KV_DTYPE_BYTES, "bytes_total": total, "bytes_per_chip": per_chip,
        "kv_heads_per_chip": kv_heads // ctx.chips if per_chip is not None else None,
    }


def address_union(ctx: Ctx) -> dict:
    """Per submodel: op address coverage by category and the alias report (§6); refused on unknown dtypes."""
    ctx.check("D", "address_union")
    out = {}
    for s in ctx.submodels:
        if s.ops is None:
            continue
        stats = address_stats(s.ops)
        out[s.kind or s.name] = stats if stats is not None else {"refused": True,
                                                                  "unknown_dtypes": sorted(s.ops.unknown_dtypes)}
        if stats and stats["all"]["overlapping_entries"]:
            ctx.emit("CAP_VADDR_OVERLAP", f"{stats['all']['overlapping_entries']} op I/O entries reuse addresses "
                     f"({stats['all']['overlap_bytes']} bytes claimed twice): inplace/alias/lifetime reuse, so the "
                     "union is address coverage, not peak live memory", file=s.ops.file)
    return out


def io_buffers(ctx: Ctx) -> dict:
    """Per submodel: ibuf/obuf bytes of one copy (ping and pong each hold one)."""
    out = {}
    for s in ctx.submodels:
        if s.meta is not None:
            ctx.check("D", "io_buffer_bytes")
            out[s.kind or s.name] = {
                "ibuf_bytes": sum(b.size for b in s.meta.buffers if b.direction == "ibuf"),
                "obuf_bytes": sum(b.size for b in s.meta.buffers if b.direction == "obuf"),
                "copies": 2,
            }
    return out


def c3_fields(ctx: Ctx) -> None:
    """One INFO listing the vendor-confirmable fields read but not used for decisions (§1, §4.1, §4.2, §5.1)."""
    names = []
    if ctx.runtime is not None and ctx.runtime.reservations:
        names.append("reservation scope (per chip is inferred)")
    if ctx.runtime is not None and "device_memory_required" in ctx.runtime.typed:
        names.append("device_memory_required unit")
    if any(s.meta is not None and "workload" in s.meta.typed for s in ctx.submodels):
        names.append("submodel workload meaning/unit")
    if names:
        ctx.emit("FIELD_C3_UNCONFIRMED", "vendor must confirm: " + "; ".join(names))
