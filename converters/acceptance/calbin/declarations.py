"""Gate C, declarations (docs/calbin.md §4.3, §5.2, §7.1, §9 Gate C): every file a metadata line declares
exists inside the package, chip masks are valid and match the file names, each submodel has its ping
and pong commands, the parameter map stays inside its files, profparts name graph ops, and the graph's
model inputs are the manifest's.

File-name conventions read (§5.2): ``ccu<core>_chip<chip>.elf``, ``<cpu|pld>_chip<chip>_<ping|pong>.bin``
(text rendering ``.txt`` beside it), helper ``*.so`` on any non-empty subset of chips.
"""

from __future__ import annotations

import os
import re

from converters.acceptance.calbin.context import Ctx, Submodel
from converters.acceptance.calbin.crossref import package_context
from converters.acceptance.calbin.inventory import RUNTIME_META, SUBMODEL_META, safe_relpath

NAME_MAX = 255  # bytes in one file-name component on the file systems packages live on (Linux NAME_MAX)
_PAST_RE = re.compile(r"past_(key|value)_\d+\Z")
_CCU_RE = re.compile(r"ccu(\d+)_chip(\d+)\.elf")
_CMD_RE = re.compile(r"(cpu|pld)_chip(\d+)_(ping|pong)\.bin")


def chip_counts(ctx: Ctx) -> None:
    """device_cfg.chip_nums / calcore_num agree across submodels; sets ``ctx.chips``."""
    ctx.check("C", "chip_count")
    seen: dict[str, tuple[int, str]] = {}
    for s in ctx.submodels:
        device = (s.cfg or {}).get("device_cfg") or {}
        for key in ("chip_nums", "calcore_num"):
            if key not in device:
                continue
            if key in seen and seen[key][0] != device[key]:
                ctx.emit("XREF_CHIPS", f"{key} {device[key]} here, {seen[key][0]} in {seen[key][1]}",
                         file=ctx.manifest_rel, path=f"one_model_cfg.{s.name}.device_cfg.{key}")
            seen.setdefault(key, (device[key], s.name))
    if "chip_nums" in seen:
        ctx.chips = seen["chip_nums"][0]


def _mask_ok(ctx: Ctx, mask: int, rel: str, line: int, what: str, exact_chip: int | None = None) -> bool:
    problems = []
    if mask == 0:
        problems.append("chip mask is 0")
    elif ctx.chips is not None and mask >> ctx.chips:
        problems.append(f"chip mask 0x{mask:x} names a chip >= chip_nums {ctx.chips}")
    if exact_chip is not None and mask and mask != 1 << exact_chip:
        problems.append(f"chip mask 0x{mask:x} is not chip {exact_chip} named by the file")
    for p in problems:
        ctx.emit("CHIP_MASK_INVALID", f"{what}: {p}", file=rel, line=line)
    return not problems


def _declared_file(ctx: Ctx, name: str, base: str, rel: str, line: int) -> str | None:
    """The package-relative path of a declared file if it is safe and present, else report and None."""
    target = safe_relpath(name, base)
    if target is None:
        ctx.emit("FS_PATH_ESCAPE", f"declared path {name!r} is absolute or uses '..'", file=rel, line=line)
        return None
    if target not in ctx.files:
        too_long = [c for c in target.split("/") if len(c.encode("utf-8", "surrogateescape")) > NAME_MAX]
        if too_long:
            why = f"has a name component of {len(too_long[0].encode('utf-8', 'surrogateescape'))} bytes, longer " \
                  f"than the {NAME_MAX}-byte file-name limit, so no such file can exist"
            target = f"{target[:60]}…"
        else:  # os.path.lexists never raises (ENAMETOOLONG, ELOOP, embedded NUL: False)
            why = "is not a usable regular file" if os.path.lexists(ctx.path(target)) else "does not exist"
        ctx.emit("XREF_FILE_MISSING", f"declared file {target} {why}", file=rel, line=line)
        return None
    return target


