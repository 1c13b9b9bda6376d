"""``make bench`` area ``scale``: real geometries at their real size, converted with acceptance.

1. A Qwen2.5-7B-geometry GGUF (the published config, :mod:`tinymodels.real`: hidden 3584, 28 layers, 28/4
   heads, vocabulary 152064; 339 tensors, about 4.7 GB) typed as llama.cpp's ``Q4_K_M`` writes it
   (:func:`q4_k_m_type`), converted ``exact`` and ``groupwise-int``, each followed by acceptance
   (:func:`converters.acceptance.accept.accept_written`, the gates a conversion runs). Reported: the time of
   conversion plus acceptance as a multiple of one ``cp`` + ``sync`` of the same file (target for ``exact``:
   ≤ :data:`TIME_TARGET` ×), and the peak RSS of the process doing both (target ≤ :data:`RSS_TARGET`).
2. A Qwen3-30B-A3B-geometry MoE (hidden 2048, 128 experts of 768, vocabulary 151936) with :data:`MOE_LAYERS`
   layers, same types, converted ``exact`` with acceptance: time against ``cp`` + ``sync`` and peak RSS.

Block bytes are random but valid (:class:`RandomBlocks`: uniform codes and scale bytes, finite FP16 super-block
scales), made by a block codec handed to tinymodels' GGUF writer as in area ``moe`` — quantizing 7.6 G floats
with gguf-py would take hours; the norms, biases, router and every metadata key are tinymodels' own. The
``Q4_K`` / ``Q6_K`` choice per tensor follows llama.cpp's ``llama_tensor_get_type`` for ``LLAMA_FTYPE_MOSTLY_Q4_K_M``.

``scale`` keeps the 7B model's layers × ``scale`` (at least 1; the widths stay real); the MoE keeps its
:data:`MOE_LAYERS`. One run of each side (a 7B conversion with acceptance is minutes on 2 cores), the page cache
settled before each as bench/timing.py does. :data:`SHRINK` and :data:`VOCAB` (tests only) divide the widths
and set the vocabulary (rows that are not whole 256-weight super-blocks then take llama.cpp's fallback types).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np

from bench.conversion import drain
from bench.timing import cp_seconds, settle, standalone

GIB = 1 << 30
TIME_TARGET = 4.0
RSS_TARGET = 2 * GIB
MOE_LAYERS = 2
#: width divisor and vocabulary of the generated models (tests make them tiny; the bench keeps them real)
SHRINK = 1
VOCAB: int | None = None
Q5_0, Q8_0, Q4_K, Q6_K = 6, 8, 12, 14  # GGML type ids
Q4_K_M_FILE_TYPE = 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M

CHILD = """
import json, sys, time
from converters.pipeline.convert import convert
from converters.acceptance.accept import accept_written
t = time.perf_counter()
r = convert(sys.argv[1], sys.argv[2], recipe=sys.argv[3], workers=int(sys.argv[4]))
converted = time.perf_counter()
a = accept_written(sys.argv[2], sys.argv[1])
done = time.perf_counter()
s = r.summary()
print(json.dumps({"convert_seconds": converted - t, "acceptance_seconds": done - converted,
                  "verdict": a.verdict, "failures": a.failures()[:5], "exactness": s["exactness"],
                  "worst_cosine": s.get("worst_cosine"), "objects": s["objects"]}))
