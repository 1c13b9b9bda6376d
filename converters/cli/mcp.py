"""``convert mcp``: serve inspection to MCP clients over stdio (docs/inspect.md §MCP).

Register it with a client as the command ``convert`` with the argument ``mcp``; the server speaks MCP on
stdin/stdout until the client closes it. The tools: ``inspect_model_artifact``, ``inspect_analysis_view``,
``import_evidence_bundle`` and ``release_evidence``.
"""

from __future__ import annotations

from converters.cli.output import command


@command("mcp")
def mcp_cmd() -> None:
    """Serve inspect_model_artifact, inspect_analysis_view, import_evidence_bundle and release_evidence
    to an MCP client over stdio."""
    from converters.inspect.mcp_server import serve

    serve()
