"""``convert inspect``: evidence-grade static inspection of GGUF (single, gguf-split), safetensors (single,
sharded) and ``.ninfer`` artifacts (``docs/inspect.md``).

:func:`inspect_model_artifact` detects the input by content, verifies its header with the same strict
parser the converters read through, optionally hashes the whole input, re-checks the descriptors'
identity and returns the Evidence record (:mod:`converters.inspect.evidence`) or its summary with a
selected page (:mod:`converters.inspect.views`). A stored Evidence record given as the path is served
from its retained facts without reopening the model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from converters.inspect.bundle import load_stored, write_bundle
from converters.inspect.calbin_facts import inspect_calbin
from converters.inspect.evidence import EvidenceError, evidence_output_exists, load_evidence
from converters.inspect.gguf_facts import gguf_facts, gguf_split_facts
from converters.inspect.hashing import BUFFER_BYTES
from converters.inspect.run import InspectionCancelled, finish, header_file, side_file
from converters.inspect.safetensors_facts import hf_facts, safetensors_facts
from converters.inspect.summary import summarize
from converters.inspect.views import ViewError, parse_view, select
from converters.sources.atomic_write import refuse_existing
from converters.sources.fileio import OpenFile
from converters.sources.gguf import GGUFSplitSource, open_gguf
from converters.sources.hf import HFCheckpoint
from converters.sources.kind import detect_kind, wrong_kind
from converters.sources.safetensors import parse_safetensors

HASH_MODES = ("header", "full")
#: the kinds (:mod:`converters.sources.kind`) inspected; ``json`` is a stored Evidence record.
INSPECTED = ("gguf", "safetensors", "hf", "ninfer", "calbin", "json")
DETAILS = ("full", "summary")


def _inspect_file(path: Path, parse, facts_of, role: str, **kw) -> dict:
    f = OpenFile(path)
    try:
        hdr = parse(f)
        return finish(path, facts_of(hdr), [header_file(path.name, role, f, hdr)], single=True, **kw)
    finally:
        f.close()


def _inspect_gguf(path: Path, **kw) -> dict:
    """One GGUF file, or the whole gguf-split set a shard belongs to (docs/inspect.md §Split GGUF files); a
    metadata-only file is accepted (docs/inspect.md §Metadata-only files)."""
    src = open_gguf(path, assume_modern_layouts=False, allow_meta_only=True)
    try:
        if isinstance(src, GGUFSplitSource):
            files = [header_file(n, "shard", s.opened, s.header) for n, s in src.shards.items()]
            return finish(path, gguf_split_facts(src), files, single=False, **kw)
        return finish(path, gguf_facts(src.header), [header_file(path.name, "gguf", src.opened, src.header)],
                      single=True, **kw)
    finally:
        src.close()


def _inspect_directory(path: Path, **kw) -> dict:
    ckpt = HFCheckpoint(path, require_config=False)
    try:
        facts = hf_facts(ckpt)
        files = [side_file(n, "index" if n.endswith("index.json") else ("config" if n == "config.json" else
                           "resource"), path / n, info, ckpt.side_identity[n]) for n, info in ckpt.side_files.items()]
        files += [header_file(n, "shard", s.opened, s.header) for n, s in ckpt.shards.items()]
        return finish(path, facts, files, single=False, **kw)
    finally:
        ckpt.close()


def _inspect_ninfer(path: Path, **kw) -> dict:
    from converters.inspect.ninfer_facts import inspect_ninfer

    return inspect_ninfer(path, **kw)


def inspect_model_artifact(path, *, hash: str = "header", detail: str = "full", view: dict | None = None,
                           evidence_output=None, progress: Callable[[int], None] | None = None,
                           buffer_bytes: int = BUFFER_BYTES) -> dict:
    """Inspect ``path`` (GGUF, safetensors, HF/sharded directory, ``.ninfer``, a calbin package, or a stored
    Evidence file). A calbin package always gives its summary (:mod:`converters.inspect.calbin_facts`).

    Args:
        hash: ``"header"`` (header length and SHA-256 only; ``artifact.sha256`` and ``body`` null) or
            ``"full"`` (streamed SHA-256 of every byte).
        detail: ``"full"`` returns the Evidence record; ``"summary"`` the compact summary.
        view: a selection (:mod:`converters.inspect.views`); requires ``detail="summary"``.
        evidence_output: also write the full record there, as a bundle of one record (refuses to overwrite;
            docs/inspect.md §Bundles).
        progress: called with the number of bytes hashed after each buffer (full mode).

    Returns:
        The Evidence record or summary. ``status`` is ``"partial"`` when hashing or the identity check
        failed after the header was verified (the typed error is in ``error``).

    Raises:
        SourceError: the target is missing, unusable or rejected by the strict parser
            (``target_unavailable``) or a host I/O failure occurred before the header was verified
            (``execution_failure``).
        ViewError: conflicting options or an invalid view.
        InspectionCancelled: Ctrl-C after the header was verified (carries the partial record).
    """
    if hash not in HASH_MODES:
        raise ViewError(f"hash must be one of {HASH_MODES}, not {hash!r}", json_path="hash", rule="options_valid")
    if detail not in DETAILS:
        raise ViewError(f"detail must be one of {DETAILS}, not {detail!r}", json_path="detail",
                        rule="options_valid")
    spec = None
    if view is not None:
        if detail != "summary":
            raise ViewError("a view needs detail='summary' (full detail and a selection conflict)",
                            json_path="view", rule="options_conflict")
        spec = parse_view(view)
    if evidence_output is not None:
        refuse_existing(evidence_output, lambda: evidence_output_exists(evidence_output))
    p = Path(path)
    kind = detect_kind(p)
    if kind == "calbin":
        if view is not None or evidence_output is not None:
            raise ViewError("views and evidence files apply to model files; a calbin package has a summary "
                            "only (use `convert validate` for its full report)", json_path="view",
                            rule="options_conflict")
        return inspect_calbin(p, hash_mode=hash)
    kw = {"hash_mode": hash, "progress": progress, "buffer_bytes": buffer_bytes}
    if kind == "json":
        if hash == "full":
            raise ViewError("a stored Evidence record cannot be re-hashed; inspect the model itself",
                            json_path="hash", rule="options_conflict")
        record = load_stored(p)
    elif kind == "gguf":
        record = _inspect_gguf(p, **kw)
    elif kind == "safetensors":
        record = _inspect_file(p, parse_safetensors, safetensors_facts, "safetensors", **kw)
    elif kind == "hf":
        record = _inspect_directory(p, **kw)
    elif kind == "ninfer":
        record = _inspect_ninfer(p, **kw)
    else:
        raise wrong_kind(p, kind, INSPECTED, command="inspect")
    if evidence_output is not None:
        write_bundle(evidence_output, [record])
    if detail == "full":
        return record
    page = select(record, spec) if spec is not None else None
    return summarize(record, page=page, evidence_output=evidence_output)


__all__ = ["EvidenceError", "InspectionCancelled", "ViewError", "inspect_model_artifact", "load_evidence",
           "select", "summarize"]
