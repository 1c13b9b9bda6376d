"""The parsers under fuzz: one harness per input kind, each taking the fuzzed bytes and a scratch directory.

A harness returns ``"accepted"`` (the parser read the input) or ``"rejected"`` (a typed refusal: a
:class:`~ninfer_core.errors.NinferError`, which every converter error is, or findings in a calbin report);
anything else it lets escape is an *untyped* exception, the defect the campaign hunts. Inputs are written
to a file first, since every reader takes a path (as users give it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ninfer_core.errors import NinferError

SEEDS = Path(__file__).resolve().parent / "corpus"


def _file(scratch: Path, name: str, data: bytes) -> Path:
    path = scratch / name
    path.write_bytes(data)
    return path


def gguf(data: bytes, scratch: Path) -> str:
    from converters.sources import open_gguf

    with open_gguf(_file(scratch, "m.gguf", data)) as src:
        for name, t in list(src.tensors.items())[:64]:
            _ = (name, t.shape, t.dtype)
        for key in list(src.metadata)[:256]:
            _ = src.metadata[key]
    return "accepted"


def safetensors(data: bytes, scratch: Path) -> str:
    from converters.sources import open_safetensors

    with open_safetensors(_file(scratch, "m.safetensors", data)) as src:
        for name, t in list(src.tensors.items())[:64]:
            _ = (name, t.shape, t.dtype)
    return "accepted"


def hf_index(data: bytes, scratch: Path) -> str:
    """The index JSON of a sharded HF checkpoint (the two shards and config.json are the seed's)."""
    from converters.sources import open_hf_dir

    hf = scratch / "hf"
    if not hf.exists():
        shutil.copytree(SEEDS / "hf_index" / "_checkpoint", hf)
    _file(hf, "model.safetensors.index.json", data)
    with open_hf_dir(hf) as src:
        _ = list(src.tensors)[:64]
    return "accepted"


def ninfer_entry(data: bytes, scratch: Path) -> str:
    from ninfer_core import open_artifact, validate

    path = _file(scratch, "a.ninfer", data)
    findings = validate(path)
    with open_artifact(path) as art:
        for obj in art.objects[:16]:
            art.object_bytes(obj.id)
    return "rejected" if any(f.severity == "ERROR" for f in findings) else "accepted"


def ninfer_part(data: bytes, scratch: Path) -> str:
    """A continuation part of the seed's two-part artifact replaced by the input."""
    from ninfer_core import open_artifact, validate

    entry = scratch / "s.ninfer"
    if not entry.exists():
        for f in (SEEDS / "ninfer_part" / "_artifact").iterdir():
            shutil.copy(f, scratch / f.name)
    _file(scratch, "s.ninfer.part-0001", data)
    findings = validate(entry)
    with open_artifact(entry) as art:
        for obj in art.objects:
            art.object_bytes(obj.id)
    return "rejected" if any(f.severity == "ERROR" for f in findings) else "accepted"


_SCANNED: dict[Path, object] = {}


def _calbin(scratch: Path, rel_of: Callable[[dict], str], data: bytes):
    """A fresh context over the seed package in ``scratch`` (copied and inventoried once) with the file
    ``rel_of(files)`` replaced by ``data``; returns the context and that file's name."""
    import dataclasses

    from converters.acceptance.calbin import inventory
    from converters.acceptance.calbin.context import Ctx
    from converters.acceptance.report import SCHEMA_CALBIN, Report

    root = scratch / "pkg"
    if root not in _SCANNED:
        shutil.copytree(SEEDS / "calbin" / "_package", root, dirs_exist_ok=True)
        seed = Ctx(root, Report(SCHEMA_CALBIN, {"kind": "calbin"}))
        inventory.scan(seed)
        _SCANNED[root] = seed
    seed = _SCANNED[root]
    rel = rel_of(seed.files)
    _file(root, rel, data)
    ctx = Ctx(root, Report(SCHEMA_CALBIN, {"kind": "calbin"}))
    ctx.files = {k: dataclasses.replace(v, size=len(data) if k == rel else v.size) for k, v in seed.files.items()}
    ctx.submodels = [dataclasses.replace(sub) for sub in seed.submodels]
    ctx.manifest_rel, ctx.chips = seed.manifest_rel, seed.chips
    return ctx, rel


def _outcome(ctx) -> str:
    return "rejected" if any(f.severity == "ERROR" for f in ctx.report.findings) else "accepted"


def calbin_manifest(data: bytes, scratch: Path) -> str:
    from converters.acceptance.calbin import manifest, metadata

    ctx, _ = _calbin(scratch, lambda files: next(r for r in sorted(files) if "/" not in r and r.endswith(".yaml")
                                                 and r != "hparam.yaml"), data)
    ctx.manifest_rel = None
    metadata.load_runtime(ctx)
    manifest.locate(ctx, ctx.runtime.typed.get("model_arch") if ctx.runtime else None)
    manifest.load(ctx)
    return _outcome(ctx)


def calbin_metadata(data: bytes, scratch: Path) -> str:
    from converters.acceptance.calbin import metadata

    ctx, _ = _calbin(scratch, lambda files: "model_memory_reserved_info.txt", data)
    metadata.load_runtime(ctx)
    for sub in ctx.submodels:
        metadata.load_submodel(ctx, sub)
    return _outcome(ctx)


def calbin_op_yaml(data: bytes, scratch: Path) -> str:
    from converters.acceptance.calbin import opgraph

    ctx, _ = _calbin(scratch, lambda files: next(r for r in sorted(files) if r.endswith("_op_io_buf_ptr.yaml")), data)
    for sub in ctx.submodels:
        opgraph.load_ops(ctx, sub)
    return _outcome(ctx)


def evidence(data: bytes, scratch: Path) -> str:
    from converters.inspect.evidence import load_evidence

    load_evidence(_file(scratch, "e.json", data))
    return "accepted"


def imatrix(data: bytes, scratch: Path) -> str:
    from converters.sources.imatrix import read_imatrix

    read_imatrix(_file(scratch, "m.imatrix", data))
    return "accepted"


def evidence_bundle(data: bytes, scratch: Path) -> str:
    from converters.inspect.bundle import load_bundle

    load_bundle(_file(scratch, "b.json", data))
    return "accepted"


def prequantized_config(data: bytes, scratch: Path) -> str:
    """``config.json`` of a tiny prequantized checkpoint (the seed's tensors, docs/prequantized.md): detection,
    then each quantized weight's exact targets, ulp bounds and first rows."""
    from converters.sources import open_hf_dir

    hf = scratch / "pq"
    if not hf.exists():
        shutil.copytree(SEEDS / "prequantized_config" / "_checkpoint", hf)
    _file(hf, "config.json", data)
    with open_hf_dir(hf) as src:
        for qw in list(src.quantized_weights.values())[:8]:
            for fmt in qw.exact_targets():
                qw.max_ulp(fmt)
            qw.dequantize(0, min(2, qw.shape[0]))
    return "accepted"


def recipe(data: bytes, scratch: Path) -> str:
    """A recipe file (``--recipe PATH``), validated against the shipped mappings' roles."""
    from converters.mapping import recipes

    try:
        recipes.load_recipe(_file(scratch, "r.yaml", data))
    finally:
        recipes._load.cache_clear()  # one entry per content hash: 100,000 inputs would keep 100,000
    return "accepted"


def mapping(data: bytes, scratch: Path) -> str:
    """A mapping file, loaded and validated (and its roles read, as a recipe's check reads them)."""
    from converters.mapping import loader

    path = _file(scratch, "m.yaml", data)
    try:
        loader.parameter_roles(path)
        loader.load_mapping(path)
    finally:
        loader._load_cached.cache_clear()
    return "accepted"


def config(data: bytes, scratch: Path) -> str:
    """``config.json`` of a tiny Qwen3 checkpoint (the seed's tensors): normalisation, architecture, ``Args``,
    the counts bounded by the tensors present, then the binding of every tensor (``open_model``)."""
    from converters.model.engine import open_model

    hf = scratch / "cfg"
    if not hf.exists():
        shutil.copytree(SEEDS / "config" / "_checkpoint", hf)
    _file(hf, "config.json", data)
    with open_model(hf):
        pass
    return "accepted"


def view(data: bytes, scratch: Path) -> str:
    """``convert inspect --detail summary --view JSON`` on the seed GGUF: the selection parsed as every JSON
    input is (strict, nesting bounded), then applied."""
    from converters.inspect import inspect_model_artifact
    from converters.sources import strict_json

    selection = strict_json.loads(data, file=None, what="--view")
    inspect_model_artifact(SEEDS / "gguf" / "little.gguf", detail="summary", view=selection)
    return "accepted"


def proposal_counts(data: bytes, scratch: Path) -> str:
    """A ``--proposal-counts`` file (TSV or JSON) for a 512-token vocabulary."""
    from converters.pipeline.proposal import read_token_counts

    read_token_counts(_file(scratch, "c.txt", data), 512)
    return "accepted"


def _path_fixtures(root: Path) -> None:
    """What a fuzzed path may meet under ``root``: a GGUF, a directory, a FIFO, a dangling link, a loop."""
    if root.exists():
        return
    root.mkdir()
    shutil.copy(SEEDS / "gguf" / "little.gguf", root / "m.gguf")
    (root / "d").mkdir()
    (root / "r.yaml").write_bytes((SEEDS / "recipe" / "bf16.yaml").read_bytes())
    os.mkfifo(root / "fifo")
    os.symlink(root / "missing", root / "dangling")
    os.symlink(root / "loop2", root / "loop")
    os.symlink(root / "loop", root / "loop2")


def paths(data: bytes, scratch: Path) -> str:
    """A path as a user types it (bytes as the OS gives them, any length, NUL included; kept under a scratch
    directory holding a GGUF, a directory, a FIFO, a dangling link and a symlink loop) given to each reader
    that takes a path: kind detection, a recipe, a mapping, token counts, a plan file, an output check."""
    from converters.mapping.loader import load_mapping
    from converters.mapping.recipes import load_recipe
    from converters.pipeline.convert import check_output_free
    from converters.pipeline.proposal import read_token_counts
    from converters.scaleout.planfile import PlanFile
    from converters.sources.kind import detect_kind

    root = scratch / "paths"
    _path_fixtures(root)
    name = os.fsdecode(data).lstrip("/").replace("..", "__") or "."
    path = root / name
    outcome = "rejected"  # unless some reader took it
    for read in (detect_kind, load_recipe, load_mapping, lambda p: read_token_counts(p, 512), PlanFile.load,
                 lambda p: check_output_free(p, source=root / "m.gguf")):
        try:
            read(path)
            outcome = "accepted"
        except TYPED:
            pass
    return outcome


class UntypedToolError(Exception):
    """An MCP tool call answered with something other than the documented rejection document."""


_SERVER: list = []


def mcp_tools(data: bytes, scratch: Path) -> str:
    """An MCP tool call in process: ``{"tool": NAME, "arguments": {...}}`` (JSON) through the server's own
    ``call_tool``, as a client sends it. A path argument is kept under the scratch directory (the fuzzer
    must not stream the host's files); an error result that is not the typed rejection document (an
    exception the SDK wrapped) counts as untyped."""
    import anyio

    from converters.inspect.mcp_server import build_server
    from converters.sources import strict_json

    call = strict_json.loads(data, file=None, what="tool call")
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str) or not isinstance(call.get("arguments"),
                                                                                               dict):
        return "rejected"
    args = dict(call["arguments"])
    if isinstance(args.get("path"), str):
        args["path"] = str(scratch / args["path"].lstrip("/").replace("..", "__"))
    if not _SERVER:
        shutil.copy(SEEDS / "gguf" / "little.gguf", scratch / "m.gguf")
        _SERVER.append(build_server())
    try:
        result = anyio.run(_SERVER[0].call_tool, call["tool"], args)
    except Exception as exc:  # the SDK refuses an unknown tool or arguments its schema rejects: typed there
        if type(exc).__name__ in ("ToolError", "ValidationError"):
            return "rejected"
        raise
    if not result.is_error:
        return "accepted"
    doc = result.structured_content or {}
    if isinstance(doc.get("error"), dict) and doc["error"].get("code"):
        return "rejected"
    raise UntypedToolError(str(result.content)[:500])


TARGETS: dict[str, Callable[[bytes, Path], str]] = {
    "gguf": gguf, "safetensors": safetensors, "hf_index": hf_index, "ninfer_entry": ninfer_entry,
    "ninfer_part": ninfer_part, "calbin_manifest": calbin_manifest, "calbin_metadata": calbin_metadata,
    "calbin_op_yaml": calbin_op_yaml, "evidence": evidence, "imatrix": imatrix, "evidence_bundle": evidence_bundle,
    "prequantized_config": prequantized_config, "recipe": recipe, "mapping": mapping, "config": config,
    "view": view, "proposal_counts": proposal_counts, "paths": paths, "mcp_tools": mcp_tools,
}
TYPED = (NinferError,)
