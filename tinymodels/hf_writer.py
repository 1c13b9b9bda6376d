"""Write an HF checkpoint directory (sharded safetensors + index + config + tokenizer files), streaming.

Layout written (transformers 5 ``save_pretrained`` conventions): ``config.json``;
``model.safetensors`` when ``shards == 1``, else ``model-0000i-of-0000n.safetensors`` plus
``model.safetensors.index.json`` (``{"metadata": {"total_size": bytes}, "weight_map": {name: file}}``);
the tokenizer resources (``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``,
``generation_config.json``). Tensors are split across shards in name order by a byte budget.

The safetensors files are written by hand (format: little-endian u64 header length, JSON header
``{name: {dtype, shape, data_offsets}}`` plus ``__metadata__ {"format": "pt"}``, padded with spaces to
8 bytes, then the tensors back to back in header order) because ``safetensors.numpy.save_file``
needs every tensor in memory at once; here each tensor is produced and written block of rows by
block of rows, so a multi-GB checkpoint is generated with bounded memory. Tests read the files back
with the safetensors library itself. The directory is assembled under a temporary name beside the
target and renamed when complete; an existing target is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize

from tinymodels.gguf_writer import write_resources
from tinymodels.synth import TensorSpec

DTYPES = {"bf16": ("BF16", 2, "bfloat16"), "f16": ("F16", 2, "float16"), "f32": ("F32", 4, "float32")}
CHUNK_ELEMENTS = 1 << 24


def _encode(values: np.ndarray, dtype: str) -> bytes:
    if dtype == "bf16":
        # values are bf16-exact (tinymodels.synth), so the round-to-nearest-even encoding is exact
        return quantize(np.ascontiguousarray(values, np.float32), GGMLQuantizationType.BF16).tobytes()
    return np.ascontiguousarray(values, dtype=np.float16 if dtype == "f16" else np.float32).tobytes()


def _split_shards(specs: Sequence[TensorSpec], itemsize: int, shards: int) -> list[list[TensorSpec]]:
    ordered = sorted(specs, key=lambda s: s.name)
    total = sum(s.size * itemsize for s in ordered)
    groups: list[list[TensorSpec]] = [[] for _ in range(shards)]
    done = 0
    for spec in ordered:
        index = min(shards - 1, done * shards // max(total, 1))
        groups[index].append(spec)
        done += spec.size * itemsize
    if any(not g for g in groups):
        raise ValueError(f"cannot split {len(ordered)} tensors into {shards} non-empty shards")
    return groups


def write_safetensors(path: Path, specs: Sequence[TensorSpec], seed: int, dtype: str) -> int:
    """Write one safetensors file holding ``specs`` (in the given order); returns its tensor bytes."""
    st_dtype, itemsize, _ = DTYPES[dtype]
    header: dict[str, dict] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for spec in specs:
        size = spec.size * itemsize
        header[spec.name] = {"dtype": st_dtype, "shape": list(spec.shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    with open(path, "xb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for spec in specs:
            step = max(1, CHUNK_ELEMENTS // spec.row_size)
            for start in range(0, spec.rows, step):
                f.write(_encode(spec.values(seed, start, min(start + step, spec.rows)), dtype))
    return offset


def write_hf_dir(
    path: str | os.PathLike[str],
    config: Mapping,
    specs: Sequence[TensorSpec],
    resources: Mapping[str, dict | str],
    *,
    seed: int = 0,
    dtype: str = "bf16",
    shards: int = 2,
) -> Path:
    """Write the checkpoint directory ``path`` (which must not exist)."""
    path = Path(path)
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} not supported; choose one of {', '.join(DTYPES)}")
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    if path.exists():
        raise FileExistsError(f"{path}: refusing to overwrite an existing path")
    _, itemsize, torch_name = DTYPES[dtype]
    partial = path.parent / f".{path.name}.{os.getpid()}.partial"
    partial.mkdir()
    try:
        groups = _split_shards(specs, itemsize, shards)
        weight_map: dict[str, str] = {}
        total = 0
        for i, group in enumerate(groups, start=1):
            name = "model.safetensors" if shards == 1 else f"model-{i:05d}-of-{shards:05d}.safetensors"
            total += write_safetensors(partial / name, group, seed, dtype)
            weight_map.update({spec.name: name for spec in group})
        files: dict[str, dict | str] = {"config.json": {**config, "dtype": torch_name}, **resources}
        if shards > 1:
            files["model.safetensors.index.json"] = {
                "metadata": {"total_size": total},
                "weight_map": dict(sorted(weight_map.items())),
            }
        write_resources(partial, files)
        os.rename(partial, path)  # fails on a non-empty directory that appeared meanwhile
    finally:
        if partial.exists():
            shutil.rmtree(partial)
    return path
