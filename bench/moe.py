"""``make bench`` area ``moe``: expert banks far larger than the converter's memory, converted in it.

1. ``exact``: a generated one-layer Qwen3-MoE GGUF (llama.cpp names and layout: ``ffn_{gate,up,down}_exps``
   banks ``(E, N, K)`` of Q8_0, F32 router and norms, gpt2 tokenizer metadata) whose every bank is
   :data:`BANK_BYTES` × ``scale`` (6 GiB at scale 1), converted with the ``exact`` recipe (Q8_0 →
   ``q8_g32_fp16`` transcoded expert by expert, banks written plane-major) in a child process whose
   memory is limited to a quarter of one bank (at most :data:`MEMORY_LIMIT`, at least
   :data:`MIN_LIMIT`; 1 GiB for the 6 GiB bank), so a converter that held a bank would fail, not just be
   slow. Reported: the child's peak RSS (``wait4`` rusage), the throughput
   as a ratio to ``cp`` of the same file in the same run, and a value spot check (experts 0 and E−1 of
   every bank decoded from the artifact against gguf-py's ``dequantize`` of the source rows).
2. The same conversion under ``ulimit -v`` (``RLIMIT_AS``) at the same limit: whether it runs at all.
3. ``nvfp4``: banks of 128 experts ``[2048 × scale, 2048]`` (0.57 GiB of Q8_0 per bank at scale 1; the
   converter keeps no encoded object in memory, so nothing holds a bank) requantized to nvfp4 with one
   divisor per expert under the limit: each expert is encoded whole (its float32 matrix), its error
   measured, then written — memory follows one expert times the workers (encode and measure temporaries,
   about five expert matrices each), not the bank.

The limit of 1 and 3 is ``setrlimit(RLIMIT_DATA)``: heap and private writable mappings, i.e. everything
the converter allocates, but not read-only maps of the input file, which cost address space, not memory
(the source reader maps only the ranges it reads — ``converters.sources.base.FileMap`` — so 2 runs
too, with the address space following the tensors being read). The child runs with ``MALLOC_ARENA_MAX=2`` and one BLAS thread:
both only shrink reservations (glibc's 64 MiB arena per thread, OpenBLAS buffers) that are never touched.

The banks' bytes are random Q8_0 blocks (uniform codes in −127..127, FP16 scales around 1e−3) made by a
block codec handed to :mod:`tinymodels`' GGUF writer, because drawing and quantizing 18 GiB of floats with
gguf-py runs at ~30 MB/s (minutes per GiB); everything else in the file is tinymodels' own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.convert import _cp_seconds
from bench.timing import DEFAULT_REPEATS, interleaved, rounded, standalone

GIB = 1 << 30
MIB = 1 << 20
BANK_BYTES = 6 * GIB
NVFP4_EXPERTS, NVFP4_ROWS = 128, 2048
MEMORY_LIMIT = 1 * GIB
MIN_LIMIT = 256 * MIB
RATIO_TARGET = 0.6
Q8_0_BLOCK, Q8_0_BYTES, Q8_0_ID = 32, 34, 8

CHILD = """
import json, resource, sys, time
limit = int(sys.argv[4])
resource.setrlimit(getattr(resource, sys.argv[6]), (limit, limit))
from converters.pipeline.convert import convert
t = time.perf_counter()
r = convert(sys.argv[1], sys.argv[2], recipe=sys.argv[3], workers=int(sys.argv[5]))
s = r.summary()
print(json.dumps({"seconds": time.perf_counter() - t, "exactness": s["exactness"],
                  "worst_cosine": s.get("worst_cosine"), "objects": s["objects"]}))
