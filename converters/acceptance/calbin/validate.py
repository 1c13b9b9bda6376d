"""``validate_calbin``: static acceptance of a calbin NPU model package (docs/calbin.md, Gates A–F).

Order: Gate A walks the tree; Gate B parses the runtime metadata, locates and loads the root manifest,
then each submodel's metadata, op YAML, profparts and command text, the tokenizer and ``hparam.yaml``;
Gate A's required-file check runs once the manifest names the submodels; Gate C cross-references; the
package is hashed; Gates D, E, F follow. Each stage records the checks it ran and its findings in one
:class:`converters.acceptance.report.Report` (schema ``calculet-package-validation/v1``); nothing is raised for a
bad package, only for a caller error.

Passing static acceptance proves the package is self-consistent, not that its numbers are right or that
it runs on the device (§1): the verdict is ``pass`` only when no finding above INFO remains; a package
like the sample of docs/calbin.md §2 (vendor-confirmable defects, missing supply-chain fields) is
``pass_with_warnings``.
"""

from __future__ import annotations

import re
from pathlib import Path

from converters.acceptance.calbin import (
    capacity,
    crossref,
    declarations,
    inventory,
    manifest,
    metadata,
    opgraph,
    prerun,
    supply,
    tokenizer,
)
from converters.acceptance.calbin.commands import parse_command_text
from converters.acceptance.calbin.context import Ctx
from converters.acceptance.report import SCHEMA_CALBIN, Report
from converters.sources.kind import is_calbin_package  # noqa: F401  (the package's detection, re-exported)

_CMD_TEXT_RE = re.compile(r"(cpu|pld)_chip(\d+)_(ping|pong)\.txt")


def validate_calbin(path: str | Path, *, context: int | None = None, batch: int | None = None,
                    fast: bool = False) -> Report:
    """Run Gates A–F over the package at ``path`` and return the report.

    Args:
        context: service context for the KV figure (default: the calbin ``max_seq_len``); larger than
            the calbin's is ``CAP_CONTEXT_EXCEEDED``.
        batch: service batch (default: the calbin ``n_batch``).
        fast: skip hashing the parameter blocks (``FS_HASH_SKIPPED``; no package hash manifest).
    """
    root = Path(path)
    report = Report(SCHEMA_CALBIN, {"kind": "calbin", "name": root.name, "path": str(root.absolute())})
    ctx = Ctx(root, report, context=context, batch=batch, fast=fast)
    if inventory.scan(ctx):
        _run(ctx)
    ctx.flush_suppressed()
    return report


def _run(ctx: Ctx) -> None:
    metadata.load_runtime(ctx)
    manifest.locate(ctx, ctx.runtime.typed.get("model_arch") if ctx.runtime else None)
    manifest.load(ctx)
    crossref.match_submodels(ctx)
    declarations.chip_counts(ctx)
    inventory.required_files(ctx)
    ctx.submodels.sort(key=lambda s: ({"prefill": 0, "decode": 1}.get(s.kind or "", 2), s.name))
    for sub in ctx.submodels:
        metadata.load_submodel(ctx, sub)
        opgraph.load_ops(ctx, sub)
        opgraph.load_profparts(ctx, sub)
        _command_texts(ctx, sub)
    _hparam(ctx)
    tokenizer.load(ctx)

    crossref.roles(ctx)
    crossref.model_name(ctx)
    calbin_batch, calbin_context = crossref.batch_and_context(ctx)
    figures = crossref.heads_and_layers(ctx)
    logits_dim = crossref.io_buffers(ctx, calbin_batch)
    partitions = {}
    for sub in ctx.submodels:
        declarations.submodel_files(ctx, sub)
        declarations.graph_inputs(ctx, sub)
        partitions[sub.kind or sub.name] = declarations.profparts_ops(ctx, sub)
    mappings = declarations.parameter_map(ctx)
    declarations.device_compat(ctx)

    sha_manifest = inventory.hash_files(ctx)
    tok_section = tokenizer.check_service(ctx, calbin_context, logits_dim)

    memory = ctx.report.section("memory")
    memory["parameter_bytes"] = capacity.parameters(ctx, mappings)
    memory["reservations"] = capacity.reservations(ctx, mappings)
    dram = (memory["reservations"].get("dram") or {}).get("bytes")
    memory["device_memory_required"] = capacity.device_memory(ctx, dram)
    kv = capacity.kv_cache(ctx, figures, calbin_batch, calbin_context)
    memory["kv_bytes"] = kv["bytes_total"] if kv else None
    memory["kv"] = kv
    memory["address_union"] = capacity.address_union(ctx)
    memory["io_buffers"] = capacity.io_buffers(ctx)
    capacity.c3_fields(ctx)

    ctx.report.sections["supply_chain"] = supply.check(ctx)
    binaries = {sub.name: prerun.binaries(ctx, sub) for sub in ctx.submodels}
    prerun.runtime_required(ctx)

    _sections(ctx, sha_manifest, calbin_batch, calbin_context, figures, logits_dim, partitions, binaries,
              tok_section)


