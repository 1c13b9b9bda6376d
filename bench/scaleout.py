"""``make bench`` area ``scaleout``: the staged conversion against the one-process conversion.

A Qwen3.5-shaped Q8_0 GGUF of 1 GiB × ``scale`` (the dims of :mod:`bench.convert`) is converted with the
``exact`` recipe and a content-derived ID three ways, in the same run:

1. one process (``convert gguf2ninfer … --artifact-id-from-content``, in a child);
2. staged: ``--plan-only``, then two ``convert encode PLAN --shard K/2`` processes at once (two "machines"
   sharing the file system), then ``convert seal``;
3. staged on a Dask ``LocalCluster`` of two worker processes (``--backend dask``), when the ``scale`` extra
   is installed.

Reported: each way's wall time as a ratio to the one-process time (what splitting costs on one machine
— plan, per-task re-planning and markers; on several machines the encode step divides), ``cp`` of the
source for scale, and whether the three outputs are byte-identical — the target.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.convert import DIMS, GIB, LAYER_Q8_BYTES, _cp_seconds

REPO = Path(__file__).resolve().parents[1]


def _convert_cli(*args: str) -> float:
    """Run ``convert ARGS`` in a child; its wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "converters.cli", *args], capture_output=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"convert {' '.join(args[:2])} failed: {proc.stderr.decode()[-2000:]}")
    return time.perf_counter() - t


def _files(directory: Path) -> dict[str, str]:
    """File name → SHA-256, read in 16 MiB chunks."""
    out = {}
    for p in sorted(directory.iterdir()):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(16 << 20):
                h.update(chunk)
        out[p.name] = h.hexdigest()
    return out


def run(workdir: Path, scale: float = 1.0) -> list[dict]:
    from tinymodels import qwen35

    layers = max(4, math.ceil(GIB * scale / LAYER_Q8_BYTES / 4) * 4)
    src = workdir / "qwen35-scaleout.Q8_0.gguf"
    qwen35.write_gguf(src, qwen35.config(num_hidden_layers=layers, **DIMS), matrix_type="Q8_0")
    size = src.stat().st_size
    cp_s = _cp_seconds(src, workdir / "copy.gguf")
    common = ["--recipe", "exact", "--artifact-id-from-content", "--max-file-bytes", str(max(GIB // 4, size // 3))]
    outs = {k: workdir / k for k in ("one", "staged", "dask")}
    for d in outs.values():
        d.mkdir()
    os.sync()
    one_s = _convert_cli("gguf2ninfer", str(src), str(outs["one"] / "m.ninfer"), "--workers", "2", *common)

    plan = workdir / "m.plan.json"
    os.sync()
    t = time.perf_counter()
    _convert_cli("gguf2ninfer", str(src), str(outs["staged"] / "m.ninfer"), "--plan-only", str(plan), *common)
    plan_s = time.perf_counter() - t
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-m", "converters.cli", "encode", str(plan), "--shard", f"{k}/2",
                               "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
             for k in (1, 2)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"convert encode failed: {err.decode()[-2000:]}")
    encode_s = time.perf_counter() - t - plan_s
    _convert_cli("seal", str(plan))
    staged_s = time.perf_counter() - t

    try:
        import distributed  # noqa: F401
        have_dask = True
    except ImportError:
        have_dask = False
    dask_s = None
    if have_dask:
        os.sync()
        dask_s = _convert_cli("gguf2ninfer", str(src), str(outs["dask"] / "m.ninfer"), "--backend", "dask",
                              "--workers", "2", *common)
    reference = _files(outs["one"])
    identical = _files(outs["staged"]) == reference and (not have_dask or _files(outs["dask"]) == reference)
    detail = {"source_bytes": size, "layers": layers, "files": len(reference), "cp_seconds": round(cp_s, 3),
              "one_process_seconds": round(one_s, 3), "staged_seconds": round(staged_s, 3),
              "staged_plan_seconds": round(plan_s, 3), "staged_encode_seconds": round(encode_s, 3),
              "dask_seconds": None if dask_s is None else round(dask_s, 3), "dask_installed": have_dask}
    for d in outs.values():
        shutil.rmtree(d, ignore_errors=True)
    src.unlink()
    results = [
        {"name": "staged (plan, 2 encode processes, seal) == one process, bytes", "value": identical, "unit": "",
         "target": "byte-identical" + ("" if have_dask else " (dask not installed: local only)"),
         "met": identical, "detail": detail},
        {"name": "staged exact conversion time / one-process time", "value": round(staged_s / one_s, 3),
         "unit": "×", "target": None, "met": None, "detail": detail},
    ]
    if dask_s is not None:
        results.append({"name": "Dask LocalCluster (2 workers) time / one-process time",
                        "value": round(dask_s / one_s, 3), "unit": "×", "target": None, "met": None,
                        "detail": detail})
    return results
