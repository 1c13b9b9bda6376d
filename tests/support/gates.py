"""Shared pieces of the acceptance tests: tiny sources, clean artifacts, and seeded defects.

Defects are made by converting a clean tiny model, then writing a *new* artifact with the writer from the
clean one with one thing changed (an object's decoded values re-encoded in its own format, a resource's
bytes, a binding dropped, an object added) — or by editing bytes in place (truncation, a foreign
``artifact_id``). The converter itself is never changed. ``tests/test_gates_support.py`` checks the rewriter.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from converters.pipeline.convert import convert
from ninfer_core import ArtifactWriter, codecs, open_artifact
from tinymodels import qwen3, qwen35

CFG35 = qwen35.config()
CFG3 = qwen3.config()
HEAD_DIM = CFG35["head_dim"]
KEEP = object()
HADAMARD_RECIPE = """\
name: bf16-hadamard
description: bf16 everywhere; mlp.down stored Hadamard-rotated (W·D·H), its signs a use auxiliary.
encoder: absmax
activation_policy: A16Only
hadamard_seed: 7
roles:
  "*": {format: bf16}
  mlp.down: {format: bf16, hadamard: true}
"""


def write_sources(d: Path) -> dict[str, Path]:
    """The tiny checkpoints the gates tests convert (a few MB, ~1 s)."""
    paths = {"q35_gguf": d / "q35.Q8_0.gguf", "q35_hf": d / "q35-hf", "q3_gguf": d / "q3.Q8_0.gguf",
             "q3_hf": d / "q3-hf", "had_hf": d / "had-hf", "had_recipe": d / "bf16-hadamard.yaml"}
    qwen35.write_gguf(paths["q35_gguf"], CFG35, matrix_type="Q8_0")
    qwen35.write_hf_dir(paths["q35_hf"], CFG35)
    qwen3.write_gguf(paths["q3_gguf"], CFG3, matrix_type="Q8_0")
    qwen3.write_hf_dir(paths["q3_hf"], CFG3)
    qwen35.write_hf_dir(paths["had_hf"], qwen35.config(intermediate_size=1024))
    paths["had_recipe"].write_text(HADAMARD_RECIPE)
    return paths


def converted(source: Path, out: Path, recipe: str | Path, **kw) -> Path:
    convert(source, out, recipe=str(recipe), workers=2, **kw)
    return out


def rewrite(src: Path, dst: Path, *, edit: dict[str, Callable[[np.ndarray], np.ndarray]] | None = None,
            resources: dict[str, bytes] | None = None, drop_bindings=(), extra: dict[str, np.ndarray] | None = None,
            provenance=KEEP, max_file_bytes: int | None = None,
            components: Callable[[dict], dict] | None = None) -> Path:
    """Write ``dst`` from the artifact ``src`` with the writer, changing only what is asked:

    ``edit``: object id → function of its decoded float32 values (re-encoded in the object's own format);
    ``resources``: resource object id → new bytes; ``drop_bindings``: bindings removed with their uses;
    ``extra``: new bf16 tensor objects (bound by nothing); ``provenance``: a replacement (``None`` drops it);
    ``components``: function of the components table returning the one to write."""
    edit, resources, extra = edit or {}, resources or {}, extra or {}
    with open_artifact(src) as art:
        d = art.directory.to_json()
        bindings = {k: v for k, v in d["bindings"].items() if k not in drop_bindings}
        uses = [u for u in d["uses"] if u["parameter"] not in drop_bindings]
        prov = d.get("provenance") if provenance is KEEP else provenance
        comps = components(d["components"]) if components is not None else d["components"]
        w = ArtifactWriter(dst, components=comps, bindings=bindings, uses=uses, metadata=d.get("metadata"),
                           provenance=prov, max_file_bytes=max_file_bytes, durable=False)
        for obj in art.objects:
            if obj.kind == "tensor":
                w.add_tensor(obj.id, obj.shape, obj.format, obj.layout, divisors=obj.divisors)
            else:
                w.add_resource(obj.id, len(resources.get(obj.id, b"")) or obj.bytes)
        for oid, values in extra.items():
            w.add_tensor(oid, values.shape, "bf16", "contiguous_le_v1")
        w.plan()
        for obj in art.objects:
            if obj.id in edit:
                values = np.asarray(edit[obj.id](art.object_array(obj.id).copy()), dtype=np.float32)
                w.write_object(obj.id, codecs.encode(obj.format, obj.layout, values, divisors=obj.divisors))
            elif obj.id in resources:
                w.write_object(obj.id, resources[obj.id])
            else:
                w.write_object(obj.id, bytes(art.read_range(obj.offset, obj.bytes)))
        for oid, values in extra.items():
            w.write_object(oid, codecs.encode("bf16", "contiguous_le_v1", values))
        w.commit()
    return dst


def swap_blocks(x: np.ndarray, i: int, j: int, size: int, axis: int = 0) -> np.ndarray:
    """``x`` with the ``size``-row (or column) blocks ``i`` and ``j`` exchanged."""
    y = x.copy()
    a, b = slice(i * size, (i + 1) * size), slice(j * size, (j + 1) * size)
    if axis == 0:
        y[a], y[b] = x[b], x[a]
    else:
        y[:, a], y[:, b] = x[:, b], x[:, a]
    return y


def qwen35_gguf(d: Path) -> Path:
    path = d / "q35.Q8_0.gguf"
    if not path.exists():
        qwen35.write_gguf(path, CFG35, matrix_type="Q8_0")
    return path