"""


class RandomQ8_0:
    """A :class:`tinymodels.gguf_writer.BlockCodec` producing random Q8_0 blocks (the float rows it is
    given are ignored): block = FP16 scale ``d`` then 32 int8 codes, as ggml's ``block_q8_0``."""

    type_id, block_elements, block_bytes = Q8_0_ID, Q8_0_BLOCK, Q8_0_BYTES

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def encode(self, values: np.ndarray) -> np.ndarray:
        n_blocks = values.size // Q8_0_BLOCK
        out = np.empty((n_blocks, Q8_0_BYTES), dtype=np.uint8)
        codes = np.frombuffer(self.rng.bytes(n_blocks * Q8_0_BLOCK), dtype=np.int8).reshape(n_blocks, Q8_0_BLOCK)
        out[:, 2:] = np.maximum(codes, -127).view(np.uint8)  # ggml never writes -128
        d = (self.rng.random(n_blocks, dtype=np.float32) * 1.5e-3 + 0.5e-3).astype("<f2")
        out[:, :2] = d.view(np.uint8).reshape(n_blocks, 2)
        return out.reshape(*values.shape[:-1], values.shape[-1] // Q8_0_BLOCK * Q8_0_BYTES)


def write_bank_gguf(path: Path, bank_bytes: int, experts: int, seed: int = 0) -> dict:
    """A one-layer Qwen3-MoE GGUF whose expert banks are about ``bank_bytes`` each; returns its config."""
    import gguf

    from tinymodels import gguf_writer, qwen3, qwen3_moe, tokenizer
    from tinymodels.gguf_writer import PlannedTensor

    cfg = qwen3_moe.bank_config(bank_bytes, "Q8_0", num_experts=experts)
    tensors = []
    for t in qwen3_moe.gguf_tensors(cfg, seed, "Q8_0"):
        if "_exps." in t.name:
            def zeros(a, b, k=t.shape[-1]):
                return np.zeros((b - a, k), dtype=np.float32)  # calloc: never touched, the codec ignores it
            t = PlannedTensor(t.name, t.shape, gguf.GGMLQuantizationType.Q8_0, zeros, flat_rows=zeros,
                              codec=RandomQ8_0(seed + len(tensors)))
        tensors.append(t)

    def metadata(w) -> None:
        qwen3.add_base_metadata(w, cfg, "Bench Qwen3-MoE bank", "Q8_0")
        qwen3_moe.add_moe_metadata(w, cfg)
        gguf_writer.add_tokenizer(w, tokenizer.resources(), cfg, qwen3_moe.TOKENIZER_PRE)

    gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[qwen3_moe.ARCH], metadata, tensors)
    return cfg


def _child(src: Path, out: Path, recipe: str, workers: int, limit: int,
           rlimit: str = "RLIMIT_DATA") -> tuple[dict, int]:
    """Convert in a child under ``rlimit`` = ``limit`` bytes; its JSON result and peak RSS (bytes)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "MALLOC_ARENA_MAX": "2",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(src), str(out), recipe, str(limit),
                             str(workers), rlimit], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout = proc.stdout.read()
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{recipe} conversion under {rlimit}={limit} failed: {stderr.decode()[-2000:]}")
    return json.loads(stdout.decode().strip().splitlines()[-1]), int(usage.ru_maxrss) * 1024


def _spot_check(src: Path, out: Path, cfg: dict) -> float:
    """Max |artifact − gguf-py| over 4 rows of experts 0 and E−1 of every bank (0.0 = exact)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    from ninfer_core import codecs, open_artifact

    reader = GGUFReader(src)
    worst = 0.0
    with open_artifact(out) as art:
        for proj in ("gate", "up", "down"):
            t = next(t for t in reader.tensors if t.name == f"blk.0.ffn_{proj}_exps.weight")
            bank = art.object(f"text/layers/0/moe/experts/{proj}")
            rows = bank.shape[0] // cfg["num_experts"]
            data = art.read_range(bank.offset, bank.bytes)
            for e in (0, cfg["num_experts"] - 1):
                want = dequantize(np.asarray(t.data[e, :4]), t.tensor_type).reshape(4, -1)
                got = codecs.decode(bank.format, bank.layout, bank.shape, data, rows=(e * rows, e * rows + 4))
                worst = max(worst, float(np.max(np.abs(got - want))))
            data.release()
    return worst


