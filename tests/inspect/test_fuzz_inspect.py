"""Mutation fuzzing of the strict readers: GGUF (LE and BE), safetensors, sharded directories' shards and
.ninfer (single and multi-part) — flipped, overwritten, inserted, deleted and truncated bytes.

Every mutant must give either a result or a typed error (``NinferError``: source, view, evidence and
container errors all derive from it); never another exception, a hang, or unbounded memory. Each case
runs under ``tracemalloc`` with a peak bound and a time bound. The default run is a few hundred seeded
mutations; ``make fuzz`` (``pytest -m slow``) runs the long one and prints its counts.
"""

from __future__ import annotations

import random
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from safetensors.numpy import save_file

from converters.inspect import inspect_model_artifact
from converters.sources import open_source
from ninfer_core.errors import NinferError
from tests.support.sources import RawGGUF, q8_0_blocks, write_ninfer, writer_gguf

PEAK_BYTES = 64 * 1024 * 1024
CASE_SECONDS = 10.0


def _seeds(d: Path) -> dict[str, tuple[Path, int]]:
    """name -> (file, header length hint): mutations favour the header, where the parsers work."""
    d.mkdir(parents=True, exist_ok=True)
    x = np.linspace(-1, 1, 256, dtype=np.float32).reshape(4, 64)

    def kv(w):
        w.add_uint64("qwen3.big", 2**40)
        w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(40)])
        w.add_array("tokenizer.ggml.scores", [float(i) for i in range(40)])
        w.add_chat_template("{{ messages }}")
        w.add_bool("x.flag", True)

    writer_gguf(d / "le.gguf", tensors={"a": x, "q": (q8_0_blocks(x), Q.Q8_0), "h": x[:1].astype(np.float16)}, kv=kv)
    be = RawGGUF(order=">").kv("general.architecture", V.STRING, "x").kv("x.arr", V.ARRAY, [1, 2, 3], V.INT32)
    be.kv("x.n", V.ARRAY, [([1, 2], V.UINT8), (["s"], V.STRING)], V.ARRAY)
    be.tensor("t", [8], Q.F32, np.arange(8, dtype=">f4").tobytes()).tensor("k", [256], Q.Q4_K, b"\1" * 144)
    be.tensor("p", [128], 142, b"\2" * 34).tensor("z", [4096], 42, b"\3" * 1088)
    be.write(d / "be.gguf")
    save_file({"a": x, "b": x[0].astype(np.float16), "c": np.arange(6, dtype=np.int32)}, d / "m.safetensors",
              metadata={"format": "np"})
    write_ninfer(d / "one.ninfer")
    (d / "split").mkdir(exist_ok=True)
    write_ninfer(d / "split" / "m.ninfer", max_file_bytes=8192)
    out = {}
    for name in ("le.gguf", "be.gguf", "m.safetensors", "one.ninfer", "split/m.ninfer"):
        p = d / name
        ev = inspect_model_artifact(p)  # the seeds themselves are valid
        out[name] = (p, ev["artifact"]["header_length"])
    return out


def _mutate(data: bytes, header: int, rng: random.Random) -> tuple[bytes, str]:
    b = bytearray(data)
    hot = max(1, min(len(b), header + 64))
    pos = rng.randrange(hot) if rng.random() < 0.85 else rng.randrange(max(1, len(b)))
    op = rng.choice(["flip", "byte", "u64", "u32", "truncate", "insert", "delete", "duplicate"])
    if op == "flip":
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(hot)
            b[i] ^= 1 << rng.randrange(8)
    elif op == "byte":
        b[pos] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
    elif op in ("u64", "u32"):
        n = 8 if op == "u64" else 4
        value = rng.choice([0, 1, 2**(8 * n) - 1, 2**(8 * n - 1), rng.randrange(2**(8 * n)), len(b), header])
        b[pos:pos + n] = value.to_bytes(n, rng.choice(["little", "big"]))
    elif op == "truncate":
        del b[rng.randrange(len(b)):]
    elif op == "insert":
        b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 3, 8, 32])))
    elif op == "delete":
        del b[pos:pos + rng.choice([1, 4, 8, 33])]
    else:
        j = rng.randrange(len(b))
        b[pos:pos] = b[j:j + rng.randint(1, 64)]
    return bytes(b), f"{op}@{pos}"


def _exercise(path: Path) -> str:
    """Inspect (header and full hash) and read every tensor and metadata value through the source."""
    outcome = "accepted"
    for mode in ("header", "full"):
        ev = inspect_model_artifact(path, hash=mode)
        assert ev["status"] in ("complete", "partial")
    if path.suffix in (".gguf", ".safetensors"):
        with open_source(path) as s, np.errstate(all="ignore"):  # mutated scales may be NaN/inf
            for k in list(s.metadata):
                s.metadata[k]
            for name in s.tensors:
                try:
                    s.array(name)
                except NinferError:
                    outcome = "accepted_with_unreadable_tensor"
    return outcome


def run_fuzz(workdir: Path, n_per_seed: int, seed: int) -> Counter:
    seeds = _seeds(workdir / "seeds")
    rng = random.Random(seed)
    counts: Counter = Counter()
    failures = []
    for name, (path, header) in seeds.items():
        original = path.read_bytes()
        try:
            for i in range(n_per_seed):
                mutant, how = _mutate(original, header, rng)
                path.write_bytes(mutant)
                tracemalloc.start()
                t0 = time.perf_counter()
                try:
                    result = _exercise(path)
                except NinferError as exc:
                    result = f"rejected:{getattr(exc, 'rule', None) or type(exc).__name__}"
                except Exception as exc:  # noqa: BLE001 - the point of the test: anything untyped fails it
                    failures.append(f"{name} #{i} {how}: {type(exc).__name__}: {exc}")
                    result = "UNTYPED"
                finally:
                    elapsed = time.perf_counter() - t0
                    peak = tracemalloc.get_traced_memory()[1]
                    tracemalloc.stop()
                if elapsed > CASE_SECONDS:
                    failures.append(f"{name} #{i} {how}: took {elapsed:.1f}s")
                if peak > PEAK_BYTES:
                    failures.append(f"{name} #{i} {how}: peak {peak} bytes")
                counts["cases"] += 1
                counts[result if result.startswith(("accepted", "UNTYPED")) else "rejected"] += 1
                counts[f"{name} {result}"] += 1
        finally:
            path.write_bytes(original)
    assert not failures, "\n".join(failures[:20])
    return counts


def test_mutation_fuzz_short(tmp_path):
    counts = run_fuzz(tmp_path, n_per_seed=60, seed=20260)
    assert counts["cases"] == 300 and counts["UNTYPED"] == 0
    assert counts["rejected"] > 50 and counts["accepted"] > 0  # the mutations reach both outcomes


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_mutation_fuzz_long(tmp_path, capsys):
    counts = run_fuzz(tmp_path, n_per_seed=4000, seed=7)
    with capsys.disabled():
        print("\nfuzz counts:", dict(sorted((k, v) for k, v in counts.items() if " " not in k)))
        rules = Counter()
        for k, v in counts.items():
            if " rejected:" in k:
                rules[k.split(" rejected:")[1]] += v
        print("rejections by rule:", dict(rules.most_common()))
    assert counts["UNTYPED"] == 0
