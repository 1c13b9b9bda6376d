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

import functools
import importlib
import sys

from converters.cli.output import app, click_module, report_error, report_interrupt, report_usage_error

# The command modules, in help order. Adding a command = adding its module name here.
COMMAND_MODULES: tuple[str, ...] = (
    "inspect",
    "convert",
    "verify",
    "validate",
    "check",
    "repack",
    "catalogue",
    "scaleout",
    "regress",
    "version",
    "mcp",
    "report",
)


#: the commands in ``convert --help`` order: the newcomer's path first (docs/cli.md §Commands).
HELP_ORDER: tuple[str, ...] = ("inspect", "gguf2ninfer", "st2ninfer", "verify", "validate", "check", "repack",
                               "recipes", "formats", "encode", "seal", "regress", "version", "mcp", "report")


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"converters.cli.{name}")
    # modules may be imported in any order (a command module imports another's helpers): sort for the help
    rank = {n: i for i, n in enumerate(HELP_ORDER)}
    app.registered_commands.sort(key=lambda c: rank.get(c.name or c.callback.__name__, len(rank)))


@functools.cache
def _command():
    """The click command of :data:`app`, built once per process (typer builds it anew on every call of the app:
    about 15 ms; ``pretty_exceptions_enable`` is off, so calling it directly changes nothing else)."""
    import typer.main

    _load_commands()
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``convert`` console script (docs/cli.md §Errors): our typed errors (and running out
    of memory) exit 1 with one line on stderr, usage errors exit 2, Ctrl-C exits 130 with one line; with ``--json`` each of them
    is also one ``ninfer-error/v1`` document on stdout."""
    import typer

    from ninfer_core.errors import NinferError, ResourceError

    exceptions = click_module().exceptions

    args = list(sys.argv[1:] if argv is None else argv)
    json_out = "--json" in args
    try:
        code = _command()(args=args, standalone_mode=False, obj={"argv": args})
    except NinferError as exc:
        report_error(exc, json_out=json_out)
        return 1
    except MemoryError:  # the host's limit, not a bug: one typed line (docs/robustness.md §Promises)
        report_error(ResourceError("out of memory (raise the memory limit, e.g. ulimit -v, or use fewer --workers); "
                                   "an artifact already published stays whole", rule="memory",
                                   section="docs/robustness.md §Promises"), json_out=json_out)
        return 1
    except exceptions.ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # ``convert`` alone: the help
            exc.show()
        else:
            report_usage_error(exc, json_out=json_out)
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        report_interrupt(json_out=json_out)
        return 130
    if code == 130:  # typer turns a KeyboardInterrupt inside a command into Exit(130)
        report_interrupt(json_out=json_out)
    return code if isinstance(code, int) else 0


def inspect_model_artifact_main() -> int:
    """The ``inspect-model-artifact`` console script: ``convert inspect`` under the name the inspection
    contract gives it (docs/inspect.md §MCP)."""
    return main(["inspect", *sys.argv[1:]])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
