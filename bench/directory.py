"""Memory of the JSON directory (docs/format/container.md §3.1, reader budget): ``convert validate``'s
peak RSS on the worst directories the reader accepts — padded just under the budget with object members
(the costliest JSON value measured), empty objects, or long strings — and the time to refuse one above it
(a 143 MB directory of a long provenance list). Target: every accepted directory within 512 MiB.

``scale`` multiplies the fraction of the budget the padding uses (1: 97 % of it, the edge; smaller runs
measure proportionally smaller directories, and the target is then not judged)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ninfer_core import ArtifactWriter, Component
from ninfer_core.container.entry import DIRECTORY_MEMORY_BUDGET, directory_memory_estimate

TARGET_MIB = 512
# padding kind -> (value maker, estimated bytes per item under the reader's cost model)
KINDS = {
    "object members": (lambda n: {f"k{i:07d}": 0 for i in range(n)}, 380),
    "empty objects": (lambda n: [{} for _ in range(n)], 332),
    "long strings": (lambda n: ["a" * (1 << 20)] * max(1, n // (4 << 20)), 1),
}
PADDING = {**{k: make for k, (make, _) in KINDS.items()},
           "provenance list": lambda n: [f"entry-{i:010d}-" + "padding-" * 12 for i in range(n)]}


def _write(path: Path, provenance) -> None:
    w = ArtifactWriter(path, components={"t": Component({})}, provenance=provenance, durable=False)
    w.add_resource("r.a", 16)
    with w:
        w.write_object("r.a", b"x" * 16)


def _write_in_child(path: Path, kind: str, n: int) -> None:
    """Write the padded artifact in a child process, so this one stays small: a child forked from a large
    parent would count the parent's pages in its own peak RSS."""
    code = f"from bench.directory import PADDING, _write; from pathlib import Path; " \
           f"_write(Path({str(path)!r}), {{'x': PADDING[{kind!r}]({n})}})"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


def _validate(path: Path) -> tuple[int, float, int]:
    """Peak RSS (bytes), seconds and exit status of ``convert validate PATH --json`` in a child process."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "converters.cli", "validate", str(path), "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss * 1024, time.perf_counter() - started, os.waitstatus_to_exitcode(status)


def run(workdir: Path, scale: float = 1.0) -> list[dict]:
    results = []
    fraction = 0.97 * min(scale, 1.0)
    for kind, (_, per_item) in KINDS.items():
        path = workdir / f"{kind.replace(' ', '-')}.ninfer"
        _write_in_child(path, kind, int(DIRECTORY_MEMORY_BUDGET * fraction / per_item))
        json_bytes = int.from_bytes(path.read_bytes()[8:16], "little")
        with open(path, "rb") as f:
            f.seek(32)
            estimate = directory_memory_estimate(f.read(json_bytes))
        rss, seconds, code = _validate(path)
        results.append({"name": f"validate peak RSS, directory of {kind}", "value": round(rss / 2**20, 1),
                        "unit": "MiB", "target": f"<= {TARGET_MIB}" if scale >= 1 else None,
                        "met": rss <= TARGET_MIB << 20 if scale >= 1 else None,
                        "detail": {"json_bytes": json_bytes, "estimate_mib": round(estimate / 2**20, 1),
                                   "budget_mib": DIRECTORY_MEMORY_BUDGET >> 20, "seconds": round(seconds, 2),
                                   "accepted": code != 2 and estimate <= DIRECTORY_MEMORY_BUDGET}})
        path.unlink()
    big = workdir / "refused.ninfer"
    _write_in_child(big, "provenance list", int(1_300_000 * min(scale, 1.0)))
    rss, seconds, code = _validate(big)
    results.append({"name": "refusal of a directory above the budget", "value": round(seconds, 2), "unit": "s",
                    "target": None, "met": None,
                    "detail": {"json_bytes": int.from_bytes(big.read_bytes()[8:16], "little"),
                               "peak_rss_mib": round(rss / 2**20, 1), "exit_status": code}})
    big.unlink()
    return results
