"""Shared pieces of every ``convert`` command: the typer app, one output sink (JSON or rich tables),
error reporting on stderr, and the progress bars for long work (bytes written; acceptance gates).

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
    TimeElapsedColumn,
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
ERROR_SCHEMA = "ninfer-error/v1"


def command(name: str | None = None, **kwargs: Any) -> Callable:
    """Register a function as a ``convert`` sub-command."""
    return app.command(name=name, **kwargs)


def emit_json(obj: Any, *, schema: str | None = None) -> None:
    """Write one JSON document to stdout. A document without a ``schema`` field gets ``schema`` (default
    ``ninfer-<command>/v1``, the running command's name) as its first field (docs/cli.md §JSON contract)."""
    if isinstance(obj, dict) and "schema" not in obj:
        obj = {"schema": schema or command_schema(), **obj}
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=_json_default))
    sys.stdout.write("\n")
    sys.stdout.flush()


def click_module():
    """The click typer runs on (typer ≥ 0.24 carries its own copy; older typers use click)."""
    try:
        from typer import _click as click
    except ImportError:  # pragma: no cover - older typer
        import click
    return click


def command_schema() -> str:
    """``ninfer-<command>/v1`` for the command being run (``ninfer-convert/v1`` outside one)."""
    ctx = click_module().globals.get_current_context(silent=True)
    name = ctx.info_name if ctx is not None and ctx.parent is not None else "convert"
    return f"ninfer-{name}/v1"


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


def error_document(exc: BaseException, *, code: str | None = None, category: str | None = None) -> dict:
    """The ``ninfer-error/v1`` document of an error (docs/cli.md §Errors): the typed fields of the stderr line;
    an inspection rejection carries the public code, category and constraint the MCP tools use
    (docs/inspect.md §Rejections)."""
    from converters.inspect.rejections import public_fields

    public = {} if code or category else public_fields(exc)
    doc = {
        "code": code or getattr(exc, "code", None) or getattr(exc, "kind", "error"),
        "category": category or getattr(exc, "category", None) or getattr(exc, "kind", "error"),
        "rule": getattr(exc, "rule", None), "file": getattr(exc, "file", None),
        "field": getattr(exc, "json_path", None), "section": getattr(exc, "section", None),
        "message": getattr(exc, "message", None) or str(exc)}
    return {"schema": ERROR_SCHEMA, "error": {**doc, **public}}


def report_error(exc: BaseException | str, *, json_out: bool = False) -> None:
    """One readable line (plus the typed fields) on stderr; with ``json_out`` also the error document on stdout."""
    err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True)
    if json_out and isinstance(exc, BaseException):
        emit_json(error_document(exc))


def report_usage_error(exc, *, json_out: bool = False) -> None:
    """A command-line usage error (a click ``UsageError``): typer's panel, or with ``json_out`` one line on
    stderr and the error document (code ``usage``) on stdout."""
    if not json_out:
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        return
    param = getattr(exc, "param", None)
    err_console.print(f"[bold red]error:[/] {escape(exc.format_message())}", highlight=False, soft_wrap=True)
    doc = error_document(exc, code="usage", category="usage")
    doc["error"].update(message=exc.format_message(), rule="command_line",
                        field=getattr(exc, "param_hint", None) or (param.opts[0] if param is not None and
                                                                   getattr(param, "opts", None) else None))
    emit_json(doc)


_interrupt = {"reported": False}


def interrupt_reported() -> None:
    """A command that handled Ctrl-C itself (and printed its one line) says so: the entry point adds nothing."""
    _interrupt["reported"] = True


def report_interrupt(*, json_out: bool = False) -> None:
    """Ctrl-C: one line on stderr (nothing half-written is published: outputs are committed last)."""
    if _interrupt["reported"]:
        _interrupt["reported"] = False
        return
    err_console.print("interrupted (Ctrl-C): nothing was published", highlight=False)
    if json_out:
        emit_json({"schema": ERROR_SCHEMA, "error": {"code": "interrupted", "category": "interrupted", "rule": None,
                                                     "file": None, "field": None, "section": None,
                                                     "message": "interrupted (Ctrl-C)"}})


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


class GateBars:
    """The acceptance bar (:class:`~converters.acceptance.progress.GateProgress`): one line per gate, ``verify 4/7
    values``, with its steps where the gate counts them and its elapsed time; a finished gate keeps its line
    with its status and seconds (docs/acceptance.md §Progress). A context manager: the bar shows only inside
    it, and only when ``disable`` is false."""

    def __init__(self, disable: bool = False) -> None:
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[count]}"),
                            TimeElapsedColumn(), console=err_console, disable=disable, transient=False)
        self.task = None
        self.n_gates = 0

    def __enter__(self) -> GateBars:
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def start(self, kind: str, label: str, title: str) -> None:
        from converters.acceptance.registry import gates_of

        self.n_gates = len(gates_of(kind))
        self.task = self.bar.add_task(f"{kind} {label}/{self.n_gates} {title}", total=None, count="")

    def step(self, done: int, total: int) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=done, total=total, count=f"{done}/{total}")

    def finish(self, label: str, status: str, seconds: float) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=1, total=1, count=status)
            self.task = None


def gate_progress(disable: bool = False) -> GateBars:
    """The acceptance bar on stderr (:class:`GateBars`)."""
    return GateBars(disable=disable)


def _print_version(value: bool) -> None:
    if value:
        from converters import __version__

        console.print(f"ninfer-convert {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print the converter version and exit (as convert version).")) -> None:
    """Convert GGUF / safetensors Qwen checkpoints into NInfer v3 artifacts, and prove them right."""
