"""``make bench`` area ``convert``: conversion throughput side by side with ``cp``, and peak memory.

1. ``exact``: a generated Qwen3.5-shaped GGUF of ≥ 4 GiB × ``scale`` (Q8_0 matrices, F32 norms, written by
   :mod:`tinymodels` the way llama.cpp writes it) converted with the ``exact`` recipe (Q8_0 → q8_g32_fp16
   transcoded, rows and whole column blocks reordered on raw bytes). Throughput is reported as a ratio
   to ``cp`` of the same file in the same run (target ≥ 0.6×), and the converter's peak RSS (target
   ≤ 1.5 GiB; the file is several times larger, so memory must not follow the model size).
2. ``groupwise-int`` from a bf16 HF directory (1 GiB × ``scale`` of weights): requantization throughput
   (decode, transform, q4/q5/q8 encode, measured error) in source bytes per second, and its ratio to one
   ``cp -r`` + ``sync`` of the directory (one run each, no target; the targeted best-of-N requantization
   rows are area ``quality``'s, bench/requantize.py).
3. passthrough only: the same directory with ``exact`` (BF16 → ``bf16``, every byte copied unchanged, in
   the kernel) against ``cp -r`` of the directory + ``sync`` of its files: target ≥ 0.9× (docs/io-speed.md
   §Benchmarks); at least :data:`PASSTHROUGH_ROUNDS` rounds.

Every targeted ratio to ``cp`` is the best of ``repeats`` interleaved runs of each side, ``sync`` and the page cache
dropped before each (bench/timing.py); ``cp`` is followed by ``sync`` of the files it wrote (their
``fsync``, as the converter ``fsync``s its own), not a machine-wide ``sync``.

Each conversion runs in a child process so its peak RSS (``wait4`` rusage) is its own.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

from bench.conversion import convert_in_child
from bench.timing import DEFAULT_REPEATS, cp_seconds, interleaved, rounded, settle, standalone

GIB = 1 << 30
RSS_TARGET = 1.5 * GIB
RATIO_TARGET = 0.6
PASSTHROUGH_TARGET = 0.9
#: rounds of the passthrough row at least: its sides are short (1-2 s) and one cp + sync of the 1.34 GB directory
#: spread over 1.1-4.0 s on the shared VM (docs/io-speed.md §Measured), so a best of 3 mostly measured cp's luck
PASSTHROUGH_ROUNDS = 5

# Qwen3.5-shaped dims: hidden 2048, 16 key / 32 value heads of 128, full attention every 4th layer.
DIMS = dict(hidden_size=2048, intermediate_size=6144, vocab_size=32768, num_attention_heads=16,
            num_key_value_heads=4, head_dim=128, linear_num_key_heads=16, linear_num_value_heads=32,
            linear_key_head_dim=128, linear_value_head_dim=128)
LAYER_Q8_BYTES = 75_000_000  # about one layer's Q8_0 bytes with DIMS (used only to pick the layer count)

def _cp_seconds(src: Path, dst: Path) -> float:
    os.sync()  # the generated input's dirty pages are not cp's to flush
    return cp_seconds(src, dst)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def run(workdir: Path, scale: float = 1.0, repeats: int = DEFAULT_REPEATS, drop_cache: bool = True) -> list[dict]:
    """Measure; the cp-ratio rows are the best of ``repeats`` interleaved runs of each side (bench/timing.py)."""
    from tinymodels import qwen35

    results = []
    workers = str(min(4, os.cpu_count() or 1))
    # 1. exact from a >= 4 GiB Q8_0 GGUF
    layers = max(4, math.ceil(4 * GIB * scale / LAYER_Q8_BYTES / 4) * 4)
    gguf = workdir / "qwen35-bench.Q8_0.gguf"
    t = time.perf_counter()
    qwen35.write_gguf(gguf, qwen35.config(num_hidden_layers=layers, **DIMS), matrix_type="Q8_0")
    gen_seconds = time.perf_counter() - t
    size = gguf.stat().st_size
    out = workdir / "exact.ninfer"
    converted: list[tuple[dict, int, float]] = []
    artifact_bytes = [0]

    def conversion() -> float:
        res, rss, wall = convert_in_child([str(gguf), str(out), "exact", workers])  # the writer fsyncs first
        converted.append((res, rss, wall))
        artifact_bytes[0] = _size(out)
        out.unlink()
        return res["seconds"]

    runs, dropped = interleaved({"cp": lambda: _cp_seconds(gguf, workdir / "copy.gguf"), "convert": conversion},
                                repeats, drop_cache)
    cp_s, conv_s = min(runs["cp"]), min(runs["convert"])
    res = converted[0][0]
    rss = max(r[1] for r in converted)
    ratio = cp_s / conv_s
    detail = {"source_bytes": size, "layers": layers, "artifact_bytes": artifact_bytes[0],
              "cp_seconds": round(cp_s, 3), "convert_seconds": round(conv_s, 3),
              "process_wall_seconds": round(min(r[2] for r in converted), 3),
              "cp_MBps": round(size / cp_s / 1e6, 1), "convert_MBps": round(size / conv_s / 1e6, 1),
              "exactness": res["summary"]["exactness"], "generate_seconds": round(gen_seconds, 1),
              "workers": int(workers), "repeats": repeats, "page_cache_dropped": dropped, "runs": rounded(runs)}
    results.append({"name": "exact Q8_0 GGUF → .ninfer throughput vs cp", "value": round(ratio, 3), "unit": "× cp",
                    "target": f">= {RATIO_TARGET}", "met": ratio >= RATIO_TARGET, "detail": detail})
    results.append({"name": "exact conversion peak RSS", "value": round(rss / GIB, 3), "unit": "GiB",
                    "target": f"<= {RSS_TARGET / GIB}", "met": rss <= RSS_TARGET,
                    "detail": {"peak_rss_bytes": rss, "source_bytes": size, "source_over_rss": round(size / rss, 2),
                               "runs_peak_rss_bytes": [r[1] for r in converted]}})
    gguf.unlink()
    # 2. groupwise-int from a bf16 HF directory
    layers = max(4, math.ceil(GIB * scale / (LAYER_Q8_BYTES * 2) / 4) * 4)
    hf = workdir / "qwen35-bench-hf"
    qwen35.write_hf_dir(hf, qwen35.config(num_hidden_layers=layers, **DIMS), shards=4)
    hf_size = _size(hf)
    # one run of each side, settled as bench/timing.py does; the targeted, best-of-N rows: area quality
    # (bench/requantize.py)
    dropped = settle(drop_cache)
    cp_s = cp_seconds(hf, workdir / "copy-hf")
    dropped = settle(drop_cache) and dropped
    res, rss, wall = convert_in_child([str(hf), str(workdir / "int.ninfer"), "groupwise-int", workers])
    conv_s = res["seconds"]
    results.append({"name": "bf16 HF → groupwise-int throughput", "value": round(hf_size / conv_s / 1e6, 1),
                    "unit": "MB/s (source)", "target": None, "met": None,
                    "detail": {"source_bytes": hf_size, "layers": layers, "convert_seconds": round(conv_s, 3),
                               "ratio_to_cp": round(cp_s / conv_s, 3), "cp_seconds": round(cp_s, 3),
                               "cp": "cp -r of the directory + sync of its files, one run",
                               "page_cache_dropped": dropped, "peak_rss_bytes": rss,
                               "exactness": res["summary"]["exactness"],
                               "worst_cosine": res["summary"].get("worst_cosine")}})
    # 3. passthrough only: the same bf16 directory with ``exact`` (every object's bytes copied unchanged)
    results.append(_passthrough(workdir, hf, hf_size, workers, max(repeats, PASSTHROUGH_ROUNDS), drop_cache))
    shutil.rmtree(hf)
    return results


def _passthrough(workdir: Path, hf: Path, hf_size: int, workers: str, repeats: int = DEFAULT_REPEATS,
                 drop_cache: bool = True) -> dict:
    """``exact`` from a bf16 directory (BF16 → bf16: every byte copied in the kernel, docs/io-speed.md
    §Unchanged bytes) against ``cp -r`` of the directory + ``sync`` of its files; best of ``repeats``
    interleaved."""
    copy, out = workdir / "copy-hf", workdir / "passthrough.ninfer"
    summary, opening = {}, []

    def conversion() -> float:
        res, _, _ = convert_in_child([str(hf), str(out), "exact", workers])
        summary.update(res["summary"])
        opening.append(res["summary"]["seconds"] - res["summary"]["write_seconds"])  # docs/io-speed.md §Fixed costs
        out.unlink()
        return res["seconds"]

    runs, dropped = interleaved({"cp": lambda: cp_seconds(hf, copy), "convert": conversion}, repeats, drop_cache)
    cp_s, conv_s = min(runs["cp"]), min(runs["convert"])
    ratio = cp_s / conv_s
    return {"name": "passthrough-only conversion (bf16 HF → exact) throughput vs cp", "value": round(ratio, 3),
            "unit": "× cp", "target": f">= {PASSTHROUGH_TARGET}", "met": ratio >= PASSTHROUGH_TARGET,
            "detail": {"source_bytes": hf_size, "cp_seconds": round(cp_s, 3), "convert_seconds": round(conv_s, 3),
                       "cp_MBps": round(hf_size / cp_s / 1e6, 1), "convert_MBps": round(hf_size / conv_s / 1e6, 1),
                       "exactness": summary.get("exactness"), "repeats": repeats, "workers": int(workers),
                       "page_cache_dropped": dropped, "runs": rounded(runs),
                       "convert_open_seconds": [round(s, 3) for s in opening]}}


if __name__ == "__main__":  # python -m bench.convert [scale]
    standalone("convert", run)
