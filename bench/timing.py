"""Best-of-N interleaved timing for the conversion areas (docs/io-speed.md §Benchmarks).

One timing of a conversion or of ``cp`` on a shared VM swings by 2–3× between runs, so a ratio taken from
single runs says more about the neighbours than about the converter. :func:`interleaved` runs each side
``repeats`` times, alternating (cp, converter, cp, converter, …) so that a slow phase of the disk or of
the CPUs hits both alike, with :func:`settle` before every run: ``sync`` (no earlier dirty pages are
flushed inside a measurement) and, where this process may (root), the page cache dropped so that every
run reads its source from the disk, as a user's first conversion does. The best of each side is the
ratio's input; every run is kept for ``bench/results.json``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

#: runs of each side when the area is not told otherwise (``python -m bench --repeats N``)
DEFAULT_REPEATS = 3
DROP_CACHES = "/proc/sys/vm/drop_caches"


def settle(drop_cache: bool = True) -> bool:
    """``sync``, then drop the clean page cache when asked and permitted; whether it was dropped."""
    os.sync()
    if not drop_cache:
        return False
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("1\n")  # page cache only (dentries and inodes stay)
    except OSError:
        return False
    return True


def interleaved(sides: dict[str, Callable[[], float]], repeats: int = DEFAULT_REPEATS,
                drop_cache: bool = True) -> tuple[dict[str, list[float]], bool]:
    """Run every side ``repeats`` times, alternating, :func:`settle` before each run. Each side returns its
    own seconds (a child process times its work after its imports). Returns every run's seconds per side
    and whether the page cache was dropped before every run."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    runs: dict[str, list[float]] = {name: [] for name in sides}
    dropped = True
    for _ in range(repeats):
        for name, side in sides.items():
            dropped = settle(drop_cache) and dropped
            runs[name].append(side())
    return runs, dropped


def cp_seconds(src: Path, dst: Path) -> float:
    """``cp -r src dst`` and ``sync`` of every copied file (``fsync`` of each, as the converter ``fsync``s its
    own files — not a machine-wide ``sync``, which would also flush whatever the other processes of a
    shared machine wrote); the seconds of both, the copy removed afterwards."""
    started = time.perf_counter()
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    files = [str(p) for p in dst.rglob("*") if p.is_file()] if dst.is_dir() else [str(dst)]
    subprocess.run(["sync", *files], check=True)
    seconds = time.perf_counter() - started
    if dst.is_dir():
        shutil.rmtree(dst)
    else:
        dst.unlink()
    return seconds


def rounded(runs: dict[str, list[float]], digits: int = 3) -> dict[str, list[float]]:
    """Every run's seconds, rounded for ``results.json``."""
    return {name: [round(s, digits) for s in seconds] for name, seconds in runs.items()}


def standalone(area: str, run: Callable[[Path, float], list[dict]]) -> None:
    """``python -m bench.<area> [scale]``: one area's rows printed, its scratch directory removed after."""
    import pprint
    import sys

    work = Path("bench/work") / area
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        pprint.pprint(run(work, float(sys.argv[1]) if len(sys.argv) > 1 else 1.0))
    finally:
        shutil.rmtree(work, ignore_errors=True)
