"""``convert report ARTIFACT -o report.html [--source SRC] [--json]``: the conversion report (docs/report.md).

One library call (:func:`converters.report.write_report`); with ``--source`` the verify gates run first
(:func:`converters.acceptance.accept.accept_written`) and their verdict per gate is in the page. The
output is refused if it exists, before anything is read.
"""

from __future__ import annotations

from pathlib import Path

import typer

from converters.cli.output import command, console, emit_json, gate_progress


@command("report")
def report_command(
    artifact: Path = typer.Argument(..., help="Entry file of the artifact.", show_default=False),
    output: Path = typer.Option(..., "-o", "--output", help="HTML file to write (never overwritten).",
                                show_default=False),
    source: Path = typer.Option(None, "--source", help="Run verify against this source first and show its "
                                "verdict per gate."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output (the report's facts)."),
) -> None:
    """Write one self-contained HTML report of an artifact: bytes, bits per weight, per-layer error,
    exactness map, verify verdict, recipe, overrides and importance matrix."""
    from converters.report import write_report
    from converters.sources.atomic_write import refuse_existing
    from ninfer_core.errors import ArtifactExistsError

    refuse_existing(output, lambda: ArtifactExistsError(f"{output.name} already exists; it is never overwritten",
                                                        file=str(output), rule="target_exists"))
    acceptance = None
    if source is not None:
        from converters.acceptance.accept import accept_written

        with gate_progress(disable=json_out) as bar:
            acceptance = accept_written(artifact, source, progress=bar).to_json()
    facts = write_report(artifact, output, acceptance=acceptance)
    if json_out:
        emit_json({"report": str(output), **{k: v for k, v in facts.items() if k != "schema"}})
        return
    console.print(f"report: {output} ({len(facts['objects'])} tensor objects, recipe {facts['recipe']})",
                  highlight=False)
