"""``convert version``: the converter version, as recorded in every artifact's provenance."""

from __future__ import annotations

import typer

from converters import __version__
from converters.cli.output import command, console, emit_json


@command("version")
def version(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the converter version."""
    show(json_out)


def show(json_out: bool) -> None:
    """The version, as ``convert version`` and ``convert --version`` print it (``ninfer-version/v1``)."""
    if json_out:
        emit_json({"name": "ninfer-convert", "version": __version__}, schema="ninfer-version/v1")
    else:
        console.print(f"ninfer-convert {__version__}", highlight=False)
