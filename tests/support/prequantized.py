"""Shared pieces of the prequantized-source tests: the fixture checkpoints (``tests/fixtures/prequantized/``, made
with the real libraries by ``make_fixtures.py``), their ``reference.json`` (each library's own dequantization),
the raw component tensors read straight from ``model.safetensors`` (independently of the source layer), an
artifact's logical parameter decoded from its object rows, and a byte-level rewriter for seeded defects."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

from converters.pipeline.convert import convert
from converters.sources import open_safetensors
from ninfer_core import ArtifactWriter, open_artifact
from tests.support.sources import write_safetensors

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prequantized"
NP = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
      "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "U8": np.dtype("u1"), "I8": np.dtype("i1"),
      "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}
LIBRARY_DTYPES = {"float32": np.dtype("<f4"), "bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype("<f2")}


def schemes() -> list[str]:
    """The fixture directories present (each with its reference.json)."""
    return sorted(p.parent.name for p in FIXTURES.glob("*/reference.json"))


def reference(scheme: str) -> dict:
    return json.loads((FIXTURES / scheme / "reference.json").read_text())


def weights(scheme: str) -> dict[str, dict]:
    """``<module>.weight`` → its reference record (the quantized weights of the fixture)."""
    return {k: v for k, v in reference(scheme).items() if not k.startswith("_")}


def components(scheme: str) -> dict[str, np.ndarray]:
    """Every tensor of the fixture's ``model.safetensors``, parsed here (8-byte header length, JSON header), plus
    the per-expert slices of fused expert tensors (:func:`expand_fused`)."""
    out = {}
    for f in sorted((FIXTURES / scheme).glob("*.safetensors")):
        data = f.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype=NP[t["dtype"]]).reshape(t["shape"])
    return expand_fused(out)


def expand_fused(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``tensors`` plus, for ModelOpt's fused expert layout (``P.experts.gate_up_proj`` ``[E, 2I, H/2]`` with its
    ``_weight_scale`` / ``_weight_scale_2`` / ``_input_scale``, ``P.experts.down_proj`` alike), the per-expert
    components each expert's slice is: ``P.experts.{e}.gate_proj.*`` = rows ``[0, I)``, ``up_proj`` ``[I, 2I)``
    (docs/prequantized.md §Fused expert tensors), sliced here with numpy, independently of the source layer."""
    out = dict(tensors)
    for name, codes in tensors.items():
        block, _, proj = name.rpartition(".")
        halves = {"gate_up_proj": ("gate_proj", "up_proj"), "down_proj": ("down_proj",)}.get(proj)
        if halves is None or not block.endswith(".experts") or codes.ndim != 3:
            continue
        rows = codes.shape[1] // len(halves)
        for e in range(codes.shape[0]):
            for i, h in enumerate(halves):
                module = f"{block}.{e}.{h}"
                out[f"{module}.weight"] = codes[e, i * rows:(i + 1) * rows]
                out[f"{module}.weight_scale"] = tensors[f"{name}_weight_scale"][e, i * rows:(i + 1) * rows]
                for role in ("weight_scale_2", "input_scale"):
                    if f"{name}_{role}" in tensors:
                        out[f"{module}.{role}"] = tensors[f"{name}_{role}"][e]
    return out


