"""A conversion as the commands run it: here, or staged (``--plan-only`` / ``--backend dask``).

:func:`run_conversion` is the one library call of ``convert gguf2ninfer`` / ``st2ninfer``: with neither
``plan_only`` nor ``backend="dask"`` in its :class:`~converters.pipeline.convert.ConvertOptions` it is
:func:`converters.pipeline.convert.convert_with` (this process, a thread pool); otherwise
:func:`run_staged` splits the same conversion into the three steps of :mod:`converters.scaleout.job`:

- ``plan_only``: stage the pre-allocated files and write the plan file, encode nothing (the user runs
  ``convert encode`` and ``convert seal`` later, anywhere the files are visible);
- ``backend="dask"``: stage (the plan file inside the staging directory), encode every object on a Dask
  cluster (:mod:`converters.scaleout.dask_backend`), seal. A failed encode keeps the staged files so the
  run can be resumed; ``on_kept`` is told how.

Both give the bytes of the one-process conversion with the same options.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from converters.errors import ConversionError
from converters.pipeline.convert import ConvertOptions, Result, convert_with, output_parent
from converters.scaleout import job
from converters.scaleout.planfile import PlanFile, Request
from ninfer_core.container.staging import staging_dir_for

PLAN_NAME = "convert-plan.json"  # the plan file of a --backend dask run, inside the staging directory


@dataclass
class StagedRun:
    """What a staged conversion did: ``staged`` (``plan_only``: the plan file, staging directory, output,
    object count, total bytes and fingerprint; nothing encoded) or ``summary`` (``backend="dask"``: the
    sealed conversion's summary, the fields of :meth:`converters.pipeline.convert.Result.summary`)."""

    plan: Path
    staged: dict | None = None
    summary: dict | None = None


def resume_hint(plan_path: str | Path) -> str:
    """How to go on with staged files kept after a failed encode."""
    return (f"staged files kept: resume with convert encode {plan_path} and convert seal {plan_path}, or drop "
            f"them with convert seal {plan_path} --discard")


def run_conversion(options: ConvertOptions, *, on_plan: Callable[[list], None] | None = None,
                   progress: Callable[[str, int], None] | None = None,
                   on_kept: Callable[[str], None] | None = None) -> Result | StagedRun:
    """Run the conversion ``options`` describe: a :class:`~converters.pipeline.convert.Result` when it ran
    here (``on_plan`` / ``progress`` as for :func:`~converters.pipeline.convert.convert`), a
    :class:`StagedRun` when staged (``on_kept`` as for :func:`run_staged`). The output is refused before
    anything is read, either way."""
    if not options.staged:
        return convert_with(options, on_plan=on_plan, progress=progress)
    if options.dry_run:
        raise ConversionError("a dry run writes nothing; it excludes plan_only and backend dask",
                              rule="options_conflict")
    with output_parent(Path(options.output), source=options.source):
        o = options.resolved()
        request = Request.make(o.source, o.output, kind=o.kind, recipe=o.recipe, template=o.template,
                               max_file_bytes=o.max_file_bytes, only_layer=o.only_layer, components=o.components,
                               inputs=o.inputs, proposal=o.proposal, artifact_id=o.artifact_id,
                               artifact_id_from_content=o.artifact_id_from_content,
                               format_overrides=o.format_overrides)
        return run_staged(request, plan_only=o.plan_only, backend=o.backend, scheduler=o.scheduler,
                          workers=o.workers, on_kept=on_kept)


def run_staged(request: Request, *, plan_only: Path | None, backend: str = "local", scheduler: str | None = None,
               workers: int | None = None, on_kept: Callable[[str], None] | None = None) -> StagedRun:
    """Stage ``request`` and stop (``plan_only``: the plan file to write), or with ``backend="dask"`` run
    every step, encoding on the cluster at ``scheduler`` (default: a local one of ``workers`` processes).
    When that encode fails the staged files stay and ``on_kept`` gets :func:`resume_hint` before the error
    propagates."""
    if plan_only is None and backend != "dask":
        raise ConversionError(f"backend {backend!r} does not stage; give plan_only or backend dask",
                              rule="options_conflict")
    plan_path = Path(plan_only) if plan_only is not None else staging_dir_for(request.output) / PLAN_NAME
    pf = job.stage(request, plan_path)
    if plan_only is not None:
        return StagedRun(plan_path, staged={
            "plan": str(plan_path.resolve()), "staging": pf.staging, "output": request.output,
            "objects": len(pf.objects), "total_bytes": sum(o["bytes"] for o in pf.objects),
            "fingerprint": pf.fingerprint})
    from converters.scaleout.dask_backend import encode_on_dask

    try:
        encode_on_dask(plan_path, scheduler=scheduler, workers=workers)
    except BaseException:
        if on_kept is not None:
            on_kept(resume_hint(plan_path))
        raise
    return StagedRun(plan_path, summary=job.seal(plan_path))


@dataclass
class EncodeRun:
    """What ``convert encode`` did: :func:`converters.scaleout.job.encode`'s report, and the objects of the
    plan still missing afterwards with their planned bytes."""

    report: dict
    pending: list[str]
    pending_bytes: int

    def to_json(self) -> dict:
        """The ``convert encode --json`` document: counts instead of the written / skipped ID lists."""
        return {**self.report, "written": len(self.report["written"]), "skipped": len(self.report["skipped"]),
                "pending": len(self.pending), "pending_objects": self.pending}


def encode_staged(plan_path: str | Path, *, objects: list[str] | None = None, shard: tuple[int, int] | None = None,
                  workers: int | None = None, redo: bool = False, on_start: Callable[[], None] | None = None,
                  progress: Callable[[str, int], None] | None = None) -> EncodeRun:
    """:func:`converters.scaleout.job.encode` (same parameters), then what is still missing. ``on_start()``
    is called once the plan file has been read and checked, before encoding."""
    sizes = {o["id"]: o["bytes"] for o in PlanFile.load(plan_path).objects}
    if on_start is not None:
        on_start()
    report = job.encode(plan_path, objects=objects, shard=shard, workers=workers, redo=redo, progress=progress)
    left = job.pending(plan_path)
    return EncodeRun(report, left, sum(sizes[i] for i in left))
