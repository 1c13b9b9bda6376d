"""``convert version``: the converter version, as recorded in every artifact's provenance."""

from __future__ import annotations

import typer

from converters import __version__
from converters.cli.output import command, console, emit_json


@command("version")
def version(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the converter version."""
    if json_out:
        emit_json({"name": "ninfer-convert", "version": __version__})
    else:
        console.print(f"ninfer-convert {__version__}")