def submodel_files(ctx: Ctx, sub: Submodel) -> None:
    """Command/ELF/helper declarations of one submodel (§5.2)."""
    if sub.meta is None:
        return
    ctx.check("C", "declared_files_exist")
    ctx.check("C", "chip_masks")
    ctx.check("C", "ping_pong_complete")
    rel = f"{sub.rel}/{SUBMODEL_META}"
    cores = ((sub.cfg or {}).get("device_cfg") or {}).get("calcore_num")
    declared: set[str] = set()
    elf_per_chip: dict[int, set[int]] = {}
    commands: dict[tuple[str, int], set[str]] = {}
    for d in sub.meta.decls:
        target = _declared_file(ctx, d.file, sub.rel, rel, d.line)
        if target is None:
            continue
        declared.add(target)
        base = target.rsplit("/", 1)[-1]
        if d.location is not None:
            m = _CCU_RE.fullmatch(base)
            if not m:
                ctx.emit("XREF_CHIPS", f"{base} declared with a location is not named ccu<core>_chip<chip>.elf",
                         file=rel, line=d.line)
                continue
            core, chip = int(m[1]), int(m[2])
            _mask_ok(ctx, d.mask, rel, d.line, base, exact_chip=chip)
            if isinstance(cores, int) and core >= cores:
                ctx.emit("XREF_CHIPS", f"{base}: core {core} >= calcore_num {cores}", file=rel, line=d.line)
            elf_per_chip.setdefault(chip, set()).add(core)
        elif m := _CMD_RE.fullmatch(base):
            engine, chip, pp = m[1], int(m[2]), m[3]
            _mask_ok(ctx, d.mask, rel, d.line, base, exact_chip=chip)
            commands.setdefault((engine, chip), set()).add(pp)
            if f"{target[:-4]}.txt" not in ctx.files:
                ctx.emit("FS_EXPECTED_MISSING", f"command text rendering of {base} is missing",
                         file=f"{target[:-4]}.txt")
        else:
            _mask_ok(ctx, d.mask, rel, d.line, base)
    _completeness(ctx, sub, rel, cores, elf_per_chip, commands)
    for r, e in sorted(ctx.files.items()):
        if r.startswith(sub.rel + "/") and e.role in ("ccu_elf", "command", "helper_so") and r not in declared:
            ctx.emit("XREF_FILE_UNDECLARED", f"{e.role} file is not declared in {SUBMODEL_META}", file=r)


def _completeness(ctx, sub, rel, cores, elf_per_chip, commands) -> None:
    chips = range(ctx.chips) if ctx.chips is not None else sorted(elf_per_chip)
    for chip in chips:
        have = elf_per_chip.get(chip, set())
        if isinstance(cores, int) and have != set(range(cores)):
            ctx.emit("XREF_CHIPS", f"chip {chip} has CCU programs for cores {sorted(have)}, calcore_num is {cores}",
                     file=rel)
    engines = {e for e, _ in commands} | {"cpu"}
    for engine in sorted(engines):
        for chip in chips:
            have = commands.get((engine, chip), set())
            missing = sorted({"ping", "pong"} - have)
            if missing:
                ctx.emit("CMD_PINGPONG_INCOMPLETE", f"{engine} chip {chip} lacks its {' and '.join(missing)} "
                         "command", file=rel)
    for chip in chips:
        if chip not in sub.profparts and not any(
            re.fullmatch(re.escape(sub.rel) + rf"/[^/]+\.chip{chip}\.profparts", r) for r in ctx.files
        ):
            ctx.emit("FS_REQUIRED_MISSING", f"profparts of chip {chip} is missing; the partition report needs it",
                     file=f"{sub.rel}/{sub.rel}.chip{chip}.profparts")
    for chip in sorted(sub.profparts):
        if ctx.chips is not None and chip >= ctx.chips:
            ctx.emit("XREF_CHIPS", f"profparts for chip {chip} but chip_nums is {ctx.chips}",
                     file=sub.profparts[chip].file)


def parameter_map(ctx: Ctx) -> list:
    """§4.3 rules 1–4: safe existing file, ``offset <= size`` and ``size <= file_size - offset``, mask.

    Returns the mappings that passed, as ``(mapping, package-relative file)``.
    """
    if ctx.runtime is None:
        return []
    ctx.check("C", "parameter_map_ranges")
    good = []
    used: set[str] = set()
    for m in ctx.runtime.mappings:
        target = _declared_file(ctx, m.file, "", RUNTIME_META, m.line)
        mask_ok = _mask_ok(ctx, m.mask, RUNTIME_META, m.line, m.file)
        if target is None:
            continue
        used.add(target)
        fsize = ctx.files[target].size
        if m.offset > fsize or m.size > fsize - m.offset:
            ctx.emit("PARAM_MAP_RANGE", f"{m.file} range [{m.offset}, {m.offset + m.size}) is outside the "
                     f"{fsize}-byte file", file=RUNTIME_META, line=m.line)
            continue
        if m.vaddr + m.size > 1 << 64:
            ctx.emit("PARAM_MAP_RANGE", f"{m.file} vaddr range runs past 2**64", file=RUNTIME_META, line=m.line)
            continue
        if mask_ok:
            good.append((m, target))
    for r, e in sorted(ctx.files.items()):
        if e.role == "param_block" and r not in used:
            ctx.emit("XREF_FILE_UNDECLARED", "parameter block is not referenced by the parameter map", file=r)
    return good