def _command_texts(ctx: Ctx, sub) -> None:
    for rel, entry in sorted(ctx.files.items()):
        if entry.role != "command_text" or not rel.startswith(sub.rel + "/"):
            continue
        m = _CMD_TEXT_RE.fullmatch(rel.rsplit("/", 1)[-1])
        ctx.check("B", "command_text_grammar")
        parsed = parse_command_text(ctx, rel, int(m[2]))
        if parsed is not None:
            sub.commands[rel] = parsed


def _hparam(ctx: Ctx) -> None:
    if "hparam.yaml" not in ctx.files or ctx.files["hparam.yaml"].size == 0:
        return
    ctx.check("B", "hparam_yaml")
    ctx.load_mapping("hparam.yaml")  # findings only: nothing reads hparam.yaml further


def _sections(ctx, sha_manifest, batch, context, figures, logits_dim, partitions, binaries, tok_section) -> None:
    r = ctx.report
    r.package.update({"name": ctx.model_name or ctx.root.name, "manifest": ctx.manifest_rel,
                      "file_count": len(ctx.files), "sha256_manifest": sha_manifest,
                      "files": [{"file": e.rel, "bytes": e.size, "role": e.role, "sha256": e.sha256}
                                for e in sorted(ctx.files.values(), key=lambda e: e.rel)]})
    r.sections = {"model": {
        "name": ctx.model_name, "batch": batch, "max_seq": context, "chips": ctx.chips,
        "layers": figures.get("layers"), "q_heads": figures.get("q_heads"), "kv_heads": figures.get("kv_heads"),
        "head_dim": figures.get("head_dim"), "vocab": logits_dim,
    }, **r.sections}
    subs = []
    for s in ctx.submodels:
        bufs = s.meta.buffers if s.meta else []
        io = [{"name": b.name, "direction": b.direction, "shape": list(b.shape), "dtype": b.dtype,
               "bytes": b.size, "vaddr_ping": b.vaddr_ping, "vaddr_pong": b.vaddr_pong} for b in bufs]
        texts = {rel.rsplit("/", 1)[-1]: c for rel, c in s.commands.items()}
        pingpong = {}
        for name, c in texts.items():
            if name.endswith("_ping.txt") and (pong := texts.get(name.replace("_ping.", "_pong."))):
                pingpong[name[: -len("_ping.txt")]] = c.digest_without_addrs == pong.digest_without_addrs
        subs.append({
            "name": s.name, "kind": s.kind, "smodel_type": s.meta.typed.get("smodel_type") if s.meta else None,
            "inputs": [b for b in io if b["direction"] == "ibuf"],
            "outputs": [b for b in io if b["direction"] == "obuf"],
            "commands": {n: c.summary() for n, c in sorted(texts.items())},
            "ping_pong_identical_except_addresses": pingpong,
            "binaries": binaries.get(s.name, []),
        })
    r.sections["submodels"] = subs
    graph = {}
    for s in ctx.submodels:
        key = s.kind or s.name
        if s.ops is not None:
            graph[f"{key}_ops"] = len(s.ops.ops)
    graph["op_histogram"] = {s.kind or s.name: s.ops.histogram() for s in ctx.submodels if s.ops is not None}
    graph["partition"] = partitions
    r.sections["graph"] = graph
    r.sections["tokenizer"] = tok_section
    order = ["model", "submodels", "memory", "graph", "tokenizer", "supply_chain"]
    r.sections = {k: r.sections[k] for k in order if k in r.sections}