"""


class RandomBlocks:
    """A :class:`tinymodels.gguf_writer.BlockCodec` of random blocks of a GGML type (the float rows it is given
    are ignored). ggml ``block_q4_K``: FP16 ``d``, FP16 ``dmin``, 12 packed scale bytes, 128 code bytes (144
    bytes per 256 weights); ``block_q6_K``: 128 + 64 code bytes, 16 int8 scales, FP16 ``d`` (210); the
    fallbacks ``block_q5_0``: FP16 ``d``, 4 + 16 code bytes (22 per 32) and ``block_q8_0``: FP16 ``d``, 32
    int8 codes (34 per 32). Every byte pattern is a valid block except a non-finite FP16 scale, so those are
    drawn in [0.5e-3, 2e-3), and the int8 code -128, which ggml never writes."""

    #: type id -> (weights per block, bytes per block, offsets of the FP16 scales)
    LAYOUTS = {Q4_K: (256, 144, (0, 2)), Q6_K: (256, 210, (208,)), Q5_0: (32, 22, (0,)), Q8_0: (32, 34, (0,))}

    def __init__(self, type_id: int, seed: int) -> None:
        self.type_id = type_id
        self.block_elements, self.block_bytes, self.halves = self.LAYOUTS[type_id]
        self.rng = np.random.default_rng(seed)

    def encode(self, values: np.ndarray) -> np.ndarray:
        n = values.size // self.block_elements
        out = np.frombuffer(self.rng.bytes(n * self.block_bytes), dtype=np.uint8).reshape(n, self.block_bytes).copy()
        if self.type_id == Q8_0:
            np.maximum(out[:, 2:].view(np.int8), -127, out=out[:, 2:].view(np.int8))
        for at in self.halves:
            scale = (self.rng.random(n, dtype=np.float32) * 1.5e-3 + 0.5e-3).astype("<f2")
            out[:, at:at + 2] = scale.view(np.uint8).reshape(n, 2)
        return out.reshape(*values.shape[:-1], values.shape[-1] // self.block_elements * self.block_bytes)


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp ``use_more_bits``: the first and last eighth of the layers and every third one between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def q4_k_m_type(name: str, row: int, layers: int) -> int:
    """The type llama.cpp's ``Q4_K_M`` gives the quantized matrix ``name`` of rows of ``row`` weights:
    ``output`` Q6_K; ``attn_v`` and ``ffn_down`` (experts included) Q6_K in the layers :func:`use_more_bits`
    picks; every other Q4_K; a row that is not whole super-blocks falls back (Q4_K → Q5_0, Q6_K → Q8_0)."""
    if name == "output.weight":
        chosen = Q6_K
    elif (".attn_v." in name or ".ffn_down" in name) and use_more_bits(int(name.split(".")[1]), layers):
        chosen = Q6_K
    else:
        chosen = Q4_K
    if row % 256:
        return {Q4_K: Q5_0, Q6_K: Q8_0}[chosen]
    return chosen


def _retyped(write: Callable, layers: int) -> Callable:
    """``gguf_writer.write_gguf_file`` writing every planned Q8_0 matrix as random Q4_K_M blocks instead
    (norms, biases and the router stay F32, as llama.cpp keeps them), ``general.file_type`` Q4_K_M."""
    import gguf

    from tinymodels.gguf_writer import PlannedTensor

    def zeros(a: int, b: int, k: int) -> np.ndarray:
        return np.zeros((b - a, k), dtype=np.float32)  # never touched: the codec ignores its input

    def wrapped(path, arch, add_metadata, tensors):
        out = []
        for i, t in enumerate(tensors):
            if t.qtype == gguf.GGMLQuantizationType.Q8_0:
                rows = lambda a, b, k=t.shape[-1]: zeros(a, b, k)  # noqa: E731
                t = PlannedTensor(t.name, t.shape, t.qtype, rows, flat_rows=rows,
                                  codec=RandomBlocks(q4_k_m_type(t.name, t.shape[-1], layers), i))
            out.append(t)

        def metadata(w) -> None:
            add_metadata(w)
            for kv in w.kv_data:
                if gguf.Keys.General.FILE_TYPE in kv:
                    kv[gguf.Keys.General.FILE_TYPE] = gguf.GGUFValue(Q4_K_M_FILE_TYPE, gguf.GGUFValueType.UINT32)

        return write(path, arch, metadata, out)

    return wrapped


def write_q4_k_m(path: Path, name: str, layers: int | None) -> dict:
    """The real geometry ``name`` (:mod:`tinymodels.real`) as a Q4_K_M GGUF with random blocks; its config."""
    from tinymodels import gguf_writer, real

    cfg = real.geometry(name, layers=layers, shrink=SHRINK, vocab=VOCAB)
    with mock.patch.object(gguf_writer, "write_gguf_file", _retyped(gguf_writer.write_gguf_file,
                                                                     cfg["num_hidden_layers"])):
        real.write_gguf(path, name, cfg, matrix_type="Q8_0")
    return cfg


def _child(src: Path, out: Path, recipe: str, workers: int) -> tuple[dict, int]:
    """Convert and accept in a child; its JSON result and peak RSS (bytes, ``wait4``)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(src), str(out), recipe, str(workers)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout, stderr = drain(proc)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{recipe} conversion of {src.name} failed: {stderr.decode()[-2000:]}")
    return json.loads(stdout.decode().strip().splitlines()[-1]), int(usage.ru_maxrss) * 1024


