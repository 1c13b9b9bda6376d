"""The ``convert`` command line (typer + rich).

Each command lives in its own module under ``converters/cli/`` and registers itself on :data:`app`
through :func:`converters.cli.output.command`. A command parses its arguments, makes one library call
and renders the result: what a path holds is :mod:`converters.sources.kind`'s to say, report files are
written by :mod:`converters.sources.atomic_write`, conversions run through
:func:`converters.scaleout.run.run_conversion`. This module only assembles the commands and runs the one
error table: our typed errors (:class:`ninfer_core.errors.NinferError`, which the converters' errors extend)
become one line on stderr and exit code 1 (2 for usage); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import importlib
import sys

from converters.cli.output import app, report_error

# The command modules, in help order. Adding a command = adding its module name here.
COMMAND_MODULES: tuple[str, ...] = (
    "version",
    "repack",
    "inspect",
    "validate",
    "convert",
    "check",
    "verify",
    "scaleout",
    "regress",
)


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"converters.cli.{name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``convert`` console script: runs the app, maps our typed errors to exit 1."""
    from ninfer_core.errors import NinferError

    _load_commands()
    try:
        app(args=argv, standalone_mode=True)
    except SystemExit as exc:  # typer's own exits: --help, usage errors (2), Ctrl-C (1)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except NinferError as exc:
        report_error(exc)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
