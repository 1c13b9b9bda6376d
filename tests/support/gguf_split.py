"""gguf-split fixtures made with gguf-py, independent of the code under test.

:func:`split_gguf` rewrites a GGUF as ``GGUFWriter(split_max_tensors=…, split_max_size=…)`` splits it — llama.cpp's
own Python writer of the split format — copying every key and tensor the way gguf-py's
``gguf_new_metadata.py`` copies them. :func:`set_key` edits a scalar key in place as gguf-py's
``gguf_set_metadata.py`` does. :func:`write_shard` writes one hand-made shard (any split keys, any tensors)
for the sets the writer refuses to make (a duplicated tensor, a split key of another type).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter


def split_gguf(source: Path, out: Path, *, max_tensors: int = 0, max_size: int = 0) -> list[Path]:
    """Write ``source`` as shards named from ``out`` (``<stem>-00001-of-0000N.gguf`` beside it); their paths."""
    out.parent.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(source)
    arch = reader.get_field("general.architecture").contents()
    writer = GGUFWriter(out, arch, split_max_tensors=max_tensors, split_max_size=max_size)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    paths = writer.format_shard_names(out)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    assert len(paths) > 1, "the limits did not split the model"
    return paths


def set_key(path: Path, key: str, value: int) -> None:
    """Overwrite the scalar ``key`` of the GGUF at ``path`` in place (its type kept)."""
    reader = GGUFReader(path, "r+")
    field = reader.get_field(key)
    field.parts[field.data[0]][0] = value
    reader.data.flush()


def write_shard(path: Path, arch: str, keys: dict[str, tuple[GGUFValueType, int]],
                tensors: dict[str, np.ndarray], endianess: GGUFEndian = GGUFEndian.LITTLE) -> Path:
    """One GGUF with the split ``keys`` (``{key: (type, value)}``) and F32 ``tensors``."""
    writer = GGUFWriter(path, arch, endianess=endianess)
    for key, (vtype, value) in keys.items():
        writer.add_key_value(key, value, vtype)
    for name, array in tensors.items():
        writer.add_tensor(name, array.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
