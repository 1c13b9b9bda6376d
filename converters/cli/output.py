"""Shared pieces of every ``convert`` command: the typer app, one output sink (JSON or rich tables),
error reporting on stderr, and the progress bars for long work (bytes written; acceptance gates).

Commands print machine output with :func:`emit_json` (stdout, exactly one JSON document) and human
output with :data:`console` (stdout) — never both; diagnostics and errors go to :data:`err_console`.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
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
    """A command-line usage error (a click ``UsageError``): one line on stderr naming the command's help
    (docs/cli.md §Errors), and with ``json_out`` the error document (code ``usage``) on stdout."""
    param = getattr(exc, "param", None)
    ctx = getattr(exc, "ctx", None)
    where = f" (see {ctx.command_path} --help)" if ctx is not None and not json_out else ""
    err_console.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(where)}", highlight=False,
                      soft_wrap=True)
    if not json_out:
        return
    doc = error_document(exc, code="usage", category="usage")
    doc["error"].update(message=exc.format_message(), rule="command_line",
                        field=getattr(exc, "param_hint", None) or (param.opts[0] if param is not None and
                                                                   getattr(param, "opts", None) else None))
    emit_json(doc)


_interrupt = {"reported": False, "how": "Ctrl-C"}


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as Ctrl-C is (a ``KeyboardInterrupt``), so writers abort and records are marked."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


@contextlib.contextmanager
def interrupts():
    """Inside the block SIGTERM ends the command as Ctrl-C does (:class:`Terminated`); the previous handler
    comes back after it. In a thread other than the main one (where no handler can be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        _interrupt["how"] = signal.Signals(signum).name
        raise Terminated(_interrupt["how"])

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_name(exc: BaseException | None = None) -> str:
    """How the command was interrupted: ``Ctrl-C`` or the signal's name (``SIGTERM``)."""
    return getattr(exc, "signal_name", None) or _interrupt["how"]


def interrupt_reported() -> None:
    """A command that handled Ctrl-C itself (and printed its one line) says so: the entry point adds nothing."""
    _interrupt["reported"] = True


def report_interrupt(*, json_out: bool = False) -> None:
    """Ctrl-C (or SIGTERM): one line on stderr (nothing half-written is published: outputs are committed
    last; a command that published something reports that itself and calls :func:`interrupt_reported`)."""
    how, _interrupt["how"] = _interrupt["how"], "Ctrl-C"
    if _interrupt["reported"]:
        _interrupt["reported"] = False
        return
    err_console.print(f"interrupted ({how}): nothing was published", highlight=False)
    if json_out:
        emit_json(interrupt_document(f"interrupted ({how})"))


def interrupt_document(message: str, file: str | None = None) -> dict:
    """The ``ninfer-error/v1`` document of an interrupt (code ``interrupted``)."""
    return {"schema": ERROR_SCHEMA, "error": {"code": "interrupted", "category": "interrupted", "rule": None,
                                              "file": file, "field": None, "section": None, "message": message}}


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


def _print_version(ctx, value: bool) -> None:
    if value:
        show_version("--json" in ((ctx.obj or {}).get("argv") or ()))  # ``--version --json``: as ``version --json``
        raise typer.Exit()


def show_version(json_out: bool) -> None:
    """The version, as ``convert version`` and ``convert --version`` print it (``ninfer-version/v1``)."""
    from converters import __version__

    if json_out:
        emit_json({"name": "ninfer-convert", "version": __version__}, schema="ninfer-version/v1")
    else:
        console.print(f"ninfer-convert {__version__}", highlight=False)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print the converter version and exit (as convert version)."),
          json_out: bool = typer.Option(False, "--json", help="With --version: the version as JSON.")) -> None:
    """Convert GGUF / safetensors Qwen checkpoints into NInfer v3 artifacts, and prove them right."""
