"""``make bench`` area ``prequantized``: an NVFP4 checkpoint converted without requantizing, against ``cp``.

A compressed-tensors ``nvfp4-pack-quantized`` Qwen3 HF checkpoint is *generated* here with numpy, laid out
as llm-compressor saves one (docs/prequantized.md; the shipped fixture ``tests/fixtures/prequantized/ct-nvfp4``
is the library's own output at a tiny size): ``config.json`` with ``quantization_config`` (W4A4, static
activation scales, ``ignore: [lm_head]``), sharded safetensors with an index, tokenizer files; per Linear
``weight_packed`` U8 ``[N, K/2]``, ``weight_scale`` F8_E4M3 ``[N, K/16]``, ``weight_global_scale`` and
``input_global_scale`` F32 ``[1]``; embeddings, norms and ``lm_head`` BF16. The codes are random bytes,
the block scales random finite positive e4m3 values, so every kept byte is checked by nothing but the
converter's own geometry: this measures speed, the tests measure values.

At two sizes (1 GiB and 4 GiB of checkpoint × ``scale``) the checkpoint is converted with the ``exact``
recipe, as ``convert st2ninfer --recipe exact`` does (codes and block scales copied into ``nvfp4``, the
global scale the divisor), in a child process timed after its imports, interleaved with ``cp -r`` of the
directory + ``sync`` of its files, best of ``repeats`` (bench/timing.py). Reported: throughput as a ratio to ``cp``
(target ≥ 0.6× at the larger size) and the child's peak RSS (``wait4``) at both sizes — the larger
checkpoint must not need more memory than the smaller one (target: within 25 %, memory flat in model size).

If the conversion is refused (the source kind not supported by this build), the rows say ``not run`` with
the error, and the area still succeeds.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.timing import DEFAULT_REPEATS, cp_seconds, interleaved, rounded, standalone

GIB = 1 << 30
MIB = 1 << 20
RATIO_TARGET = 0.6
FLAT_TARGET = 1.25  # peak RSS at the larger size over the smaller one
SIZES = (1 * GIB, 4 * GIB)
SHARD_BYTES = 1 * GIB  # HF's save_pretrained cuts shards by a byte budget too (5 GB by default)
CHUNK_BYTES = 64 * MIB  # generated and written at a time
GROUP = 16  # NVFP4: one e4m3 block scale per 16 values along K

# Qwen3-8B-shaped layers (hidden 4096, 32 × 128 query heads, 8 KV heads, intermediate 12288): 109 MB of NVFP4
# codes and block scales per layer, so 1 GiB is ~10 layers, 4 GiB ~40.
DIMS = dict(hidden_size=4096, intermediate_size=12288, num_attention_heads=32, num_key_value_heads=8,
            head_dim=128, vocab_size=512, tie_word_embeddings=False)
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

QUANTIZATION_CONFIG = {  # as compressed-tensors 0.12+ writes it for llm-compressor's NVFP4 scheme
    "config_groups": {"group_0": {
        "format": "nvfp4-pack-quantized",
        "input_activations": {"actorder": None, "block_structure": None, "dynamic": "local", "group_size": GROUP,
                              "num_bits": 4, "observer": "static_minmax", "observer_kwargs": {},
                              "scale_dtype": "torch.float8_e4m3fn", "strategy": "tensor_group", "symmetric": True,
                              "type": "float", "zp_dtype": None},
        "output_activations": None, "targets": ["Linear"],
        "weights": {"actorder": None, "block_structure": None, "dynamic": False, "group_size": GROUP, "num_bits": 4,
                    "observer": "memoryless_minmax", "observer_kwargs": {}, "scale_dtype": "torch.float8_e4m3fn",
                    "strategy": "tensor_group", "symmetric": True, "type": "float", "zp_dtype": None}}},
    "format": "nvfp4-pack-quantized", "global_compression_ratio": None, "ignore": ["lm_head"],
    "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed",
    "sparsity_config": {}, "transform_config": {}, "version": "0.12.2",
}

CHILD = """
import json, sys, time
from converters.pipeline.convert import convert
t = time.perf_counter()
r = convert(sys.argv[1], sys.argv[2], recipe="exact", workers=int(sys.argv[3]), expect_kind="hf")
s = r.summary()
print(json.dumps({"seconds": time.perf_counter() - t, "exactness": s["exactness"],
                  "prequantized": s.get("prequantized"), "objects": s["objects"]}))
