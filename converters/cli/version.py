"""``convert version``: the converter version, as recorded in every artifact's provenance."""

from __future__ import annotations

import typer

from converters.cli.output import command, show_version


@command("version")
def version(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Print the converter version."""
    show_version(json_out)
