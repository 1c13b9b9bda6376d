"""``convert mcp``: serve inspection to MCP clients over stdio (docs/inspect.md §MCP).

Register it with a client as the command ``convert`` with the argument ``mcp``; the server speaks MCP on
stdin/stdout until the client closes it. The tools: ``inspect_model_artifact``, ``inspect_analysis_view``,
``import_evidence_bundle`` and ``release_evidence``. Every path they read lies inside the roots
(``--root``, default the working directory; docs/inspect.md §MCP roots).
"""

from __future__ import annotations

from pathlib import Path

import typer

from converters.cli.output import command


@command("mcp")
def mcp_cmd(
    root: list[Path] = typer.Option(None, "--root", help="A directory the tools may read (repeatable; symlinks "
                                    "resolved). Default: the working directory. The client's MCP roots, when "
                                    "it declares them, narrow these further. docs/inspect.md §MCP roots."),
) -> None:
    """Serve inspect_model_artifact, inspect_analysis_view, import_evidence_bundle and release_evidence
    to an MCP client over stdio, reading only inside the roots."""
    from converters.inspect.mcp_server import serve
    from converters.inspect.roots import Roots

    serve(Roots(root or [Path.cwd()]))
