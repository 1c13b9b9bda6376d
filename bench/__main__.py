"""``python -m bench`` (``make bench``) — every area's benchmark in one run: a table of ratios, each issue's
targets marked met / not met, saved to ``bench/results.json``.

Each area module (``bench/<area>.py``) exposes ``run(workdir: Path, scale: float = 1.0) -> list[dict]``;
every result is ``{"name", "value", "unit", "target", "met", "detail"}``, measured side by side with its
peer (``cp``, ``sha256sum``, gguf-py) in the same run so machine speed cancels out of the ratios. Inputs
are generated into ``--workdir`` and removed afterwards.

Scale: ``scale 1`` is the size each issue states its target at (a 4096² matrix, a 2 GiB artifact, a
≥ 4 GiB GGUF, 6 GiB expert banks, …) and takes a long time on a small machine. By default each area runs
at the scale in :data:`DEFAULT_SCALES`, picked so that the whole suite takes a few minutes on 2 cores
while every target stays meaningful (the MoE bank, for one, stays larger than the converter's memory
limit); ``--scale 1`` runs the full-size targets, ``--scale X`` any other size for every area.

Each area runs in its own child process, so the peak RSS of every step is measured (``wait4``: the child
and the processes it waited for) and reported next to the area's own numbers.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

AREAS = ("codecs", "container", "directory", "inspect", "convert", "moe", "scaleout", "quality", "prequantized",
         "scale")
#: results.json's ``issue`` field (a requirement-tracker number that scripts reading the file group by; the
#: table shows the area instead)
ISSUES = {"container": 2, "codecs": 3, "inspect": 4, "convert": 5, "scaleout": 9, "moe": 10, "quality": 18,
          "prequantized": 16, "scale": 28}
#: per-area scale of a default run, measured on 2 cores (about 10 minutes in all, and about 3 more for quality's
#: requantization rows; most of it the cp ratios of convert, moe, prequantized and quality: best of 3
#: interleaved runs of each side, ``--repeats``; ``--scale 1``: every area full size, 18 GiB of MoE banks
#: among them). ``prequantized`` runs full size (1 and 4 GiB NVFP4 checkpoints: memory flat in size needs
#: two sizes, the cp ratio the larger). ``convert`` runs full size: its
#: ≥ 4 GiB GGUF is the size the issue states its cp ratio for — a smaller file is copied from the page cache
#: and the converter's fixed start-up (mappings, recipe) dominates. ``moe`` at 0.2 keeps each bank (1.2 GiB)
#: above the memory limit. ``scale`` runs full size: its 7B-geometry Q4_K_M GGUF (4.7 GB) is the model the targets
#: are stated for (conversion plus acceptance, ``exact`` and ``groupwise-int``, and a 128-expert MoE: minutes).
DEFAULT_SCALES = {"codecs": 1.0, "container": 0.25, "directory": 1.0, "inspect": 0.25, "convert": 1.0, "moe": 0.2,
                  "scaleout": 0.1, "quality": 1.0, "prequantized": 1.0,
                  "scale": 1.0}
MIB = 1 << 20


def _child(area: str, scale: float, workdir: Path, output: Path, timing: dict | None = None) -> int:
    """Run one area in this (child) process and write its results to ``output``. ``timing``: ``repeats`` /
    ``drop_cache`` for the areas whose ``run`` takes them (best-of-N interleaved timing, bench/timing.py)."""
    try:
        module = importlib.import_module(f"bench.{area}")
    except ModuleNotFoundError as exc:
        if exc.name != f"bench.{area}":
            raise
        output.write_text(json.dumps({"missing": True}))
        return 0
    accepted = inspect.signature(module.run).parameters
    results = module.run(workdir, scale=scale, **{k: v for k, v in (timing or {}).items() if k in accepted})
    output.write_text(json.dumps({"results": results}, default=str))
    return 0


def _run_area(area: str, scale: float, workdir: Path, console: Console, timing_args: list[str] = ()) -> dict:
    """The area in a child process: its results, wall seconds and peak RSS (or the failure)."""
    out = workdir.parent / f"{area}.results.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bench", "--child", area, "--scale", str(scale), "--workdir",
                             str(workdir), "--output", str(out), *timing_args], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    rss = usage.ru_maxrss * 1024  # Linux: kilobytes; the child and every process it waited for
    info = {"seconds": round(seconds, 1), "peak_rss_bytes": rss, "scale": scale}
    if code != 0 or not out.exists():
        info["failure"] = f"exit status {code}"
        return info
    data = json.loads(out.read_text())
    out.unlink()
    if data.get("missing"):
        console.print(f"[yellow]{area}: no benchmark module yet[/]")
        info["missing"] = True
        return info
    info["results"] = data["results"]
    return info


def _shown(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return "" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=None,
                        help="input size multiplier for every area (1 = the issues' full-size targets; "
                             "default: per area, see DEFAULT_SCALES)")
    parser.add_argument("--only", nargs="*", default=None, help=f"areas to run (default: {' '.join(AREAS)})")
    parser.add_argument("--workdir", type=Path, default=Path("bench/work"), help="scratch directory")
    parser.add_argument("--output", type=Path, default=Path("bench/results.json"))
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs of each side of a timed comparison, interleaved, best taken (default: the "
                             "area's own; 3 for convert, moe and quality's requantization rows)")
    parser.add_argument("--keep-page-cache", action="store_true",
                        help="sync between timed runs but do not drop the page cache (it is dropped where "
                             "permitted, i.e. as root)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        timing = {"drop_cache": not args.keep_page_cache}
        if args.repeats is not None:
            timing["repeats"] = args.repeats
        return _child(args.child, args.scale, args.workdir, args.output, timing)
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    timing_args = ([] if args.repeats is None else ["--repeats", str(args.repeats)]) + \
        (["--keep-page-cache"] if args.keep_page_cache else [])

    console = Console(width=None if sys.stdout.isatty() else 160)  # a log keeps the table readable
    areas = args.only or list(AREAS)
    unknown = sorted(set(areas) - set(AREAS))
    if unknown:
        parser.error(f"unknown area(s): {', '.join(unknown)}")
    started = time.perf_counter()
    results: list[dict] = []
    steps: dict[str, dict] = {}
    failures: list[str] = []
    for area in areas:
        scale = args.scale if args.scale is not None else DEFAULT_SCALES[area]
        workdir = args.workdir / area
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        console.print(f"[bold]running {area}[/] (scale {scale:g})")
        try:
            info = _run_area(area, scale, workdir, console, timing_args)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        steps[area] = {k: v for k, v in info.items() if k != "results"}
        if "failure" in info:  # one area failing must not hide the others' numbers
            failures.append(f"{area}: {info['failure']}")
            console.print(f"[red]{area} failed ({info['failure']})[/]")
        for item in info.get("results", []):
            results.append({"issue": ISSUES.get(area), "area": area, **item})
        if not info.get("missing"):
            results.append({"issue": ISSUES.get(area), "area": area, "name": f"peak RSS of the {area} step",
                            "value": round(info["peak_rss_bytes"] / MIB, 1), "unit": "MiB", "target": None,
                            "met": None, "detail": {"scale": scale, "seconds": info["seconds"]}})
        console.print(f"  {area} took {info['seconds']:.1f} s, peak RSS {info['peak_rss_bytes'] / MIB:.0f} MiB")
    total = time.perf_counter() - started

    table = Table(title="ninfer-convert benchmarks (ratios measured side by side in this run)")
    for col in ("area", "measure", "value", "unit", "target", "met"):
        table.add_column(col, overflow="fold")
    for r in results:
        met = r.get("met")
        mark = "" if met is None else ("[green]met[/]" if met else "[red]not met[/]")
        table.add_row(r["area"], r["name"], _shown(r["value"]), r.get("unit") or "",
                      r.get("target") or "", mark)
    console.print(table)
    targeted = [r for r in results if r.get("met") is not None]
    missed = [r for r in targeted if not r["met"]]
    console.print(f"targets: {len(targeted) - len(missed)} met, {len(missed)} not met"
                  + "".join(f"\n  not met: {r['area']}: {r['name']} = {_shown(r['value'])} "
                            f"{r.get('unit') or ''} (target {r['target']})" for r in missed))
    console.print(f"total {total:.0f} s" + ("" if args.scale == 1 else "; full-size targets: make bench "
                                                                      "BENCH_ARGS='--scale 1' or python -m bench --scale 1"))

    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "machine": {"platform": platform.platform(), "python": sys.version.split()[0],
                            "cpus": os.cpu_count(),
                            "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")},
                "scale": args.scale, "scales": {a: steps[a]["scale"] for a in steps}, "seconds": round(total, 1),
                "repeats": args.repeats, "keep_page_cache": args.keep_page_cache,
                "steps": steps, "targets": {"met": len(targeted) - len(missed), "not_met": len(missed)},
                "results": results, "failures": failures,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    console.print(f"saved {args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
