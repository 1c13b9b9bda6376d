"""Timing of the nvfp4 encoder (not a test, not a ``make bench`` area; docs/imatrix.md §Requantization speed).

``python -m bench.nvfp4_encode_time [--convert] [--moe] [--workdir DIR]`` prints JSON:

- ``encode``: one ``codecs.encode`` of a 4096×4096 float32 matrix to nvfp4 (with its decoded values, as a
  conversion asks for them), ``absmax`` and weighted (per-column importance), 1 and 2 codec threads, best
  of 3 after a warm-up call (which also loads or compiles the kernels: ``first_call_seconds``).
- ``--convert``: a whole conversion to ``nvfp4`` (``converters.pipeline.convert.convert``, 2 workers, in
  a child process, timed from after its import: numba's import and kernel load on the first encode
  count) of a generated BF16 Qwen3 GGUF, beside ``cp`` + ``fsync`` of the file (page cache warm); wall
  and CPU seconds (all threads) of the best of 3.
- ``--moe``: the same for a generated Qwen3-MoE GGUF with Q8_0 expert banks (bench/moe.py's generator;
  128 experts of 256 rows, so the banks become nvfp4 with a divisor per expert).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CHILD = """
import json, resource, sys, time
from converters.pipeline.convert import convert
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
t, c = time.perf_counter(), cpu()
convert(sys.argv[1], sys.argv[2], recipe="nvfp4", workers=2, artifact_id_from_content=True)
print(json.dumps({"wall": time.perf_counter() - t, "cpu": cpu() - c}))
"""


def encode_times(n: int = 4096, k: int = 4096, repeats: int = 3) -> dict:
    from ninfer_core import codecs
    from ninfer_core.codecs.base import set_threads

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, k), dtype=np.float32)
    w = rng.random(k, dtype=np.float32) + np.float32(0.1)
    decoded = np.empty_like(x)
    out: dict = {"shape": [n, k]}
    t = time.perf_counter()
    codecs.encode("nvfp4", "block_scale_k16_m128x4_v1", x[:128], as_array=True)
    out["first_call_seconds"] = round(time.perf_counter() - t, 3)
    for threads in (1, 2):
        set_threads(threads)
        for name, weights in (("absmax", None), ("weighted", w)):
            codecs.encode("nvfp4", "block_scale_k16_m128x4_v1", x, as_array=True, weights=weights, decoded=decoded)
            best = float("inf")
            for _ in range(repeats):
                t = time.perf_counter()
                codecs.encode("nvfp4", "block_scale_k16_m128x4_v1", x, as_array=True, weights=weights,
                              decoded=decoded)
                best = min(best, time.perf_counter() - t)
            out[f"{name}_threads{threads}_seconds"] = round(best, 4)
            out[f"{name}_threads{threads}_ns_per_element"] = round(best / x.size * 1e9, 2)
    return out


def _cp(src: Path, dst: Path) -> float:
    t = time.perf_counter()
    subprocess.run(["cp", str(src), str(dst)], check=True)
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    s = time.perf_counter() - t
    dst.unlink()
    return s


def conversion_times(src: Path, workdir: Path, repeats: int = 3) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = workdir / "out.ninfer"
    conv, cp = [], []
    for _ in range(repeats):
        cp.append(_cp(src, workdir / "copy.bin"))
        r = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out)], capture_output=True, text=True,
                           env=env)
        if r.returncode:
            raise SystemExit(f"conversion of {src} failed:\n{r.stderr[-3000:]}")
        conv.append(json.loads(r.stdout.strip().splitlines()[-1]))
        out.unlink()
    best = min(conv, key=lambda c: c["wall"])
    return {"source_bytes": src.stat().st_size, "wall_seconds": round(best["wall"], 3),
            "cpu_seconds": round(min(c["cpu"] for c in conv), 3), "cp_seconds": round(min(cp), 3),
            "times_cp": round(min(cp) / best["wall"], 3), "walls": [round(c["wall"], 3) for c in conv]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--convert", action="store_true")
    p.add_argument("--moe", action="store_true")
    p.add_argument("--no-encode", action="store_true")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/nvfp4-encode-time"))
    a = p.parse_args()
    res: dict = {}
    if not a.no_encode:
        res["encode"] = encode_times()
    a.workdir.mkdir(parents=True, exist_ok=True)
    if a.convert:
        from tinymodels import qwen3

        src = a.workdir / "qwen3-bf16.gguf"
        if not src.exists():
            qwen3.write_gguf(src, qwen3.config(hidden_size=1024, intermediate_size=4096, num_hidden_layers=8,
                                               num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                                               vocab_size=16384), matrix_type="BF16")
        res["convert_bf16"] = conversion_times(src, a.workdir)
    if a.moe:
        from bench.moe import write_bank_gguf

        src = a.workdir / "qwen3moe-q8_0-256.gguf"
        if not src.exists():  # 128 experts of 256 rows (whole 128-row tiles: nvfp4 banks, as bench/moe.py's)
            write_bank_gguf(src, 128 * 256 * (2048 // 32 * 34), 128)
        res["convert_moe_q8_0"] = conversion_times(src, a.workdir)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
