"""``convert validate PATH``: static acceptance, one ``validation.json`` for every package kind.

The kind is detected by content (never by name alone): a directory holding ``model_memory_reserved_info.txt``
and a root ``<model>.yaml`` is a calbin NPU package (seed 004); anything else is handed to the ``.ninfer``
validator, ``converters.acceptance.validate_ninfer.validate_ninfer(path, *, context=None, batch=None)``.

Exit status: 0 for ``pass`` and ``pass_with_warnings``, 1 for ``fail`` or a typed error, 2 for usage.
``-o FILE`` refuses an existing file and is written atomically (temporary file, then rename), so no
partial report is ever published.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from pathlib import Path

import typer

from converters.cli.output import command, console, emit_json
from converters.errors import ConverterError

EXAMPLES = """
Examples:

  convert validate ./Qwen3-30B-A3B_b1_s40960                 # calbin package, rich tables
  convert validate ./pkg --json --sanitized                  # shareable JSON (no vaddr/abs paths/command addresses)
  convert validate ./pkg -o validation.json --context 32768  # KV bytes for a 32k service context
  convert validate model.ninfer --json
"""


def validate_path(path: Path, *, context: int | None = None, batch: int | None = None, fast: bool = False):
    """Detect the package kind and run its validator; returns a :class:`converters.acceptance.report.Report`."""
    from converters.acceptance.calbin import is_calbin_package, validate_calbin

    try:
        path.lstat()
    except OSError as exc:
        raise ConverterError(f"path cannot be used: {exc.strerror or exc}", file=str(path),
                             rule="validate_target") from None
    if is_calbin_package(path):
        return validate_calbin(path, context=context, batch=batch, fast=fast)
    if fast:
        raise ConverterError("--fast applies to calbin packages only", file=str(path), rule="validate_options")
    try:
        module = importlib.import_module("converters.acceptance.validate_ninfer")
    except ModuleNotFoundError as exc:
        if exc.name not in ("converters.acceptance.validate_ninfer",):
            raise
        raise ConverterError(
            "not a calbin package (no model_memory_reserved_info.txt with a root <model>.yaml), and .ninfer "
            "validation is not available in this build (converters.acceptance.validate_ninfer is missing)",
            file=str(path), rule="validate_kind") from None
    return module.validate_ninfer(path, context=context, batch=batch)


def _write_atomic(target: Path, doc: dict) -> None:
    if target.exists() or target.is_symlink():
        raise ConverterError("output file exists; choose another path or remove it", file=str(target),
                             rule="output_exists")
    parent = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    exists = ConverterError("output file exists; choose another path or remove it", file=str(target),
                            rule="output_exists")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
        try:
            os.link(tmp, target)  # atomic and refuses a target that appeared meanwhile
        except FileExistsError:
            raise exists from None
        except OSError:  # a filesystem without hard links
            if target.exists():
                raise exists from None
            os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@command("validate", epilog=EXAMPLES)
def validate(
    path: Path = typer.Argument(..., help="A calbin package directory or a .ninfer artifact."),
    json_out: bool = typer.Option(False, "--json", help="Print validation.json on stdout."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Also write validation.json here (must not exist)."),
    sanitized: bool = typer.Option(False, "--sanitized", help="Shareable report: no device/command addresses, no absolute paths."),
    context: int | None = typer.Option(None, "--context", min=1, help="Service context for the KV-cache figure (default: the package's)."),
    batch: int | None = typer.Option(None, "--batch", min=1, help="Service batch for the KV-cache figure (default: the package's)."),
    fast: bool = typer.Option(False, "--fast", help="calbin: do not hash the parameter blocks (daily development)."),
) -> None:
    """Static acceptance (Gates A-F) of a calbin NPU package or a .ninfer artifact; verdict pass / pass_with_warnings / fail."""
    if output is not None and (output.exists() or output.is_symlink()):
        raise ConverterError("output file exists; choose another path or remove it", file=str(output),
                             rule="output_exists")
    report = validate_path(path, context=context, batch=batch, fast=fast)
    doc = report.to_json(sanitized=sanitized)
    if output is not None:
        _write_atomic(output, doc)
    if json_out:
        emit_json(doc)
    else:
        from converters.acceptance.report import render

        render(report, console, sanitized=sanitized)
    if report.verdict == "fail":
        raise typer.Exit(1)
