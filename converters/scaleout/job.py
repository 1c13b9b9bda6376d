"""The three steps of a staged conversion: :func:`stage` (plan), :func:`encode`, :func:`seal`.

Every step opens the conversion the way :func:`converters.pipeline.convert.convert` does
(:func:`converters.pipeline.convert.open_conversion`) and declares the writer the same way
(:func:`converters.pipeline.convert.declare_writer`), so the staged directory is the in-process one, byte for byte:

- :func:`stage` plans, creates the staging directory with the pre-allocated files
  (``ArtifactWriter.stage``) and writes the plan file. Nothing is encoded.
- :func:`encode` re-plans in the calling process, checks the planned directory against the plan's
  fingerprint, and writes the objects it is given at their planned offsets on a thread pool, measuring
  the error of requantized objects as it encodes them (one pass; the in-process conversion encodes
  those objects once to measure and, above its cache, again to write). Objects already marked written
  are skipped unless ``redo``; ``shard=(k, n)`` takes the k-th of n byte-balanced shares, so ``n``
  machines can each run one share.
- :func:`seal` puts the measured errors into the reserved provenance exactly where the in-process
  conversion puts them, and publishes (``StagedArtifact.seal``: coverage, content ID, no overwrite).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

from converters import __version__
from converters.errors import ConversionError
from converters.pipeline.convert import (
    borrowed_chunks,
    check_output_free,
    declare_writer,
    open_conversion,
    worker_pool,
)
from converters.pipeline.exactness import predict, probed
from converters.pipeline.produce import ErrorStats
from converters.pipeline.template import BorrowedObject
from converters.scaleout.planfile import PlanFile, Request
from converters.scaleout.reservation import measured
from converters.sources.ternary import prove_objects
from ninfer_core.container.staging import StagedArtifact, staging_dir_for

log = logging.getLogger(__name__)


def _fingerprint(writer) -> str:
    plan, _ = writer.layout()
    return hashlib.sha256(plan.json_text).hexdigest()


@contextlib.contextmanager
def _opened(request: Request, dry_run: bool = False, labels: dict[str, str] | None = None) -> Iterator[tuple]:
    """The opened conversion and its declared writer (nothing created on disk). Exactness labels are
    probed (:func:`converters.pipeline.exactness.predict`) when staging; the encoding processes take the
    staged ``labels`` (object id → exactness, the plan file's) instead of probing again."""
    with open_conversion(request.source, request.output, dry_run=dry_run, **request.conversion_args()) as c:
        if labels is None:
            predict(c.objects, c.producer)
        else:
            for o in c.objects:
                if probed(o):
                    o.probed = labels[o.id]
        c.result.proofs = prove_objects(c.objects, c.producer)  # as convert() does: recorded in provenance
        writer = declare_writer(c.model, c.plan, c.objects, c.result, max_file_bytes=request.max_file_bytes,
                                artifact_id=None if request.artifact_id_from_content else request.artifact_id,
                                artifact_id_from_content=request.artifact_id_from_content)
        yield c, writer


def stage(request: Request, plan_path: str | Path, *, staging: str | Path | None = None) -> PlanFile:
    """Plan ``request`` once: create the staging directory (pre-allocated files) and the plan file."""
    plan_path = Path(plan_path).resolve()
    check_output_free(Path(request.output))
    if plan_path.exists():
        raise ConversionError("plan file already exists; it is never overwritten", file=str(plan_path),
                              rule="target_exists")
    staging = Path(staging).resolve() if staging is not None else staging_dir_for(request.output)
    with _opened(request) as (c, writer):
        fingerprint = _fingerprint(writer)
        measure = {o.id for o in measured(c.objects)}
        objects = [{"id": o.id, "bytes": o.bytes, "measure": o.id in measure,
                    "origin": "borrowed" if isinstance(o, BorrowedObject) else "produced", "exactness": o.exactness}
                   for o in c.objects]
        summary = c.result.summary()
        staged = writer.stage(staging)
    pf = PlanFile(request, str(staged.staging), fingerprint, objects, summary, time.time(), __version__)
    try:
        pf.save(plan_path)
    except BaseException:
        staged.discard()
        raise
    log.info("staged %d objects (%d bytes) in %s", len(objects), sum(o["bytes"] for o in objects), staged.staging)
    return pf


def shard_of(objects: list[dict], k: int, n: int) -> list[str]:
    """The IDs of share ``k`` (1-based) of ``n`` byte-balanced shares: largest objects first, each to the
    lightest share (ties: lowest share); deterministic, so ``n`` machines agree without talking."""
    if not 1 <= k <= n:
        raise ConversionError(f"shard {k}/{n}: need 1 <= K <= N", rule="shard")
    loads = [0] * n
    owner: dict[str, int] = {}
    for o in sorted(objects, key=lambda o: -o["bytes"]):
        i = min(range(n), key=lambda j: (loads[j], j))
        loads[i] += o["bytes"]
        owner[o["id"]] = i + 1
    return [o["id"] for o in objects if owner[o["id"]] == k]


def encode(plan_path: str | Path, *, objects: Iterable[str] | None = None, shard: tuple[int, int] | None = None,
           workers: int | None = None, redo: bool = False,
           progress: Callable[[str, int], None] | None = None) -> dict:
    """Write the chosen objects (default: all not yet written) into the staged files; returns
    ``{"written": [ids], "skipped": [ids], "bytes": n, "seconds": s}``."""
    started = time.perf_counter()
    pf = PlanFile.load(plan_path)
    staged = StagedArtifact.open(pf.staging)
    ids = [o["id"] for o in pf.objects]
    if objects is not None:
        wanted, planned = set(objects), set(ids)
        unknown = sorted(wanted - planned)
        if unknown:
            raise ConversionError(f"not in the plan: {', '.join(unknown[:5])}", file=str(plan_path), rule="object_unknown")
        ids = [i for i in ids if i in wanted]
    if shard is not None:
        mine = set(shard_of(pf.objects, *shard))
        ids = [i for i in ids if i in mine]
    done = set() if redo else set(staged.markers())
    todo, skipped = [i for i in ids if i not in done], [i for i in ids if i in done]
    measure = {o["id"] for o in pf.objects if o["measure"]}
    written_bytes = 0
    if todo:
        with _opened(pf.request, dry_run=True, labels={o["id"]: o["exactness"] for o in pf.objects}) as (c, writer):
            if _fingerprint(writer) != pf.fingerprint:
                raise ConversionError("the conversion plans differently now than when it was staged (source, "
                                      "recipe or converter changed); stage it again", file=str(plan_path),
                                      rule="plan_stale")
            by_id = {o.id: o for o in c.objects}

            def one(oid: str) -> int:
                o = by_id[oid]
                stats = ErrorStats() if oid in measure else None
                chunks = borrowed_chunks(o) if isinstance(o, BorrowedObject) else c.producer.stream(o, stats)
                if progress is not None:
                    chunks = _counted(oid, chunks, progress)
                staged.write_object(oid, chunks, note=(lambda: {"stats": asdict(stats)}) if stats is not None else None,
                                    defer=True)
                return o.bytes

            try:
                with worker_pool(workers) as pool:
                    written_bytes = sum(pool.map(one, todo))
            finally:
                staged.flush()  # one fsync per file, then the markers of every object completed
                staged.close()
    return {"written": todo, "skipped": skipped, "bytes": written_bytes,
            "seconds": round(time.perf_counter() - started, 3)}


def _counted(oid: str, chunks, progress) -> Iterator:
    for chunk in chunks:
        progress(oid, memoryview(chunk).nbytes)
        yield chunk


def pending(plan_path: str | Path) -> list[str]:
    """IDs of the planned objects not yet written, in directory order."""
    return StagedArtifact.open(PlanFile.load(plan_path).staging).missing()


def seal(plan_path: str | Path) -> dict:
    """Publish the staged artifact; returns the conversion summary (as ``convert --json`` prints it)."""
    pf = PlanFile.load(plan_path)
    staged = StagedArtifact.open(pf.staging)
    markers = staged.markers()
    missing = [o["id"] for o in pf.objects if o["id"] not in markers]
    if missing:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise ConversionError(f"{len(missing)} object(s) not written yet: {shown}; run convert encode "
                              f"{plan_path} first", file=str(plan_path), rule="coverage_incomplete")
    provenance = copy.deepcopy(staged.plan.root["provenance"])
    errors = {}
    for o in pf.objects:
        if o["measure"]:
            stats = _stats_from(markers[o["id"]]["note"]["stats"])
            errors[o["id"]] = stats
            # keys already in place: the reserved record; the exactness label is the plan's (exactness.py)
            provenance["objects"][o["id"]]["measured_error"] = stats.to_json()
    entry_path = staged.seal(provenance=provenance)
    return _summary(pf, staged, errors, entry_path)


def _stats_from(raw: dict) -> ErrorStats:
    """An :class:`ErrorStats` back from its ``asdict`` form (nested records included); floats survive JSON
    exactly (``repr`` round trip), so the sealed provenance equals the in-process one."""
    return ErrorStats(**{k: _stats_from(v) if isinstance(v, dict) else v for k, v in raw.items()})


def _summary(pf: PlanFile, staged: StagedArtifact, errors: dict[str, ErrorStats], entry: Path) -> dict:
    out = dict(pf.summary)  # its exactness counts are the plan's labels, as written (exactness.py)
    total = sum(o["bytes"] for o in pf.objects)
    seconds = time.time() - pf.created
    out.update(dry_run=False, artifact_id=staged.artifact_id.hex(),
               files=[str(entry)] + [str(entry.parent / n) for n in staged.plan.names[1:]],
               seconds=round(seconds, 3), bytes_per_second=round(total / seconds) if seconds > 0 else None)
    worst = [(k, v) for k, v in errors.items() if not v.exact]
    out.pop("worst_cosine", None)
    if worst:
        k, v = min(worst, key=lambda kv: kv[1].cosine)
        out["worst_cosine"] = {"object": k, **v.to_json()}
    return out


def discard(plan_path: str | Path) -> None:
    """Remove the staged files of a plan without publishing anything."""
    StagedArtifact.open(PlanFile.load(plan_path).staging).discard()