def profparts_ops(ctx: Ctx, sub: Submodel) -> dict | None:
    """§7.1: every profparts op exists in the op YAML; duplicates per chip. Returns the partition report."""
    if not sub.profparts or sub.ops is None:
        return None
    ctx.check("C", "profparts_ops_exist")
    unknown = 0
    per_chip: dict[int, set[str]] = {}
    for chip, pp in sorted(sub.profparts.items()):
        seen: dict[str, int] = {}
        for line, op in pp.names:
            if op not in sub.ops.ops:
                unknown += 1
                ctx.emit("PROFPART_UNKNOWN_OP", f"op {op!r} is not in {sub.ops.file}; partition report refused",
                         file=pp.file, line=line)
            elif op in seen:
                ctx.emit("PROFPART_DUPLICATE", f"op {op!r} repeats (first on line {seen[op]})", file=pp.file,
                         line=line)
            seen.setdefault(op, line)
        per_chip[chip] = set(seen)
    if unknown:
        return {"refused": True, "unknown_ops": unknown}
    all_ops = set(sub.ops.ops)
    every = set.intersection(*per_chip.values()) if per_chip else set()
    return {
        "refused": False,
        "ops_per_chip": {f"chip{c}": len(sub.profparts[c].names) for c in sorted(per_chip)},
        "ops_on_every_chip": len(every),
        "ops_on_one_chip_only": {f"chip{c}": len(ops - set().union(*(v for k, v in per_chip.items() if k != c)))
                                 for c, ops in sorted(per_chip.items())},
        "graph_ops_on_no_chip": len(all_ops - set().union(*per_chip.values())),
    }


def _chip_split(ctx: Ctx, name: str, op_shape: list, declared: list) -> str | None:
    """How a per-chip ``past_key_i`` / ``past_value_i`` op input agrees with the model-level manifest shape
    ``[batch, kv_heads, past, head_dim]`` on a package compiled for ``chip_nums`` > 1 (docs/calbin.md §6): each
    chip holds ``kv_heads / chips`` heads, and its buffer's context dimension is the declared past length or
    the full context — the package's context length (``max_seq_len``), in prefill (declared past 0) as in
    decode (declared past ``max_seq_len - 1``). None when no split explains the shape (then it stays an error)."""
    chips = ctx.chips
    if not chips or chips < 2 or not _PAST_RE.match(name) or len(op_shape) != 4 or len(declared) != 4 \
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in (*op_shape, *declared)):
        return None
    batch, heads, past, head_dim = declared
    if op_shape[0] != batch or op_shape[3] != head_dim or heads % chips or op_shape[1] != heads // chips:
        return None
    if op_shape[2] == past:
        return "the declared past length"
    if op_shape[2] == package_context(ctx):
        return "the full context (max_seq_len)"
    return None


def graph_inputs(ctx: Ctx, sub: Submodel) -> None:
    """Op YAML ``input_N`` entries are the manifest's inputs in order, with the same shapes; all consumed."""
    shapes = (sub.cfg or {}).get("input_shape")
    if sub.ops is None or not isinstance(shapes, dict) or not shapes:
        return
    ctx.check("C", "graph_inputs")
    names = list(shapes)
    used: set[int] = set()
    split: dict[str, list[str]] = {}  # interpretation -> the per-chip inputs it explains
    for e in sub.ops.entries():
        n = e.input_index
        if n is None:
            continue
        used.add(n)
        if n >= len(names):
            ctx.emit("XREF_GRAPH_INPUTS", f"role {e.role} but the manifest declares {len(names)} inputs",
                     file=sub.ops.file, path=f"{e.op}.{e.slot}")
        elif list(e.shape) != shapes[names[n]]:
            reading = _chip_split(ctx, names[n], list(e.shape), shapes[names[n]])
            if reading is None:
                ctx.emit("XREF_GRAPH_INPUTS", f"{e.role} ({names[n]}) has shape {list(e.shape)}, manifest says "
                         f"{shapes[names[n]]}", file=sub.ops.file, path=f"{e.op}.{e.slot}")
            else:
                split.setdefault(reading, []).append(f"{names[n]} {list(e.shape)} (manifest {shapes[names[n]]})")
    if split:
        ctx.emit("XREF_GRAPH_INPUTS_CHIP_SPLIT", "per-chip KV inputs read against the chip split ("
                 f"{ctx.chips} chips: kv_heads / {ctx.chips} heads each): "
                 + "; ".join(f"{len(v)} with {k}" for k, v in sorted(split.items())), file=sub.ops.file,
                 detail={"chips": ctx.chips, "interpretations": {k: v[:8] for k, v in sorted(split.items())}})
    unused = [names[i] for i in range(len(names)) if i not in used]
    if unused:
        ctx.emit("XREF_GRAPH_INPUTS", f"manifest inputs consumed by no op: {', '.join(unused[:8])}"
                 + (f" and {len(unused) - 8} more" if len(unused) > 8 else ""), file=sub.ops.file)


def device_compat(ctx: Ctx) -> None:
    """The declared runtime chip type is one of the metadata's ``deviceN`` lists (§4.1)."""
    compat = (ctx.manifest or {}).get("runtime_compat")
    devices = (ctx.runtime.typed.get("devices") if ctx.runtime else None) or {}
    if not isinstance(compat, dict) or not isinstance(compat.get("chip"), str) or not devices:
        return
    ctx.check("C", "device_compatibility")
    names = {n for lst in devices.values() for n in lst}
    if compat["chip"] not in names:
        ctx.emit("XREF_DEVICE", f"runtime_compat.chip {compat['chip']!r} is not among the compatible devices "
                 f"{sorted(names)}", file=ctx.manifest_rel, path="runtime_compat.chip")