def run(workdir: Path, scale: float = 1.0, repeats: int = DEFAULT_REPEATS, drop_cache: bool = True) -> list[dict]:
    """Measure; the cp ratio is the best of ``repeats`` interleaved runs of each side (bench/timing.py)."""
    workers = min(4, os.cpu_count() or 1)
    results = []
    # 1. exact, banks of BANK_BYTES x scale
    src = workdir / "moe-bank.Q8_0.gguf"
    t = time.perf_counter()
    cfg = write_bank_gguf(src, int(BANK_BYTES * scale), experts=16)
    gen_s = time.perf_counter() - t
    size = src.stat().st_size
    from tinymodels import qwen3_moe

    bank = qwen3_moe.bank_nbytes(cfg, "Q8_0")
    out = workdir / "moe-bank.exact.ninfer"
    limit = max(MIN_LIMIT, min(MEMORY_LIMIT, bank // 4))
    converted: list[tuple[dict, int]] = []
    spot = [None]

    def conversion() -> float:
        res, rss = _child(src, out, "exact", workers, limit)
        converted.append((res, rss))
        if spot[0] is None:  # the bytes are the same every run (regress pins them); checked once
            spot[0] = _spot_check(src, out, cfg)
        out.unlink()
        return res["seconds"]

    runs, dropped = interleaved({"cp": lambda: _cp_seconds(src, workdir / "copy.gguf"), "convert": conversion},
                                repeats, drop_cache)
    cp_s, conv_s = min(runs["cp"]), min(runs["convert"])
    res, rss, spot = converted[0][0], max(r[1] for r in converted), spot[0]
    detail = {"source_bytes": size, "bank_bytes": bank, "banks": 3, "experts": cfg["num_experts"],
              "expert_bytes": bank // cfg["num_experts"], "memory_limit_bytes": limit,
              "bank_over_limit": round(bank / limit, 2), "peak_rss_bytes": rss,
              "bank_over_rss": round(bank / rss, 2), "convert_seconds": round(conv_s, 2),
              "cp_seconds": round(cp_s, 2), "convert_MBps": round(size / conv_s / 1e6, 1),
              "cp_MBps": round(size / cp_s / 1e6, 1), "exactness": res["exactness"],
              "spot_check_max_abs_error": spot, "generate_seconds": round(gen_s, 1), "workers": workers,
              "repeats": repeats, "runs_peak_rss_bytes": [r[1] for r in converted]}
    results.append({"name": "MoE exact Q8_0 bank → .ninfer peak RSS (memory limit below one bank)",
                    "value": round(rss / GIB, 3), "unit": "GiB", "target": f"< {limit / GIB:.2g} GiB (bank "
                    f"{bank / GIB:.2f} GiB)", "met": rss < limit < bank and spot == 0.0, "detail": detail})
    ratio = cp_s / conv_s
    results.append({"name": "MoE exact Q8_0 bank conversion throughput vs cp", "value": round(ratio, 3),
                    "unit": "× cp", "target": f">= {RATIO_TARGET}", "met": ratio >= RATIO_TARGET,
                    "detail": {"source_bytes": size, "convert_seconds": detail["convert_seconds"],
                               "cp_seconds": detail["cp_seconds"], "repeats": repeats, "workers": workers,
                               "page_cache_dropped": dropped, "runs": rounded(runs)}})
    try:  # 2. the same under ulimit -v
        _, as_rss = _child(src, out, "exact", workers, limit, "RLIMIT_AS")
        as_detail = {"peak_rss_bytes": as_rss}
        out.unlink()
    except RuntimeError as exc:
        as_rss, as_detail = None, {"error": str(exc).splitlines()[-1][:400]}
    results.append({"name": "MoE exact conversion runs under ulimit -v below the file size",
                    "value": int(as_rss is not None), "unit": "yes=1", "target": "1", "met": as_rss is not None,
                    "detail": {**as_detail, "source_bytes": size, "rlimit_as_bytes": limit}})
    src.unlink()
    # 3. nvfp4 (requantized, one divisor per expert): 128 experts of whole 128-row scale tiles
    rows = max(128, round(NVFP4_ROWS * scale / 128) * 128)
    src = workdir / "moe-bank-nvfp4.Q8_0.gguf"
    cfg = write_bank_gguf(src, NVFP4_EXPERTS * rows * (2048 // Q8_0_BLOCK * Q8_0_BYTES), experts=NVFP4_EXPERTS,
                          seed=1)
    bank = qwen3_moe.bank_nbytes(cfg, "Q8_0")
    out = workdir / "moe-bank.nvfp4.ninfer"
    expert_f32 = 4 * cfg["moe_intermediate_size"] * cfg["hidden_size"]
    detail = {"bank_bytes": bank, "experts": cfg["num_experts"], "expert_shape": [rows, cfg["hidden_size"]],
              "expert_float32_bytes": expert_f32, "memory_limit_bytes": MEMORY_LIMIT, "workers": workers}
    try:
        res, rss = _child(src, out, "nvfp4", workers, MEMORY_LIMIT)
        detail.update(peak_rss_bytes=rss, convert_seconds=round(res["seconds"], 2),
                      source_MBps=round(src.stat().st_size / res["seconds"] / 1e6, 1), worst_cosine=res["worst_cosine"],
                      bank_over_rss=round(bank / rss, 2))
        out.unlink()
    except RuntimeError as exc:
        rss = None
        detail["error"] = str(exc).splitlines()[-1][:400]
    results.append({"name": "MoE Q8_0 bank → nvfp4 (divisor per expert) peak RSS",
                    "value": None if rss is None else round(rss / GIB, 3), "unit": "GiB",
                    "target": f"< {MEMORY_LIMIT / GIB:g} GiB", "met": rss is not None and rss < MEMORY_LIMIT,
                    "detail": detail})
    src.unlink()
    return results


if __name__ == "__main__":  # python -m bench.moe [scale]
    standalone("moe", run)
