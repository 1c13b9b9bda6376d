"""One conversion in a child process, for the bench areas that time the converter against ``cp``
(docs/io-speed.md §Benchmarks).

The child imports the converter, then times :func:`converters.pipeline.convert.convert` alone (wall and
CPU seconds of every thread: the imports are start-up, not conversion), and prints its result summary and
a digest of every object's measured error (docs/imatrix.md §Requantization speed: a later run compares
it to see that the error did not change). The parent reaps it with ``wait4``, so the peak RSS is the
child's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

CHILD = """
import hashlib, json, sys, time
from converters.pipeline.convert import convert
imatrix = sys.argv[5] if len(sys.argv) > 5 else None
t, cpu = time.perf_counter(), time.process_time()
r = convert(sys.argv[1], sys.argv[2], recipe=sys.argv[3], workers=int(sys.argv[4]), imatrix=imatrix)
seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
errors = {k: v.to_json() for k, v in sorted(r.errors.items())}
inexact = [e["cosine"] for e in errors.values() if e["cosine"] < 1.0]
measured = {"objects": len(errors), "inexact_objects": len(inexact),
            "mean_cosine": round(sum(inexact) / len(inexact), 9) if inexact else 1.0,
            "max_rms": max((e["rms"] for e in errors.values()), default=0.0),
            "sha256": hashlib.sha256(json.dumps(errors, sort_keys=True).encode()).hexdigest()}
missing = sorted(r.plan.importance.missing) if r.plan.importance is not None else None
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "summary": r.summary(), "measured_error": measured,
                  "importance_missing": missing}))
"""


def convert_in_child(args: list[str]) -> tuple[dict, int, float]:
    """Run the converter in a child (``args``: source, output, recipe, workers[, imatrix]); return its JSON
    result (``seconds``, ``cpu_seconds``, ``summary``, ``measured_error``, ``importance_missing``: the
    source tensors an importance file had no usable entry for), peak RSS (bytes) and wall
    seconds of the whole process."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    out, err = drain(proc)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (not the maximum over every child)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"conversion failed: {err.decode()[-2000:]}")
    return json.loads(out.decode().strip().splitlines()[-1]), int(usage.ru_maxrss) * 1024, wall  # Linux: KiB


def drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """The child's stdout and stderr read to their end without reaping it (``wait4`` does, for its rusage);
    stderr is read on a thread so that neither pipe fills while the other is read."""
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    reader.start()
    out = proc.stdout.read()
    reader.join()
    return out, err[0]