def variant(tmp_path: Path, scheme: str, *, tensors=None, config=None, side=None) -> Path:
    """A copy of fixture ``scheme`` with ``tensors(dict)`` / ``config(dict)`` / ``side(dict)`` applied in place."""
    d = tmp_path / scheme
    shutil.copytree(FIXTURES / scheme, d)
    if tensors is not None:
        with open_safetensors(d / "model.safetensors") as s:
            ts = {n: (t.dtype, list(t.shape), bytes(s.raw(n))) for n, t in s.tensors.items()}
        tensors(ts)
        write_safetensors(d / "model.safetensors", ts)
    if config is not None:
        cfg = json.loads((d / "config.json").read_text())
        config(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
    if side is not None:
        hqc = json.loads((d / "hf_quant_config.json").read_text())
        side(hqc)
        (d / "hf_quant_config.json").write_text(json.dumps(hqc))
    return d


def convert_fixture(scheme: str, out: Path, recipe: str) -> Path:
    convert(FIXTURES / scheme, out, recipe=recipe, workers=1)
    return out


def located(art, module_weight: str) -> tuple[str, int, int, dict]:
    """(object id, row_start, row_end, its provenance record) of the piece whose source is ``module_weight``."""
    for oid, rec in art.provenance["objects"].items():
        for pc in rec.get("pieces", []):
            if pc["source"] == module_weight:
                return oid, pc["rows"][0], pc["rows"][1], rec
    raise KeyError(module_weight)


def decoded(art, module_weight: str) -> np.ndarray:
    """The float32 values the artifact stores for the source tensor ``module_weight`` (its object rows)."""
    oid, r0, r1, _ = located(art, module_weight)
    return np.asarray(art.object_array(oid))[r0:r1]


def source_rows(transforms: list[str], n: int) -> np.ndarray:
    """The source rows a piece holds, in object order, from its row-selecting transforms (``row_slice``,
    ``select_head_rows``: what the mappings apply to a fused projection's parts)."""
    rows = np.arange(n)
    for text in transforms:
        name, _, args = text.partition("(")
        kw = {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", args)}
        if name == "row_slice":
            rows = rows[kw["start"]:kw["stop"]]
        elif name == "select_head_rows":
            per_head = rows.reshape(kw["heads"], kw["stride"])[:, kw["offset"]:kw["offset"] + kw["count"]]
            rows = per_head.reshape(-1)
        else:
            raise AssertionError(f"not a row selection: {text}")
    return rows


def assembled(art, module_weight: str, n: int) -> tuple[np.ndarray, list[tuple[dict, np.ndarray]]]:
    """The source tensor ``module_weight`` (``n`` rows) put back together from every artifact piece made of it
    (a fused projection feeds several parameters: ``in_proj_qkv`` → query | key | value, a gated ``q_proj`` →
    query and gate per head), and ``(provenance record, source rows)`` of each piece; rows no piece holds are NaN."""
    out, parts = None, []
    for oid, rec in art.provenance["objects"].items():
        for pc in rec.get("pieces", []):
            if pc["source"] != module_weight:
                continue
            rows = source_rows(pc.get("transforms", []), n)
            values = np.asarray(art.object_array(oid))[pc["rows"][0]:pc["rows"][1]]
            if out is None:
                out = np.full((n, values.shape[1]), np.nan, dtype=np.float32)
            out[rows] = values
            parts.append((rec, rows))
    if out is None:
        raise KeyError(module_weight)
    return out, parts


def tiled(scales: np.ndarray) -> np.ndarray:
    """Block scales ``[N, K/16]`` in nvfp4's 128x4 tiles (docs/format/layouts.md §3, written out here)."""
    n, c16 = scales.shape
    c = c16 // 4
    r, col = np.meshgrid(np.arange(n), np.arange(c16), indexing="ij")
    at = ((r // 128) * c + col // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + col % 4
    out = np.zeros(n * c16, dtype=np.uint8)
    out[at.reshape(-1)] = scales.reshape(-1)
    return out


def same_divisor(comp: dict, module: str, d: np.float32) -> None:
    """A kept nvfp4 object's divisor ``d`` is the source's: the global scale, or ``1 / weight_scale_2``."""
    if f"{module}.weight_global_scale" in comp:  # compressed-tensors divides by its global scale
        assert d == comp[f"{module}.weight_global_scale"].reshape(-1)[0]
    else:  # ModelOpt multiplies by weight_scale_2
        assert d == np.float32(1) / comp[f"{module}.weight_scale_2"].reshape(-1)[0].astype(np.float32)


def library_bytes(values: np.ndarray, dtype: str) -> bytes:
    """``values`` rounded to the library's output dtype, little-endian bytes (what reference.json hashes)."""
    return np.ascontiguousarray(np.asarray(values, dtype=np.float32).astype(LIBRARY_DTYPES[dtype])).tobytes()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def object_bytes(art, oid: str) -> bytes:
    o = art.object(oid)
    return bytes(art.read_range(o.offset, o.bytes))


def rewrite_bytes(src: Path, dst: Path, edit: dict[str, Callable[[bytes], bytes]]) -> Path:
    """Write ``dst`` from the artifact ``src`` with the writer, every object's bytes as they are except those
    ``edit`` maps (object id → function of its encoded bytes returning bytes of the same length)."""
    with open_artifact(src) as art:
        d = art.directory.to_json()
        w = ArtifactWriter(dst, components=d["components"], bindings=d["bindings"], uses=d["uses"],
                           metadata=d.get("metadata"), provenance=d.get("provenance"), durable=False)
        for obj in art.objects:
            if obj.kind == "tensor":
                w.add_tensor(obj.id, obj.shape, obj.format, obj.layout, divisors=obj.divisors)
            else:
                w.add_resource(obj.id, obj.bytes)
        w.plan()
        for obj in art.objects:
            data = bytes(art.read_range(obj.offset, obj.bytes))
            if obj.id in edit:
                data = edit[obj.id](data)
                assert len(data) == obj.bytes
            w.write_object(obj.id, data)
        w.commit()
    return dst
