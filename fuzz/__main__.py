"""``python -m fuzz`` (``make fuzz``): the coverage-guided fuzz campaign over every parser.

Each target of :mod:`fuzz.targets` runs in its own process (:mod:`fuzz.worker`, atheris/libFuzzer seeded
from ``fuzz/corpus/<target>/``) for ``--runs`` inputs or ``--seconds``, whichever ends first; ``--jobs``
targets run at once. The table reports per parser: inputs, typed rejections, accepted, untyped exceptions,
hangs (inputs over 2 s, or a run libFuzzer killed), peak RSS. Inputs that broke a rule are kept under
``--crashes`` with their traceback. The exit status is 1 when any target had an untyped exception, a hang,
or a peak RSS over ``--rss-mib``. The default run is bounded (2,000 inputs or 30 s per target);
``--runs 100000 --seconds 0`` is the long campaign.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[1]


def _start(target: str, args, stats: Path) -> subprocess.Popen:
    seconds = args.seconds if args.seconds > 0 else 24 * 3600
    cmd = [sys.executable, "-m", "fuzz.worker", target, "--runs", str(args.runs), "--seconds", str(seconds),
           "--stats", str(stats), "--crashes", str(args.crashes / target)]
    log = open(args.crashes.parent / f"{target}.log", "w")  # noqa: SIM115  (closed with the process)
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="inputs per target (default 2000)")
    parser.add_argument("--seconds", type=int, default=30, help="time limit per target, 0 for none (default 30)")
    parser.add_argument("--only", nargs="*", default=None, help=f"targets (default: {' '.join(TARGETS)})")
    parser.add_argument("--jobs", type=int, default=2, help="targets run at once (default 2)")
    parser.add_argument("--rss-mib", type=int, default=512, help="peak RSS limit per target (default 512)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "fuzz" / "work")
    parser.add_argument("--output", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    targets = args.only or list(TARGETS)
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s): {', '.join(unknown)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.crashes = args.workdir / "crashes"
    started = time.perf_counter()
    pending, running, results = list(targets), {}, {}
    while pending or running:
        while pending and len(running) < args.jobs:
            target = pending.pop(0)
            stats = args.workdir / f"{target}.stats.json"
            stats.unlink(missing_ok=True)
            running[target] = (_start(target, args, stats), stats, time.perf_counter())
        pid, status, usage = os.wait4(-1, 0)
        for target, (proc, stats, t0) in list(running.items()):
            if proc.pid != pid:
                continue
            del running[target]
            data = json.loads(stats.read_text()) if stats.exists() else {"inputs": 0}
            code = os.waitstatus_to_exitcode(status)
            data.update(exit_status=code, peak_rss_bytes=max(data.get("peak_rss_bytes", 0), usage.ru_maxrss * 1024),
                        wall_seconds=round(time.perf_counter() - t0, 1))
            data["hangs"] = data.get("slow", 0) + (1 if code not in (0,) else 0)
            results[target] = data
    failed = []
    print(f"{'parser':17s} {'inputs':>8s} {'typed rej.':>10s} {'accepted':>9s} {'untyped':>8s} {'hangs':>6s} "
          f"{'max s':>6s} {'peak RSS':>9s}")
    for target in targets:
        r = results[target]
        rss = r["peak_rss_bytes"] / 2**20
        print(f"{target:17s} {r.get('inputs', 0):8d} {r.get('rejected', 0):10d} {r.get('accepted', 0):9d} "
              f"{r.get('untyped', 0):8d} {r['hangs']:6d} {r.get('max_seconds', 0):6.2f} {rss:7.0f} MiB")
        if r.get("untyped") or r["hangs"] or rss > args.rss_mib:
            failed.append(target)
        for kind, n in (r.get("untyped_kinds") or {}).items():
            print(f"    untyped: {kind} x{n}")
    print(f"{len(targets)} parsers in {time.perf_counter() - started:.0f} s; "
          + (f"FAILED: {', '.join(failed)} (inputs kept in {args.crashes})" if failed else "no untyped exception, "
             f"no hang, every peak RSS <= {args.rss_mib} MiB"))
    if args.output is not None:
        args.output.write_text(json.dumps({"runs": args.runs, "seconds": args.seconds, "results": results}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
