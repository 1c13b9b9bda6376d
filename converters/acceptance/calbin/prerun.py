"""Gate F, pre-run checks that need no device (docs/calbin.md §5.2, §9 Gate F).

Every CCU program and helper SO must have an ELF header ``readelf -h`` accepts; helper SOs must be
``ET_DYN`` with a readable dynamic section (their ``DT_NEEDED`` are reported, as ``readelf -d`` would);
the ISA comes from ``e_machine``, and a file name naming another ISA is flagged. The runner step itself
(``CreateCalbin -> enumerate -> configure -> golden``) cannot run here: an INFO says it is still required
and must carry this report's findings.
"""

from __future__ import annotations

from converters.acceptance.calbin.context import Ctx, Submodel
from converters.acceptance.calbin.elf import ElfError, read_header, read_needed

#: File-name ISA hints and the e_machine values they allow.
_NAME_ISA = (("riscv", {243}), ("x86_64", {62}), ("amd64", {62}), ("aarch64", {183}), ("arm64", {183}),
             ("x86", {3, 62}))


def binaries(ctx: Ctx, sub: Submodel) -> list[dict]:
    """Check the ELF files of one submodel; returns their header summary for the report."""
    out = []
    for rel, entry in sorted(ctx.files.items()):
        if not rel.startswith(sub.rel + "/") or entry.role not in ("ccu_elf", "helper_so") or entry.size == 0:
            continue
        ctx.check("F", "elf_headers")
        try:
            hdr = read_header(ctx.path(rel), rel)
        except (ElfError, OSError) as exc:
            ctx.emit("ELF_HEADER_INVALID", getattr(exc, "message", str(exc)), file=rel)
            continue
        item = {"file": rel, "role": entry.role, "class": f"ELF{hdr.bits}", "type": hdr.type_name,
                "machine": hdr.machine_name}
        if entry.role == "helper_so":
            ctx.check("F", "so_dynamic_dependencies")
            if hdr.type_name != "DYN":
                ctx.emit("ELF_HEADER_INVALID", f"helper SO has e_type {hdr.type_name}, not DYN", file=rel)
            else:
                try:
                    item["needed"] = read_needed(ctx.path(rel), rel, hdr)
                except (ElfError, OSError) as exc:
                    ctx.emit("ELF_DYNAMIC_INVALID", getattr(exc, "message", str(exc)), file=rel)
            name = rel.rsplit("/", 1)[-1].lower()
            for hint, machines in _NAME_ISA:
                if hint in name:
                    if hdr.e_machine not in machines:
                        ctx.emit("ELF_MACHINE_NAME_CONFLICT", f"file name says {hint} but e_machine is "
                                 f"{hdr.machine_name}", file=rel)
                    break
        out.append(item)
    return out


def runtime_required(ctx: Ctx) -> None:
    ctx.check("F", "runtime_runner_handoff")
    ctx.emit("RUNTIME_RUN_REQUIRED", "static acceptance proves structure only; run CreateCalbin -> enumerate -> "
             "configure -> prefill/decode golden in the independent runner and carry every finding here into its "
             "report")
