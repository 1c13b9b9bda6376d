"""Codec benchmarks, measured side by side with gguf-py in the same run.

- bf16 → q4_g64_fp16 ``absmax`` encode vs ``gguf.quants.quantize(x, Q4_0)`` on the same matrix (≥ 3×);
- decode q4_g64_fp16 / q8_g32_fp16 vs ``gguf.quants.dequantize`` of Q4_0 / Q8_0 (≥ 2×);
- Q8_0 → q8_g32_fp16 exact transcode throughput on one thread (≥ 1 GB/s of source bytes);
- decoded RMS error of ``mse`` vs ``absmax`` on Gaussian and heavy-tailed (Student-t, 3 dof) data.

The matrix is ``n × n`` with ``n = 4096 · scale`` (rounded to 256, at least 512). Times are the best of a
few repetitions after one warm-up call; ratios alternate ours and gguf-py so both see the same load.
"""

from __future__ import annotations

import contextlib
import logging
import pathlib
import time

import gguf.quants
import ml_dtypes
import numpy as np
from gguf.constants import GGMLQuantizationType as QT

from ninfer_core import codecs

log = logging.getLogger(__name__)
RS = "row_split_k128_v1"


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _best(fn, repeats: int = 3) -> float:
    fn()
    return min(_time(fn) for _ in range(repeats))


def _side_by_side(ours, peer, rounds: int = 5) -> tuple[float, float]:
    """Best time of each, measured in alternation so that both see the same machine load."""
    ours(), peer()
    times = [(_time(ours), _time(peer)) for _ in range(rounds)]
    return min(t[0] for t in times), min(t[1] for t in times)


@contextlib.contextmanager
def _one_thread():
    threads = codecs.get_threads()
    codecs.set_threads(1)
    try:
        yield
    finally:
        codecs.set_threads(threads)


def _ratio(name: str, ours: float, peer: float, peer_name: str, target: float, detail: dict) -> dict:
    ratio = peer / ours
    return {"name": name, "value": round(ratio, 2), "unit": "x", "target": f">= {target}x", "met": ratio >= target,
            "detail": {"ours_s": round(ours, 4), f"{peer_name}_s": round(peer, 4), **detail}}


def run(workdir: pathlib.Path, scale: float = 1.0) -> list[dict]:
    n = max(512, int(4096 * scale) // 256 * 256)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n)).astype(np.float32).astype(ml_dtypes.bfloat16)
    shape = [n, n]
    info = {"shape": shape, "threads": codecs.get_threads()}
    results = []

    # both return the array they built (gguf-py: an ndarray; ours: as_array, as the converter calls it)
    ours, peer = _side_by_side(lambda: codecs.encode("q4_g64_fp16", RS, x, as_array=True),
                               lambda: gguf.quants.quantize(x, QT.Q4_0))
    with _one_thread():
        one = _best(lambda: codecs.encode("q4_g64_fp16", RS, x, as_array=True))
    results.append(_ratio("encode bf16 -> q4_g64_fp16 absmax vs gguf-py Q4_0", ours, peer, "gguf_py", 3,
                          {**info, "ours_one_thread_s": round(one, 4),
                           "one_thread_ratio": round(peer / one, 2)}))  # per core: gguf-py is one thread

    for fmt, qt in (("q4_g64_fp16", QT.Q4_0), ("q8_g32_fp16", QT.Q8_0)):
        data = codecs.encode(fmt, RS, x)
        raw = gguf.quants.quantize(x, qt)
        ours, peer = _side_by_side(lambda f=fmt, d=data: codecs.decode(f, RS, shape, d),
                                   lambda r=raw, q=qt: gguf.quants.dequantize(r, q))
        results.append(_ratio(f"decode {fmt} vs gguf-py {qt.name}", ours, peer, "gguf_py", 2, info))

    raw = gguf.quants.quantize(x, QT.Q8_0)
    threads = codecs.get_threads()
    # steady state, as in a conversion that transcodes tensor after tensor: the first calls pay page faults
    # until glibc's adaptive mmap/trim thresholds keep the output buffers' pages (about three calls here)
    # measured as the converter calls it (``as_array``: the array it was built in, no ``bytes`` copy); the
    # ``bytes`` result's extra copy into fresh pages is reported beside it (docs/io-speed.md §Write path)
    with _one_thread():
        one = _best(lambda: codecs.transcode_ggml("Q8_0", raw, shape, "q8_g32_fp16", as_array=True), repeats=7)
        one_bytes = _best(lambda: codecs.transcode_ggml("Q8_0", raw, shape, "q8_g32_fp16"), repeats=7)
    many = _best(lambda: codecs.transcode_ggml("Q8_0", raw, shape, "q8_g32_fp16", as_array=True))
    gbps = raw.nbytes / one / 1e9
    results.append({"name": "transcode Q8_0 -> q8_g32_fp16, one thread", "value": round(gbps, 2), "unit": "GB/s",
                    "target": ">= 1 GB/s", "met": gbps >= 1.0,
                    "detail": {"source_bytes": raw.nbytes, "one_thread_s": round(one, 4),
                               "one_thread_bytes_result_GBps": round(raw.nbytes / one_bytes / 1e9, 2),
                               f"{threads}_threads_GBps": round(raw.nbytes / many / 1e9, 2), "shape": shape}})

    m = max(64, n // 16)
    for dist, sample in (("gaussian", rng.standard_normal((m, 4096))), ("student-t3", rng.standard_t(3, (m, 4096)))):
        data = (sample * 0.02).astype(np.float32)
        for fmt in ("q4_g64_fp16", "q2_g64_fp16", "t2_g128_fp16"):
            rms = {}
            for enc in codecs.ENCODERS:
                y = codecs.decode(fmt, RS, data.shape, codecs.encode(fmt, RS, data, encoder=enc))
                rms[enc] = float(np.sqrt(np.mean((data.astype(np.float64) - y) ** 2)))
            rel = rms["mse"] / rms["absmax"]
            results.append({"name": f"{fmt} mse / absmax RMS error, {dist}", "value": round(rel, 4), "unit": "ratio",
                            "target": "< 1", "met": rel < 1,
                            "detail": {"rms_absmax": rms["absmax"], "rms_mse": rms["mse"], "shape": list(data.shape)}})
    for r in results:
        log.info("%s: %s %s (target %s)", r["name"], r["value"], r["unit"], r["target"])
    return results
