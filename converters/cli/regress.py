"""``convert regress [CASE ...] [--update] [--json]``: the recipe regression suite (:mod:`converters.regress`;
one library call, :func:`converters.regress.suite.run_suite`).

Every case of ``recipes/regression.yaml`` (or ``--cases FILE``) is converted from its generated fixture,
accepted by ``convert verify`` and compared object by object with its expectation
(``recipes/regression/expected/<case>.json``). Exit 0 when every case passes, 1 otherwise; a changed case
prints a table of the objects that changed and how (format / layout / shape / bytes / content, decoded
absmax and sum, error against the source, old → new). ``--update`` rewrites the expectations of the
selected cases (only for artifacts that pass verify).

Examples::

    convert regress                                  # all cases
    convert regress qwen35-q8-groupwise-int --json
    convert regress --update                         # accept an intended change, then review git diff
"""

from __future__ import annotations

from pathlib import Path

import typer

from converters.cli.output import command, console, emit_json, err_console, table

STYLE = {"pass": "green", "updated": "cyan", "changed": "bold red", "verify_failed": "bold red",
         "missing_expectation": "yellow", "error": "bold red"}
MAX_ROWS = 40


def _changes_table(r) -> None:
    rows = []
    for c in r.changes[:MAX_ROWS]:
        absmax, total, vs = c.value_columns()
        rows.append([c.what, c.describe(), absmax, total, vs])
    more = f" (first {MAX_ROWS} of {len(r.changes)})" if len(r.changes) > MAX_ROWS else ""
    console.print(table(f"{r.case.name}: {len(r.changes)} change(s){more}",
                        ["object", "change", "decoded absmax", "decoded sum", "max |Δ| vs source"], rows))


@command("regress")
def regress_cmd(
    names: list[str] = typer.Argument(None, help="Cases to run (default: all).", show_default=False),
    cases_file: Path = typer.Option(None, "--cases", help="Case file (default: recipes/regression.yaml)."),
    update: bool = typer.Option(False, "--update", help="Rewrite the expectations of the selected cases."),
    workers: int = typer.Option(2, "--workers", help="Conversion worker threads."),
    keep: Path = typer.Option(None, "--keep", help="Keep fixtures and artifacts in this directory."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Convert every regression case, verify it and compare its per-object digests with the expectations."""
    from converters.regress.suite import run_suite

    def show(r) -> None:
        if not json_out:
            err_console.print(f"  {r.case.name}: [{STYLE[r.result]}]{r.result}[/] ({r.seconds:.1f} s)")

    suite = run_suite(names, cases_file=cases_file, update=update, workers=workers, workdir=keep, on_result=show)
    results, stale, ok = suite.results, suite.stale, suite.ok
    if json_out:
        emit_json(suite.to_json())
    else:
        rows = [[r.case.name, r.case.fixture.name, Path(r.case.recipe).name, r.objects, len(r.changes),
                 r.verify or "", f"[{STYLE[r.result]}]{r.result}[/]"] for r in results]
        console.print(table("recipe regression", ["case", "fixture", "recipe", "objects", "changes", "verify",
                                                  "result"], rows))
        for r in results:
            if r.changes and r.result != "pass":
                _changes_table(r)
            if r.verify_failures:
                console.print(f"[red]{r.case.name}: verify failures:[/] " + "; ".join(r.verify_failures[:5]))
            if r.error:
                console.print(f"[red]{r.case.name}: {r.error}[/]", highlight=False)
            if r.result == "missing_expectation":
                console.print(f"{r.case.name}: no expectation yet; run convert regress {r.case.name} --update")
        for s in stale:
            console.print(f"[yellow]stale expectation (no case): {s}[/]")
        console.print(f"[bold {'green' if ok else 'red'}]REGRESS: {'PASS' if ok else 'FAIL'}[/]")
    if not ok:
        raise typer.Exit(1)
