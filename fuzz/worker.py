"""One coverage-guided fuzz run of one target (atheris / libFuzzer), in its own process:
``python -m fuzz.worker TARGET --runs N --seconds S --stats FILE --crashes DIR``.

Every input goes through the target's harness (:mod:`fuzz.targets`); the outcome is counted, never
raised, so one run covers ``N`` inputs: ``accepted``, ``rejected`` (typed), ``untyped`` (the input is saved
under ``--crashes`` with its traceback) and ``slow`` (over ``--hang-seconds``, saved too). The counts and
the process's peak RSS are written to ``--stats`` every few hundred inputs and at the end. libFuzzer's own
``-timeout`` is a backstop for an input that never returns (it kills the run; the campaign reports it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["ninfer_core", "converters"]):
    import converters.acceptance.calbin  # noqa: F401  (instrumented for coverage)
    import converters.inspect  # noqa: F401
    import converters.inspect.evidence  # noqa: F401
    import converters.inspect.mcp_server  # noqa: F401  (the MCP SDK too: its import is not an input's time)
    import converters.mapping.recipes  # noqa: F401
    import converters.model.engine  # noqa: F401
    import converters.pipeline.convert  # noqa: F401
    import converters.pipeline.proposal  # noqa: F401
    import converters.scaleout.planfile  # noqa: F401
    import converters.sources  # noqa: F401
    import ninfer_core  # noqa: F401

from fuzz.targets import SEEDS, TARGETS, TYPED  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--hang-seconds", type=float, default=2.0)
    parser.add_argument("--stats", type=Path, required=True)
    parser.add_argument("--crashes", type=Path, required=True)
    parser.add_argument("--work-corpus", type=Path, default=None,
                        help="libFuzzer's growing corpus (default: a scratch directory)")
    args = parser.parse_args()
    harness = TARGETS[args.target]
    scratch = Path(tempfile.mkdtemp(prefix=f"fuzz-{args.target}-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    args.crashes.mkdir(parents=True, exist_ok=True)
    counts = {"inputs": 0, "accepted": 0, "rejected": 0, "untyped": 0, "slow": 0, "max_seconds": 0.0}
    untyped_kinds: dict[str, int] = {}
    started = time.time()

    def save(data: bytes, why: str, text: str) -> None:
        name = f"{why}-{hashlib.sha256(data).hexdigest()[:16]}"
        (args.crashes / name).write_bytes(data)
        (args.crashes / f"{name}.txt").write_text(text)

    def flush() -> None:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        args.stats.write_text(json.dumps({"target": args.target, **counts, "untyped_kinds": untyped_kinds,
                                          "peak_rss_bytes": rss, "seconds": round(time.time() - started, 1)}))

    def one(data: bytes) -> None:
        t = time.perf_counter()
        try:
            outcome = harness(data, scratch)
        except TYPED:
            outcome = "rejected"
        except Exception as exc:  # an untyped exception: the defect this campaign looks for
            outcome = "untyped"
            kind = f"{type(exc).__name__} at {traceback.extract_tb(exc.__traceback__)[-1].filename.split('/')[-1]}:" \
                   f"{traceback.extract_tb(exc.__traceback__)[-1].lineno}"
            untyped_kinds[kind] = untyped_kinds.get(kind, 0) + 1
            if untyped_kinds[kind] <= 3:
                save(data, "untyped", traceback.format_exc())
        seconds = time.perf_counter() - t
        counts["inputs"] += 1
        counts[outcome] += 1
        counts["max_seconds"] = round(max(counts["max_seconds"], seconds), 3)
        if seconds > args.hang_seconds:
            counts["slow"] += 1
            save(data, "slow", f"{seconds:.2f} s")
        if counts["inputs"] % 250 == 0 or counts["inputs"] >= args.runs:
            flush()

    # libFuzzer adds new inputs to its first corpus directory: a working one, never the seeds in the repo
    work = args.work_corpus if args.work_corpus is not None else scratch / "corpus"
    work.mkdir(parents=True, exist_ok=True)
    corpus = [str(work), str(SEEDS / args.target)]
    flush()
    atheris.Setup([sys.argv[0], f"-runs={args.runs}", f"-max_total_time={args.seconds}", "-timeout=20",
                   "-rss_limit_mb=2048", "-max_len=65536", "-print_final_stats=0", "-close_fd_mask=3", *corpus],
                  one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