"""


def layer_bytes(cfg: dict) -> int:
    """NVFP4 bytes (codes + block scales + two fp32 scales) of one decoder layer's Linears."""
    return sum(n * k // 2 + n * k // GROUP + 8 for n, k in _linears(cfg).values())


def _linears(cfg: dict) -> dict[str, tuple[int, int]]:
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    return {"self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
            "self_attn.o_proj": (h, q), "mlp.gate_proj": (i, h), "mlp.up_proj": (i, h), "mlp.down_proj": (h, i)}


def config_for(nbytes: int, dims: dict | None = None) -> dict:
    """The Qwen3 config (``dims``, default :data:`DIMS`) whose NVFP4 checkpoint is about ``nbytes`` (at least
    one layer)."""
    from tinymodels import qwen3

    dims = DIMS if dims is None else dims
    layers = max(1, round(nbytes / layer_bytes(qwen3.config(num_hidden_layers=1, **dims))))
    return {**qwen3.config(num_hidden_layers=layers, **dims), "quantization_config": QUANTIZATION_CONFIG}


class _Tensor:
    """One safetensors entry: name, dtype, shape and a function making its bytes ``[a, b)``."""

    def __init__(self, name: str, dtype: str, shape: tuple[int, ...], make) -> None:
        self.name, self.dtype, self.shape, self.make = name, dtype, shape, make
        self.nbytes = int(np.prod(shape)) * (4 if dtype == "F32" else 2 if dtype == "BF16" else 1)


def _tensors(cfg: dict, rng: np.random.Generator) -> list[_Tensor]:
    """Every tensor of the checkpoint in name order: BF16 embeddings/norms/head, NVFP4 parts per Linear."""
    from tinymodels import qwen3

    out = []
    for spec in qwen3.tensor_specs(cfg):
        module = spec.name.removesuffix(".weight")
        if module.rsplit(".", 1)[-1] in LINEAR:
            n, k = spec.shape
            # a global scale of the size llm-compressor derives (448 * 6 / amax) for weights of amax ~0.05-0.2
            wg = np.float32(rng.uniform(1.3e4, 5.4e4))
            ig = np.float32(rng.uniform(100.0, 1000.0))
            out += [_Tensor(f"{module}.input_global_scale", "F32", (1,), lambda a, b, v=ig: np.array([v]).tobytes()),
                    _Tensor(f"{module}.weight_global_scale", "F32", (1,), lambda a, b, v=wg: np.array([v]).tobytes()),
                    _Tensor(f"{module}.weight_packed", "U8", (n, k // 2), lambda a, b: rng.bytes(b - a)),
                    _Tensor(f"{module}.weight_scale", "F8_E4M3", (n, k // GROUP), lambda a, b: _e4m3(rng, b - a))]
        else:  # bf16 values of tinymodels' own (small: norms, a 512-token vocabulary)
            values = spec.values(0).astype(np.float32)
            out.append(_Tensor(spec.name, "BF16", spec.shape,
                               lambda a, b, v=values: (v.view(np.uint32) >> 16).astype("<u2").tobytes()[a:b]))
    return sorted(out, key=lambda t: t.name)


def _e4m3(rng: np.random.Generator, n: int) -> bytes:
    """``n`` random positive normal float8_e4m3fn bytes (exponent fields 4..11: 2^-3 .. 2^4; never NaN)."""
    return (rng.integers(0x20, 0x60, size=n, dtype=np.uint8)).tobytes()


def write_checkpoint(path: Path, nbytes: int, seed: int = 0, dims: dict | None = None) -> dict:
    """Write the NVFP4 checkpoint directory ``path`` of about ``nbytes`` (model ``dims``, default :data:`DIMS`);
    returns its config."""
    from tinymodels import tokenizer
    from tinymodels.gguf_writer import write_resources

    cfg = config_for(nbytes, dims)
    rng = np.random.default_rng(seed)
    tensors = _tensors(cfg, rng)
    shards, current, size = [], [], 0
    for t in tensors:  # cut by a byte budget in name order, as save_pretrained does
        if current and size + t.nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = [], 0
        current.append(t)
        size += t.nbytes
    shards.append(current)
    path.mkdir(parents=True)
    weight_map, total = {}, 0
    for i, group in enumerate(shards, start=1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        total += _write_shard(path / name, group)
        weight_map.update({t.name: name for t in group})
    write_resources(path, {"config.json": cfg, **tokenizer.resources(),
                           "model.safetensors.index.json": {"metadata": {"total_size": total},
                                                            "weight_map": dict(sorted(weight_map.items()))}})
    return cfg


def _write_shard(path: Path, tensors: list[_Tensor]) -> int:
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "xb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for t in tensors:
            for a in range(0, t.nbytes, CHUNK_BYTES):
                f.write(t.make(a, min(t.nbytes, a + CHUNK_BYTES)))
    return offset


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _convert(src: Path, out: Path, workers: int) -> tuple[dict, int]:
    """Convert in a child process; its JSON result and its own peak RSS (``wait4``), bytes."""
    from bench.conversion import drain

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(src), str(out), str(workers)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    stdout, stderr = drain(proc)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        lines = stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(lines[-1][:400] if lines else f"exit status {proc.returncode}")
    return json.loads(stdout.decode().strip().splitlines()[-1]), int(usage.ru_maxrss) * 1024


def _measure(work: Path, nbytes: int, workers: int, repeats: int, drop_cache: bool) -> dict:
    """Generate, convert interleaved with ``cp -r`` + ``sync`` of the copies; the numbers of one size (or why it
    did not run)."""
    src, copy, out = work / f"nvfp4-{nbytes >> 20}M", work / "copy", work / "nvfp4.ninfer"
    t = time.perf_counter()
    cfg = write_checkpoint(src, nbytes)
    info = {"source_bytes": _size(src), "layers": cfg["num_hidden_layers"],
            "generate_seconds": round(time.perf_counter() - t, 1)}
    converted: list[tuple[dict, int]] = []

    def conversion() -> float:
        res, rss = _convert(src, out, workers)
        converted.append((res, rss))
        info["artifact_bytes"] = out.stat().st_size
        out.unlink()
        return res["seconds"]

    try:  # a refused conversion stops at its first run
        runs, dropped = interleaved({"cp": lambda: cp_seconds(src, copy), "convert": conversion}, repeats,
                                    drop_cache)
    except RuntimeError as exc:
        info["not_run"] = str(exc)
        return info
    finally:
        shutil.rmtree(src, ignore_errors=True)
        out.unlink(missing_ok=True)
    res = converted[0][0]
    info.update(cp_seconds=round(min(runs["cp"]), 3), convert_seconds=round(min(runs["convert"]), 3),
                ratio=round(min(runs["cp"]) / min(runs["convert"]), 3), peak_rss_bytes=max(r[1] for r in converted),
                exactness=res["exactness"], prequantized=res.get("prequantized"), repeats=repeats,
                page_cache_dropped=dropped, runs=rounded(runs), runs_peak_rss_bytes=[r[1] for r in converted])
    return info


def run(workdir: Path, scale: float = 1.0, repeats: int = DEFAULT_REPEATS, drop_cache: bool = True) -> list[dict]:
    workers = min(4, os.cpu_count() or 1)
    small = _measure(workdir, int(SIZES[0] * scale), workers, repeats, drop_cache)
    large = small if "not_run" in small else _measure(workdir, int(SIZES[1] * scale), workers, repeats, drop_cache)
    name = f"NVFP4 HF ({large['source_bytes'] / GIB:.1f} GiB) → exact throughput vs cp"
    if "not_run" in large:
        return [{"name": name, "value": None, "unit": "not run", "target": f">= {RATIO_TARGET}", "met": None,
                 "detail": {"status": "not run", "reason": large["not_run"], "sizes": [small, large]}},
                {"name": "NVFP4 conversion peak RSS, larger over smaller checkpoint", "value": None,
                 "unit": "not run", "target": f"<= {FLAT_TARGET}", "met": None,
                 "detail": {"status": "not run", "reason": large["not_run"]}}]
    rows = [{"name": name, "value": large["ratio"], "unit": "× cp", "target": f">= {RATIO_TARGET}",
             "met": large["ratio"] >= RATIO_TARGET, "detail": {**large, "workers": workers}}]
    for info in (small, large):
        if "not_run" not in info:
            rows.append({"name": f"NVFP4 conversion peak RSS ({info['source_bytes'] / GIB:.1f} GiB checkpoint)",
                         "value": round(info["peak_rss_bytes"] / MIB, 1), "unit": "MiB", "target": None, "met": None,
                         "detail": {"source_bytes": info["source_bytes"], "ratio_to_cp": info["ratio"],
                                    "runs_peak_rss_bytes": info["runs_peak_rss_bytes"]}})
    if "not_run" in small:
        return rows
    flat = large["peak_rss_bytes"] / small["peak_rss_bytes"]
    rows.append({"name": "NVFP4 conversion peak RSS, larger over smaller checkpoint", "value": round(flat, 3),
                 "unit": "×", "target": f"<= {FLAT_TARGET}", "met": flat <= FLAT_TARGET,
                 "detail": {"source_bytes": [small["source_bytes"], large["source_bytes"]],
                            "peak_rss_bytes": [small["peak_rss_bytes"], large["peak_rss_bytes"]]}})
    return rows


if __name__ == "__main__":  # python -m bench.prequantized [scale]
    standalone("prequantized", run)
