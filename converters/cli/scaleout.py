"""``convert encode PLAN`` and ``convert seal PLAN``: the scale-out steps after ``gguf2ninfer … --plan-only PLAN``.

A conversion split in three (:mod:`converters.scaleout`): the plan step (``convert gguf2ninfer`` /
``st2ninfer`` with ``--plan-only PLAN.json``) stages the pre-allocated files beside the output and writes
the plan file; ``convert encode`` writes objects into them — all that are missing, the ``--objects`` named,
or share ``--shard K/N`` (run one share per machine over a shared file system) — and ``convert seal``
checks that every object is written and publishes the artifact, byte-identical to a one-process
conversion with the same ``--artifact-id`` / ``--artifact-id-from-content``. ``--backend dask`` on the
conversion command runs all three at once with the encode step on a Dask cluster
(:func:`converters.scaleout.run.run_staged`).

Examples::

    convert gguf2ninfer big.gguf /shared/out/m.ninfer --recipe exact --artifact-id-from-content --plan-only /shared/m.plan.json
    convert encode /shared/m.plan.json --shard 1/3        # on machine 1 (2/3, 3/3 on the others)
    convert seal /shared/m.plan.json
    convert gguf2ninfer big.gguf /shared/out/m.ninfer --backend dask --scheduler tcp://head:8786
"""

from __future__ import annotations

from pathlib import Path

import typer

from converters.cli.output import byte_progress, command, console, emit_json, table


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    k, sep, n = text.partition("/")
    try:
        out = (int(k), int(n))
    except ValueError:
        out = None
    if not sep or out is None or not 1 <= out[0] <= out[1]:
        raise typer.BadParameter(f"expected K/N with 1 <= K <= N, got {text!r}", param_hint="--shard")
    return out


@command("encode")
def encode_cmd(
    plan: Path = typer.Argument(..., help="Plan file written by --plan-only.", show_default=False),
    objects: str = typer.Option(None, "--objects", help="Comma-separated object IDs to write (default: all missing)."),
    shard: str = typer.Option(None, "--shard", help="Write share K of N byte-balanced shares, e.g. 2/4."),
    workers: int = typer.Option(None, "--workers", help="Worker threads (default: min(4, CPUs))."),
    redo: bool = typer.Option(False, "--redo", help="Write the chosen objects again even if already written."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Write objects of a staged conversion at their planned offsets (any machine that sees the files)."""
    from converters.scaleout.run import encode_staged

    ids = [s.strip() for s in objects.split(",") if s.strip()] if objects is not None else None
    chosen = parse_shard(shard)
    progress = byte_progress(disable=json_out)
    tasks = []

    def start() -> None:  # the bar appears once the plan file is read
        progress.start()
        tasks.append(progress.add_task("encode", total=None))

    try:
        run = encode_staged(plan, objects=ids, shard=chosen, workers=workers, redo=redo, on_start=start,
                            progress=lambda _oid, n: progress.advance(tasks[0], n))
    finally:
        if tasks:  # started
            progress.stop()
    out = run.to_json()
    if json_out:
        emit_json(out)
        return
    rows = [["written", f"{out['written']} objects, {out['bytes']:,} bytes"], ["skipped (already written)",
            out["skipped"]], ["still missing", f"{out['pending']} objects, {run.pending_bytes:,} bytes"],
            ["seconds", out["seconds"]]]
    console.print(table(f"encode {plan.name}", ["", "value"], rows))
    if not run.pending:
        console.print(f"complete: convert seal {plan}")


@command("seal")
def seal_cmd(
    plan: Path = typer.Argument(..., help="Plan file written by --plan-only.", show_default=False),
    discard: bool = typer.Option(False, "--discard", help="Remove the staged files instead; publish nothing."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Check that every object of a staged conversion is written, then publish the artifact."""
    from converters.cli.convert import print_summary
    from converters.scaleout import job

    if discard:
        job.discard(plan)
        if json_out:
            emit_json({"discarded": str(plan)})
        else:
            console.print(f"discarded the staged files of {plan}")
        return
    summary = job.seal(plan)
    if json_out:
        emit_json(summary)
    else:
        print_summary(summary)
