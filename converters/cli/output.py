"""Shared pieces of every ``convert`` command: the typer app, one output sink (JSON or rich tables),
error reporting on stderr, and the progress bar for long work.

Commands print machine output with :func:`emit_json` (stdout, exactly one JSON document) and human
output with :data:`console` (stdout) — never both; diagnostics and errors go to :data:`err_console`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

app = typer.Typer(
    name="convert",
    help="Convert GGUF / safetensors Qwen checkpoints into NInfer v3 artifacts, and prove them right.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

console = Console()
err_console = Console(stderr=True)


def command(name: str | None = None, **kwargs: Any) -> Callable:
    """Register a function as a ``convert`` sub-command."""
    return app.command(name=name, **kwargs)


def emit_json(obj: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=_json_default))
    sys.stdout.write("\n")
    sys.stdout.flush()


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, bytes):
        return o.hex()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def report_error(exc: BaseException | str) -> None:
    """One readable line (plus the typed fields) on stderr."""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)


def table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*["" if v is None else str(v) for v in r])
    return t


def byte_progress(disable: bool = False) -> Progress:
    """A rich progress bar for byte-counted work (objects written, bytes hashed), on stderr."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=disable,
        transient=False,
    )


@app.callback()
def _root() -> None:
    """Convert GGUF / safetensors Qwen checkpoints into NInfer v3 artifacts, and prove them right."""
