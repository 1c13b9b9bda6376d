"""Requantization speed side by side with ``cp`` (``make bench`` area ``quality``; docs/imatrix.md
§Requantization speed).

Source: a generated bf16 HF directory of a Qwen3.5-shaped model (:mod:`tinymodels`' writer, the dims of
area ``convert``; about 1 GiB × ``scale`` of weights, in whole groups of four layers) — the checkpoint
form a model hub publishes and a user requantizes. Three conversions of it, each in a child process
(bench/conversion.py, timed after its imports):

- ``groupwise-int`` (q4/q5 projections, q8 embedding and head): target ≥ :data:`TARGETS` × ``cp``;
- ``nvfp4`` from the same dense directory (an expert bank → nvfp4 is area ``moe``'s, measured there for
  memory);
- ``groupwise-int --imatrix``: an importance file written for this model as ``llama-imatrix`` writes it
  (GGUF form, one ``in_sum2`` / ``counts`` pair per matrix that multiplies an activation, under the GGUF
  names llama.cpp gives the model's tensors — docs/imatrix.md §Name mapping; the token embedding is a
  row lookup, which llama-imatrix does not record). The row is reported as not run unless the
  conversion's summary shows the weights used for every requantized object but the embedding.

against ``cp -r`` of the directory + ``sync`` of its files: every side ``repeats`` times, interleaved, the
page cache dropped before each run (bench/timing.py); each row's ratio is the best ``cp`` over its best
conversion. Each row also reports MB/s of source, the rate per worker and per CPU second next to
llama-quantize's (:data:`PEER_MBPS_PER_THREAD`, a published figure, not measured here),
``ratio_at_full_cpu_use`` (``cp`` over the conversion's CPU seconds per worker: the ratio its CPU work
would allow with every worker busy, nothing else running and reading overlapped — how far the wall time
is from it is waiting, on the disk or on the machine's other work), and the measured
error of what was written (worst cosine, a digest of every object's error: a later run compares them to
see that a faster encoder did not change the error).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

import numpy as np

from bench.conversion import convert_in_child
from bench.convert import DIMS
from bench.timing import DEFAULT_REPEATS, cp_seconds, interleaved, rounded, standalone

GIB = 1 << 30
#: conversion name → (recipe, with an importance file, target ratio to cp)
TARGETS = {"groupwise-int": ("groupwise-int", False, 0.5), "nvfp4": ("nvfp4", False, 0.3),
           "groupwise-int --imatrix": ("groupwise-int", True, 0.35)}
#: llama-quantize's rate per thread for Q4_0 (about 80 MB/s of source per thread on 20 threads)
PEER_MBPS_PER_THREAD = 80.0
#: HF tensors llama-imatrix has no entry for (a row lookup, not a product)
NOT_RECORDED = ("model.embed_tokens.weight",)
CHUNK_TOKENS, CHUNKS = 512, 100


def source_layers(scale: float, dims: dict) -> int:
    """Layers (a multiple of 4: full attention every 4th) for about 1 GiB × ``scale`` of bf16 weights."""
    from tinymodels import qwen35

    def size(layers: int) -> int:
        return sum(2 * math.prod(s.shape) for s in qwen35.tensor_specs(qwen35.config(num_hidden_layers=layers,
                                                                                    **dims)))

    per_four = size(8) - size(4)
    return 4 * max(1, math.ceil((GIB * scale - (size(4) - per_four)) / per_four))


def write_imatrix(path: Path, cfg: dict, seed: int = 0) -> list[str]:
    """An importance file for the model of ``cfg`` as llama-imatrix writes it (GGUF form): for every
    matrix llama.cpp multiplies an activation by (2-D ``.weight`` but the token embedding and the
    convolution), ``in_sum2`` (per-column sums of x², log-normal: a few columns far larger, as real
    activations have) and ``counts``, under the GGUF names of tinymodels' llama.cpp-layout writer. Returns
    the names."""
    import gguf

    from tinymodels import qwen35

    class Writer(gguf.GGUFWriter):
        def add_architecture(self) -> None:  # an imatrix file has no general.architecture
            pass

    rng = np.random.default_rng(seed)
    w = Writer(path=None, arch="")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["synthetic: log-normal column statistics (bench/requantize.py)"])
    w.add_uint32("imatrix.chunk_count", CHUNKS)
    w.add_uint32("imatrix.chunk_size", CHUNK_TOKENS)
    names = []
    for t in qwen35.gguf_tensors(cfg):
        if len(t.shape) != 2 or not t.name.endswith(".weight") or t.name.startswith("token_embd") \
                or ".ssm_conv1d." in t.name:
            continue
        tokens = CHUNKS * CHUNK_TOKENS
        sum2 = rng.lognormal(0.0, 1.0, size=(1, t.shape[-1])) * tokens
        w.add_tensor(t.name + ".in_sum2", sum2.astype(np.float32))
        w.add_tensor(t.name + ".counts", np.array([[tokens]], dtype=np.float32))
        names.append(t.name)
    w.write_header_to_file(path=path)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return names


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(workdir: Path, scale: float = 1.0, repeats: int = DEFAULT_REPEATS, drop_cache: bool = True) -> list[dict]:
    """The three rows (module docstring); every side ``repeats`` times, interleaved with ``cp``."""
    from tinymodels import qwen35

    workers = min(4, os.cpu_count() or 1)
    layers = source_layers(scale, DIMS)
    cfg = qwen35.config(num_hidden_layers=layers, **DIMS)
    hf = workdir / "qwen35-requantize-hf"
    started = time.perf_counter()
    qwen35.write_hf_dir(hf, cfg, shards=4)
    imatrix = workdir / "qwen35-requantize.imatrix"
    entries = write_imatrix(imatrix, cfg)
    generate_seconds = time.perf_counter() - started
    size = _size(hf)
    out = workdir / "requantized.ninfer"
    results: dict[str, list[dict]] = {name: [] for name in TARGETS}

    def side(name: str):
        recipe, weighted, _ = TARGETS[name]

        def conversion() -> float:
            res, rss, wall = convert_in_child([str(hf), str(out), recipe, str(workers)]
                                              + ([str(imatrix)] if weighted else []))
            results[name].append({**res, "peak_rss_bytes": rss, "process_wall_seconds": wall})
            out.unlink()
            return res["seconds"]
        return conversion

    sides = {"cp": lambda: cp_seconds(hf, workdir / "copy-hf"), **{name: side(name) for name in TARGETS}}
    try:
        runs, dropped = interleaved(sides, repeats, drop_cache)
    finally:
        shutil.rmtree(hf, ignore_errors=True)
    source = {"source": f"generated bf16 HF directory, Qwen3.5-shaped, {layers} layers (tinymodels.qwen35, "
                        "bench/convert.py DIMS)", "source_bytes": size, "layers": layers, "workers": workers,
              "cpus": os.cpu_count(), "repeats": repeats, "page_cache_dropped": dropped,
              "generate_seconds": round(generate_seconds, 1)}
    cp_s = min(runs["cp"])
    rows = []
    for name, (recipe, weighted, target) in TARGETS.items():
        done = results[name]
        best = min(range(len(done)), key=lambda i: done[i]["seconds"])
        conv_s, cpu_s = done[best]["seconds"], done[best]["cpu_seconds"]
        summary = done[best]["summary"]
        mbps = size / conv_s / 1e6
        digests = {r["measured_error"]["sha256"] for r in done}
        detail = {**source, "recipe": recipe, "cp_seconds": round(cp_s, 3), "convert_seconds": round(conv_s, 3),
                  "cp_MBps": round(size / cp_s / 1e6, 1), "source_MBps": round(mbps, 1),
                  "MBps_per_worker": round(mbps / workers, 1), "cpu_seconds": round(cpu_s, 3),
                  "MB_per_cpu_second": round(size / cpu_s / 1e6, 1),
                  "peer_llama_quantize_q4_0_MBps_per_thread": PEER_MBPS_PER_THREAD,
                  "per_cpu_second_vs_peer": round(size / cpu_s / 1e6 / PEER_MBPS_PER_THREAD, 3),
                  "ratio_at_full_cpu_use": round(cp_s / (cpu_s / workers), 3),
                  "peak_rss_bytes": max(r["peak_rss_bytes"] for r in done),
                  "exactness": summary["exactness"], "worst_cosine": summary.get("worst_cosine"),
                  "measured_error": {**done[best]["measured_error"], "same_in_every_run": len(digests) == 1},
                  "runs": rounded({"cp": runs["cp"], name: runs[name]}),
                  "runs_cpu_seconds": [round(r["cpu_seconds"], 3) for r in done]}
        ratio = cp_s / conv_s
        row = {"name": f"bf16 HF → {name} requantization throughput vs cp", "value": round(ratio, 3),
               "unit": "× cp", "target": f">= {target}", "met": ratio >= target, "detail": detail}
        if weighted:
            used, detail["importance"] = _importance_used(done[best], entries, imatrix.name)
            if not used:
                row.update(value=None, met=False)
                detail["not_run"] = ("the importance weights were not used for every requantized object but the "
                                     "embedding, so this is not a weighted conversion's speed")
        rows.append(row)
    return rows


def _importance_used(result: dict, entries: list[str], file: str) -> tuple[bool, dict]:
    """Whether the conversion weighted every requantized object whose source tensor has an entry (all but
    :data:`NOT_RECORDED`), from its summary; and the figures it was judged by."""
    summary = result["summary"]
    imp = summary.get("importance") or {}
    requantized = summary["exactness"].get("requantized", 0)
    weighted = imp.get("objects_weighted", 0)
    missing = result.get("importance_missing") or []
    used = (imp.get("file") == file and weighted > 0 and set(missing) <= set(NOT_RECORDED)
            and requantized - weighted <= len(missing))
    return used, {"file_entries": len(entries), "requantized_objects": requantized, "objects_weighted": weighted,
                  "objects_unweighted": imp.get("objects_unweighted"), "missing": missing}


if __name__ == "__main__":  # python -m bench.requantize [scale]
    standalone("requantize", run)