def _measure(workdir: Path, src: Path, recipe: str, label: str, drop_cache: bool, target: bool,
             extra: dict) -> list[dict]:
    """One ``cp`` + ``sync`` of ``src`` and one conversion with acceptance, settled before each: two rows."""
    workers = min(4, os.cpu_count() or 1)
    dropped = settle(drop_cache)
    cp_s = cp_seconds(src, workdir / "copy.gguf")
    dropped = settle(drop_cache) and dropped
    out = workdir / f"{recipe}.ninfer"
    res, rss = _child(src, out, recipe, workers)
    out.unlink()
    total = res["convert_seconds"] + res["acceptance_seconds"]
    ratio = total / cp_s
    passed = res["verdict"] == "pass"
    detail = {**extra, "source_bytes": src.stat().st_size, "recipe": recipe, "cp_seconds": round(cp_s, 3),
              "convert_seconds": round(res["convert_seconds"], 3),
              "acceptance_seconds": round(res["acceptance_seconds"], 3), "total_seconds": round(total, 3),
              "verdict": res["verdict"], "failures": res["failures"], "exactness": res["exactness"],
              "worst_cosine": res["worst_cosine"], "peak_rss_bytes": rss, "workers": workers,
              "page_cache_dropped": dropped, "cp": "cp of the file + sync of the copy, one run"}
    return [
        {"name": f"{label} → {recipe} + acceptance, time vs cp + sync", "value": round(ratio, 3),
         "unit": "× cp time", "target": f"<= {TIME_TARGET}" if target else None,
         "met": (ratio <= TIME_TARGET and passed) if target else None, "detail": detail},
        {"name": f"{label} → {recipe} + acceptance, peak RSS", "value": round(rss / GIB, 3), "unit": "GiB",
         "target": f"<= {RSS_TARGET / GIB:g}" if target else None,
         "met": (rss <= RSS_TARGET) if target else None,
         "detail": {"peak_rss_bytes": rss, "source_bytes": src.stat().st_size, "verdict": res["verdict"]}},
    ]


def run(workdir: Path, scale: float = 1.0, drop_cache: bool = True) -> list[dict]:
    """Generate, measure, remove (module docstring)."""
    results = []
    dense = workdir / "qwen2.5-7b.Q4_K_M.gguf"
    layers = max(1, round(28 * scale))
    t = time.perf_counter()
    cfg = write_q4_k_m(dense, "qwen2.5-7b", layers)
    extra = {"geometry": "qwen2.5-7b", "layers": cfg["num_hidden_layers"], "hidden_size": cfg["hidden_size"],
             "vocab_size": cfg["vocab_size"], "generate_seconds": round(time.perf_counter() - t, 1)}
    for recipe in ("exact", "groupwise-int"):
        results += _measure(workdir, dense, recipe, "7B-geometry Q4_K_M GGUF", drop_cache, recipe == "exact", extra)
    dense.unlink()
    moe = workdir / "qwen3-30b-a3b.Q4_K_M.gguf"
    t = time.perf_counter()
    cfg = write_q4_k_m(moe, "qwen3-30b-a3b", MOE_LAYERS)
    extra = {"geometry": "qwen3-30b-a3b", "layers": cfg["num_hidden_layers"], "num_experts": cfg["num_experts"],
             "hidden_size": cfg["hidden_size"], "generate_seconds": round(time.perf_counter() - t, 1)}
    results += _measure(workdir, moe, "exact", f"Qwen3-30B-A3B-geometry MoE ({MOE_LAYERS} layers, "
                        f"{cfg['num_experts']} experts) Q4_K_M GGUF", drop_cache, False, extra)
    moe.unlink()
    return results


if __name__ == "__main__":  # python -m bench.scale [scale]
    standalone("scale", run)
