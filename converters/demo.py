"""``make demo`` (interim): write a small multi-part NInfer v3 artifact into ``out/`` and summarise it.

Until the converters exist this shows the container end to end: a tiny synthetic text component
(embedding, norms, a fused query/key parent bound through parts, an MLP, a tokenizer resource) is
declared, split into several files with a small ``max_file_bytes``, written out of order, reopened,
validated, and one interleaved binding is decoded and compared with the values that were written.
Run as ``python -m converters.demo``; reruns replace the previous demo output.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from converters.cli.output import console, table
from converters.cli.repack import artifact_summary, print_summary

OUT = Path("out")
ENTRY = OUT / "demo.ninfer"
MAX_FILE_BYTES = 3 * 4096

HIDDEN, VOCAB, INTER, HEADS, HEAD_DIM = 64, 96, 128, 2, 16


def _remove_previous(entry: Path) -> None:
    for path in [entry, *entry.parent.glob(f"{entry.name}.part-*")]:
        path.unlink(missing_ok=True)


def build(entry: Path = ENTRY, max_file_bytes: int = MAX_FILE_BYTES, seed: int = 0) -> dict[str, np.ndarray]:
    """Write the demo artifact; return the float values of its logical parameters (the reference)."""
    from ninfer_core import ArtifactWriter, Binding, Component, Part, Use, codecs

    rng = np.random.default_rng(seed)
    q_rows = HEADS * HEAD_DIM
    values = {
        "text/token_embedding": rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32),
        "text/final_norm": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "text/layers/0/input_norm": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "text/layers/0/attention/query": rng.standard_normal((q_rows, HIDDEN)).astype(np.float32),
        "text/layers/0/attention/key": rng.standard_normal((HEAD_DIM, HIDDEN)).astype(np.float32),
        "text/layers/0/mlp/down": rng.standard_normal((HIDDEN, INTER)).astype(np.float32),
    }
    values = {k: codecs.decode("bf16", "contiguous_le_v1", v.shape, codecs.encode("bf16", "contiguous_le_v1", v))
              if v.ndim == 2 else v for k, v in values.items()}  # bf16-exact reference values
    query_key = np.concatenate([values["text/layers/0/attention/query"], values["text/layers/0/attention/key"]])
    tokenizer = json.dumps({"model": {"type": "demo", "vocab": {f"t{i}": i for i in range(VOCAB)}}}).encode()
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": HIDDEN,
              "intermediate_size": INTER, "num_hidden_layers": 1, "num_attention_heads": HEADS,
              "num_key_value_heads": 1, "head_dim": HEAD_DIM, "vocab_size": VOCAB, "rms_norm_eps": 1e-6,
              "tie_word_embeddings": True}
    q_elems = values["text/layers/0/attention/query"].size
    bindings = {
        "text/token_embedding": Binding.whole("w.embed"),
        "text/output_head": Binding.whole("w.embed"),
        "text/final_norm": Binding.whole("w.final_norm"),
        "text/layers/0/input_norm": Binding.whole("w.layers.0.input_norm"),
        "text/layers/0/attention/query": Binding.of_parts([Part("w.layers.0.query_key", (0, q_elems))]),
        "text/layers/0/attention/key": Binding.of_parts([Part("w.layers.0.query_key",
                                                              (q_elems, query_key.size))]),
        "text/layers/0/mlp/down": Binding.whole("w.layers.0.mlp.down"),
    }
    uses = [Use("text/layers/0/attention/query", "text/layers/0/mixer_input", "A16Only"),
            Use("text/layers/0/attention/key", "text/layers/0/mixer_input", "A16Only"),
            Use("text/layers/0/mlp/down", "text/layers/0/mlp/product", "A16Only"),
            Use("text/output_head", "text/final_hidden", "A16Only")]
    objects = {  # id -> (format, array), in payload order
        "w.embed": ("bf16", values["text/token_embedding"]),
        "w.final_norm": ("fp32", values["text/final_norm"]),
        "w.layers.0.input_norm": ("fp32", values["text/layers/0/input_norm"]),
        "w.layers.0.query_key": ("bf16", query_key),
        "w.layers.0.mlp.down": ("bf16", values["text/layers/0/mlp/down"]),
    }
    _remove_previous(entry)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with ArtifactWriter(entry, components={"text": Component(config, resources={"tokenizer.json": "r.tokenizer"})},
                        bindings=bindings, uses=uses, max_file_bytes=max_file_bytes,
                        metadata={"name": "ninfer-convert demo"},
                        provenance={"converter": "converters.demo", "seed": seed}) as writer:
        for oid, (fmt, arr) in objects.items():
            writer.add_tensor(oid, arr.shape, fmt, "contiguous_le_v1")
        writer.add_resource("r.tokenizer", len(tokenizer))
        writer.plan()
        writer.write_object("r.tokenizer", tokenizer)  # out of payload order on purpose
        for oid, (fmt, arr) in reversed(objects.items()):
            writer.write_object(oid, lambda f=fmt, a=arr: codecs.encode(f, "contiguous_le_v1", a))
    return values


def main() -> int:
    from ninfer_core import open_artifact, validate

    logging.basicConfig(level=logging.WARNING)
    values = build()
    with open_artifact(ENTRY) as art:
        summary = artifact_summary(art)
        checks = []
        for name, ref in values.items():
            got = art.binding_array(name, shape=ref.shape)
            checks.append([name, list(ref.shape), "equal" if np.array_equal(got, ref) else "DIFFERENT"])
    print_summary(summary, f"demo artifact {ENTRY}")
    console.print(table("decoded bindings vs written values", ["binding", "shape", "values"], checks))
    findings = validate(ENTRY)
    console.print(f"validate: {len(findings)} finding(s)" + "".join(f"\n  {f.severity} {f.rule}: {f.message}"
                                                                     for f in findings))
    ok = not findings and all(c[2] == "equal" for c in checks)
    console.print("[bold green]demo OK[/]" if ok else "[bold red]demo FAILED[/]")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
