"""``convert validate PATH``: static acceptance, one ``validation.json`` for every package kind.

One library call, :func:`converters.acceptance.validate_path.validate_to`: the kind is detected by
content (never by name alone; :mod:`converters.sources.kind`), a calbin NPU package goes to its
validator, a file or directory of another model kind is refused naming the command that reads it, and
anything else is handed to the ``.ninfer`` validator.

Exit status: 0 for ``pass`` and ``pass_with_warnings``, 1 for ``fail`` or a typed error, 2 for usage.
Every validation writes its report: ``-o FILE`` (refused before validating if it exists), else
``validation.json`` in the working directory (``validation-2.json``… when taken; docs/validation-report.md
§Where the report goes), atomically (:mod:`converters.sources.atomic_write`): no partial report is ever
published and none is overwritten.
"""

from __future__ import annotations

from pathlib import Path

import typer

from converters.cli.output import command, console, emit_json

EXAMPLES = """
Examples:

  convert validate ./Qwen3-30B-A3B_b1_s40960                 # calbin package, rich tables
  convert validate ./pkg --json --sanitized                  # shareable JSON (no vaddr/abs paths/command addresses)
  convert validate ./pkg -o validation.json --context 32768  # KV bytes for a 32k service context
  convert validate model.ninfer --json
"""


@command("validate", epilog=EXAMPLES)
def validate(
    path: Path = typer.Argument(..., help="A calbin package directory or a .ninfer artifact."),
    json_out: bool = typer.Option(False, "--json", help="Print validation.json on stdout."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write validation.json here (must not exist); "
                                       "default validation.json in the working directory, or validation-2.json… "
                                       "when taken."),
    sanitized: bool = typer.Option(False, "--sanitized", help="Shareable report: no device/command addresses, no absolute paths."),
    context: int | None = typer.Option(None, "--context", min=1, help="Service context for the KV-cache figure (default: the package's)."),
    batch: int | None = typer.Option(None, "--batch", min=1, help="Service batch for the KV-cache figure (default: the package's)."),
    fast: bool = typer.Option(False, "--fast", help="calbin: do not hash the parameter blocks (daily development)."),
) -> None:
    """Static acceptance (Gates A-F) of a calbin NPU package or a .ninfer artifact; verdict pass / pass_with_warnings / fail."""
    from converters.acceptance.validate_path import validate_to

    report, doc, written = validate_to(path, output=output, sanitized=sanitized, context=context, batch=batch,
                                       fast=fast)
    if json_out:
        emit_json(doc)
    else:
        from converters.acceptance.report import render

        render(report, console, sanitized=sanitized)
        console.print(f"report: {written}", highlight=False, markup=False)
    if report.verdict == "fail":
        raise typer.Exit(1)
