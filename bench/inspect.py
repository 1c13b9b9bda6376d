"""Benchmark of ``convert inspect`` (``docs/inspect.md`` §Identity and reading).

1. Header inspection of a generated multi-GiB GGUF shaped like a large Qwen3.5 checkpoint (a 151,936-token
   vocabulary with scores, token types and merges, ~800 tensors): the tensor data is a sparse hole, so
   only the header exists on disk. Reported: wall time, bytes the inspection says it read (target:
   exactly the header length) and the bytes the process actually read (``/proc/self/io`` ``rchar``),
   side by side with gguf-py's ``GGUFReader`` on the same file.
2. ``--hash full`` throughput on a GGUF with real bytes, side by side with ``sha256sum`` of the same file
   (both warm in the page cache, best of three, digests compared): target ≥ 0.8× ``sha256sum``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter

from converters.inspect import inspect_model_artifact

VOCAB = 151_936
ALIGN = 32


def _rchar() -> int | None:
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _tensor_plan(data_bytes: int) -> list[tuple[str, tuple[int, int], Q, int]]:
    """~800 Q8_0 matrices and F32 norms over 64 layers, scaled so the data totals ``data_bytes``."""
    layers, hidden = 64, 5120
    names = []
    for layer in range(layers):
        for t in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down",
                  "attn_gate", "ssm_out", "attn_qkv"):
            names.append((f"blk.{layer}.{t}.weight", True))
        for t in ("attn_norm", "post_attention_norm"):
            names.append((f"blk.{layer}.{t}.weight", False))
    mats = sum(1 for _, m in names if m)
    rows = max(1, data_bytes // mats // (hidden // 32 * 34))
    plan = [("token_embd.weight", (VOCAB, hidden), Q.Q8_0, VOCAB * hidden // 32 * 34)]
    for name, is_mat in names:
        if is_mat:
            plan.append((name, (rows, hidden), Q.Q8_0, rows * hidden // 32 * 34))
        else:
            plan.append((name, (hidden,), Q.F32, hidden * 4))
    return plan


def write_header_gguf(path: Path, data_bytes: int, *, real_data: bool = False) -> int:
    """Write the header with GGUFWriter; the data is a sparse hole (or real bytes). Returns the file size."""
    w = GGUFWriter(str(path), "qwen35")
    w.add_name("bench-qwen35")
    w.add_block_count(64)
    w.add_token_list([f"tok{i:06d}" for i in range(VOCAB)])
    w.add_token_scores([float(-i) for i in range(VOCAB)])
    w.add_token_types([1] * VOCAB)
    w.add_token_merges([f"t{i} k{i}" for i in range(VOCAB)])
    w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    total = 0
    for name, shape, qtype, nbytes in _tensor_plan(data_bytes):
        if qtype == Q.F32:
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qtype)
        else:  # GGUFWriter takes quantized tensors by their byte shape
            w.add_tensor_info(name, (shape[0], shape[1] // 32 * 34), np.dtype(np.uint8), nbytes, raw_dtype=qtype)
        total += -(-nbytes // ALIGN) * ALIGN
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    head = path.stat().st_size
    size = -(-head // ALIGN) * ALIGN + total
    if real_data:
        block = np.random.default_rng(0).integers(0, 256, size=16 << 20, dtype=np.uint8).tobytes()
        with open(path, "ab") as f:
            f.write(b"\0" * (-head % ALIGN))
            left = total
            while left:
                n = min(left, len(block))
                f.write(block[:n])
                left -= n
    else:
        os.truncate(path, size)
    return size


def _best(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_header(workdir: Path, scale: float) -> list[dict]:
    path = workdir / "sparse.gguf"
    size = write_header_gguf(path, int(8 * 2**30 * scale))
    r0 = _rchar()
    t0 = time.perf_counter()
    ev = inspect_model_artifact(path)
    ours = time.perf_counter() - t0
    r1 = _rchar()
    art = ev["artifact"]
    import gguf

    peer, _ = _best(lambda: len(gguf.GGUFReader(path).tensors), repeat=1)
    os_read = None if r0 is None else r1 - r0
    detail = {"file_size": size, "header_length": art["header_length"], "bytes_read": art["bytes_read"],
              "process_rchar_delta": os_read, "tensors": len(ev["tensors"]), "metadata": len(ev["metadata"]),
              "gguf_py_reader_s": round(peer, 3)}
    return [
        {"name": f"header inspection of a {size / 2**30:.1f} GiB GGUF", "value": round(ours, 3), "unit": "s",
         "target": None, "met": None, "detail": detail},
        {"name": "header inspection bytes read (of file size)", "value": art["bytes_read"], "unit": "bytes",
         "target": "== header length", "met": art["bytes_read"] == art["header_length"] < size, "detail": detail},
        {"name": "header inspection speed vs gguf-py GGUFReader", "value": round(peer / ours, 2), "unit": "x",
         "target": None, "met": None, "detail": detail},
    ]


def bench_full_hash(workdir: Path, scale: float) -> list[dict]:
    path = workdir / "real.gguf"
    size = write_header_gguf(path, int(2 * 2**30 * scale), real_data=True)
    sha = shutil.which("sha256sum")
    if sha is None:
        return [{"name": "--hash full vs sha256sum", "value": None, "unit": "x", "target": ">= 0.8",
                 "met": None, "detail": {"skipped": "sha256sum not found"}}]

    def peer():
        return subprocess.run([sha, str(path)], check=True, capture_output=True, text=True).stdout.split()[0]

    peer()  # warm the page cache for both
    peer_s, peer_digest = _best(peer)
    ours_s, ev = _best(lambda: inspect_model_artifact(path, hash="full"))
    assert ev["artifact"]["sha256"] == peer_digest, "digest differs from sha256sum"
    ratio = peer_s / ours_s
    detail = {"file_size": size, "sha256sum_s": round(peer_s, 3), "inspect_full_s": round(ours_s, 3),
              "sha256sum_MBps": round(size / peer_s / 1e6), "inspect_MBps": round(size / ours_s / 1e6),
              "buffer_bytes": ev["hash"]["buffer_bytes"], "digest_match": True, "cache": "warm, best of 3"}
    return [{"name": f"--hash full throughput vs sha256sum ({size / 2**30:.1f} GiB)", "value": round(ratio, 3),
             "unit": "x", "target": ">= 0.8", "met": ratio >= 0.8, "detail": detail}]


def run(workdir: Path, scale: float = 1.0) -> list[dict]:
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        return bench_header(workdir, scale) + bench_full_hash(workdir, scale)
    finally:
        for name in ("sparse.gguf", "real.gguf"):
            (workdir / name).unlink(missing_ok=True)


if __name__ == "__main__":  # pragma: no cover
    import json
    import sys

    out = run(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/work/inspect"),
              float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
    print(json.dumps(out, indent=1))
