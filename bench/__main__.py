"""``python -m bench`` — run every area's benchmark, print a table of ratios, save ``bench/results.json``.

Each area module (``bench/<area>.py``) exposes ``run(workdir: Path, scale: float = 1.0) -> list[dict]``;
every result is ``{"name", "value", "unit", "target", "met", "detail"}``, measured side by side with its
peer (``cp``, ``sha256sum``, gguf-py) in the same run so machine speed cancels out of the ratios.
Inputs are generated into ``--workdir`` and removed afterwards. ``--scale`` shrinks or grows every input.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

AREAS = ("codecs", "container", "inspect", "convert", "moe")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="input size multiplier (default 1.0)")
    parser.add_argument("--only", nargs="*", default=None, help=f"areas to run (default: {' '.join(AREAS)})")
    parser.add_argument("--workdir", type=Path, default=Path("bench/work"), help="scratch directory")
    parser.add_argument("--output", type=Path, default=Path("bench/results.json"))
    args = parser.parse_args(argv)

    console = Console()
    areas = args.only or list(AREAS)
    results: list[dict] = []
    failures: list[str] = []
    for area in areas:
        try:
            module = importlib.import_module(f"bench.{area}")
        except ModuleNotFoundError as exc:
            if exc.name != f"bench.{area}":
                raise
            console.print(f"[yellow]{area}: no benchmark module yet[/]")
            continue
        workdir = args.workdir / area
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        console.print(f"[bold]running {area}[/] (scale {args.scale})")
        started = time.perf_counter()
        try:
            for item in module.run(workdir, scale=args.scale):
                results.append({"area": area, **item})
        except Exception as exc:  # one area failing must not hide the others' numbers
            failures.append(f"{area}: {type(exc).__name__}: {exc}")
            console.print(f"[red]{area} failed: {exc}[/]")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        console.print(f"  {area} took {time.perf_counter() - started:.1f} s")

    table = Table(title="ninfer-convert benchmarks")
    for col in ("area", "measure", "value", "unit", "target", "met"):
        table.add_column(col)
    for r in results:
        met = r.get("met")
        mark = "" if met is None else ("[green]met[/]" if met else "[red]not met[/]")
        value = r["value"]
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        table.add_row(r["area"], r["name"], shown, r.get("unit") or "", r.get("target") or "", mark)
    console.print(table)

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "machine": {"platform": platform.platform(), "python": sys.version.split()[0]},
                "scale": args.scale,
                "results": results,
                "failures": failures,
            },
            indent=2,
        )
        + "\n"
    )
    console.print(f"saved {args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
