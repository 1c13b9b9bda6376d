"""``convert recipes`` and ``convert formats``: the shipped recipes (what each stores) and every storage
format (bits per weight, group, layout, what it holds exactly), from :mod:`converters.mapping.catalogue`.

Examples::

    convert recipes                 # one row per recipe, then its role table
    convert formats --json          # ninfer-formats/v1
"""

from __future__ import annotations

import typer

from converters.cli.output import command, console, emit_json, table


@command("recipes")
def recipes(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the shipped recipes and what each stores (schema: docs/recipes.md)."""
    from converters.mapping.catalogue import recipe_rows

    rows = recipe_rows()
    if json_out:
        emit_json({"recipes": rows})
        return
    console.print(table("recipes (--recipe NAME, or a recipe file: docs/recipes.md)",
                        ["recipe", "what it stores", "golden budget"],
                        [[r["name"], r["description"], _budget(r["golden_budget"])] for r in rows]))
    for r in rows:
        cells = [[p, f] for p, f in r["roles"].items()]
        cells += [[f"group {k}", f"{g['format']} ({' + '.join(g['members'])})"] for k, g in r["groups"].items()]
        console.print(table(f"{r['name']} ({r['file']})", ["role", "format"], cells))


def _budget(budget: dict | None) -> str:
    """The recipe's gate 7 cost budget (docs/acceptance.md §Golden: two questions)."""
    if budget is None:
        return "precision class default"
    return f"cosine {budget['cosine']:.9g}, top-1 {budget['top1_agreement']:.9g}"


@command("formats")
def formats(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List every storage format: bits per weight, group, layout, and the source types it holds exactly."""
    from converters.mapping.catalogue import format_rows

    rows = format_rows()
    if json_out:
        emit_json({"formats": rows})
        return
    console.print(table("storage formats (docs/format/codec-traits.md)",
                        ["format", "layout", "bits/weight", "group", "row tile", "tolerance", "holds exactly"],
                        [[r["format"], r["layout"], f"{r['bits_per_weight']:g}", r["group"] or "-", r["row_tile"],
                          r["tolerance_class"], ", ".join(f"{s} ({e})" for s, e in r["exact_from"].items()) or "-"]
                         for r in rows]))
