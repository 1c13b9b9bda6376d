"""Write GGUF files the way llama.cpp's ``convert_hf_to_gguf.py`` does, streaming row blocks.

Rules reproduced from llama.cpp ``conversion/base.py`` (``ModelBase.prepare_tensors``, read at commit
00bd27a6 of ggml-org/llama.cpp) for choosing each tensor's GGML type:

1. 1-D tensors and names ending in ``_norm.weight`` are F32;
2. ``ssm_conv1d``, the MoE routers ``ffn_gate_inp`` / ``ffn_gate_inp_shexp``, ``v.position_embd``
   (and the other always-F32 kinds, none of which Qwen has) and names not ending in ``.weight``
   (``ssm_a``, ``ssm_dt.bias``, biases, ``v.patch_embd.weight.1``) are F32;
3. ``token_embd`` / ``output`` are F16 when the file type is TQ1_0/TQ2_0; the mmproj patch embedding
   halves are F16 for an F16 file and F32 otherwise (``MmprojModel.tensor_force_quant``);
4. everything else takes the file type's matrix type, quantized with ``gguf.quants.quantize``; a row
   length that is not a multiple of the block size falls back to F16 (``QuantError`` there).

Types gguf-py cannot encode (the PrismML fork's ternary ids) are written through a
:class:`BlockCodec` (see :mod:`tinymodels.ternary_blocks`): its ``encode`` makes the block bytes and
its ``type_id`` goes into the tensor info verbatim. gguf-py's ``GGUFWriter`` packs ``raw_dtype`` as the
u32 type field as it is, so the header bytes are the ones the fork's own gguf-py writes; the element
shape is declared directly (a non-``uint8`` ``tensor_dtype``) because gguf-py's byte-shape conversion
would need the fork's block sizes.

llama.cpp's converter itself offers F32, F16, BF16, Q8_0, TQ1_0 and TQ2_0. Q4_0, Q4_1, Q5_0 and Q5_1
(which gguf-py can also quantize) are accepted here with the same rules, i.e. like a
``llama-quantize --pure`` file: one matrix type everywhere, norms and 1-D tensors F32.

Tokenizer metadata follows ``TextModel._set_vocab_gpt2``: ``tokenizer.ggml.model = "gpt2"``, the
pre-tokenizer name, the token list and types, then gguf-py's ``SpecialVocab(dir, load_merges=True)``
(merges, bos/eos/pad ids, ``add_bos_token``, ``tokenizer.chat_template``) run over the HF tokenizer
files written to a scratch directory.

Memory: tensor infos are declared up front (``GGUFWriter.add_tensor_info``) and each tensor's bytes
are then produced block of rows by block of rows through an object exposing ``nbytes``/``tofile``
(the same duck type gguf-py's ``LazyNumpyTensor`` uses) passed to ``GGUFWriter.write_tensor_data``.
Peak memory is one row block (``CHUNK_ELEMENTS`` values) or one whole tensor for tensors whose
transform needs all rows (row permutations), never the model. A tensor with ``flat_rows`` (an MoE
expert bank of shape ``(E, N, K)``) is streamed over its ``E·N`` last-axis rows, so a bank of many GiB
is written in chunks smaller than one expert. The file is written under a temporary
name and renamed when complete; an existing path is refused.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from gguf import (
    GGML_QUANT_SIZES,
    GGML_QUANT_VERSION,
    GGMLQuantizationType,
    GGUFWriter,
    LlamaFileType,
    SpecialVocab,
    get_tensor_name_map,
)
from gguf.quants import quant_shape_to_byte_shape, quantize

from tinymodels import tokenizer as tokenizer_files

logger = logging.getLogger(__name__)

CHUNK_ELEMENTS = 1 << 24

Q = GGMLQuantizationType
MATRIX_TYPES: dict[str, tuple[GGMLQuantizationType, LlamaFileType]] = {
    "F32": (Q.F32, LlamaFileType.ALL_F32),
    "F16": (Q.F16, LlamaFileType.MOSTLY_F16),
    "BF16": (Q.BF16, LlamaFileType.MOSTLY_BF16),
    "Q8_0": (Q.Q8_0, LlamaFileType.MOSTLY_Q8_0),
    "Q4_0": (Q.Q4_0, LlamaFileType.MOSTLY_Q4_0),
    "Q4_1": (Q.Q4_1, LlamaFileType.MOSTLY_Q4_1),
    "Q5_0": (Q.Q5_0, LlamaFileType.MOSTLY_Q5_0),
    "Q5_1": (Q.Q5_1, LlamaFileType.MOSTLY_Q5_1),
    "TQ1_0": (Q.TQ1_0, LlamaFileType.MOSTLY_TQ1_0),
    "TQ2_0": (Q.TQ2_0, LlamaFileType.MOSTLY_TQ2_0),
}

RowSource = Callable[[int, int], np.ndarray]


class BlockCodec(Protocol):
    """A block type gguf-py does not know: GGML type id, block geometry and a float → bytes encoder."""

    type_id: int
    block_elements: int
    block_bytes: int

    def encode(self, values: np.ndarray) -> np.ndarray:
        """``(..., K)`` float32 values → ``(..., K // block_elements * block_bytes)`` uint8."""
        ...


@dataclass(frozen=True)
class PlannedTensor:
    """A GGUF tensor to write: name, numpy-order shape (GGUF dims are its reverse), type, values.

    ``rows(start, stop)`` returns the float32 values of rows ``[start, stop)`` after every transform.
    ``whole`` asks for all rows in one call (the transform permutes rows or columns).
    ``flat_rows(start, stop)``, when given, returns rows of the tensor viewed as
    ``(prod(shape[:-1]), shape[-1])`` and is used instead of ``rows`` for streaming.
    ``codec`` encodes a type gguf-py cannot (``qtype`` is then informational only).
    """

    name: str
    shape: tuple[int, ...]
    qtype: GGMLQuantizationType | int
    rows: RowSource
    whole: bool = False
    flat_rows: RowSource | None = None
    codec: BlockCodec | None = None

    @property
    def type_id(self) -> int:
        return int(self.codec.type_id if self.codec is not None else self.qtype)

    @property
    def byte_shape(self) -> tuple[int, ...]:
        """The shape gguf-py declares: element shape for F32/F16, bytes per row for block types."""
        if self.codec is not None:
            k = self.shape[-1]
            if k % self.codec.block_elements:
                raise ValueError(f"{self.name}: row length {k} is not a multiple of {self.codec.block_elements}")
            return (*self.shape[:-1], k // self.codec.block_elements * self.codec.block_bytes)
        if self.qtype in (Q.F32, Q.F16):
            return self.shape
        return quant_shape_to_byte_shape(self.shape, self.qtype)

    @property
    def nbytes(self) -> int:
        itemsize = {Q.F32: 4, Q.F16: 2}.get(self.qtype, 1) if self.codec is None else 1
        return int(np.prod(self.byte_shape, dtype=np.int64)) * itemsize

    def encode(self, values: np.ndarray) -> np.ndarray:
        return self.codec.encode(values) if self.codec is not None else quantize(values, self.qtype)


@functools.cache
def tensor_name_map(arch, n_blocks: int):
    """gguf-py's ``get_tensor_name_map(arch, n_blocks)``, built once per process (a few ms each: every model
    written would build it again)."""
    return get_tensor_name_map(arch, n_blocks)


def matrix_type(name: str) -> tuple[GGMLQuantizationType, LlamaFileType]:
    try:
        return MATRIX_TYPES[name.upper()]
    except KeyError:
        raise ValueError(f"matrix type {name!r} not supported; choose one of {', '.join(MATRIX_TYPES)}") from None


def tensor_qtype(gguf_name: str, shape: tuple[int, ...], matrix: str) -> GGMLQuantizationType:
    """The GGML type llama.cpp's converter gives ``gguf_name`` for file type ``matrix`` (rules 1–4)."""
    qtype, ftype = matrix_type(matrix)
    if ".patch_embd.weight" in gguf_name:  # MmprojModel.tensor_force_quant, before the other rules
        return Q.F16 if ftype == LlamaFileType.MOSTLY_F16 else Q.F32
    if len(shape) <= 1 or gguf_name.endswith("_norm.weight"):
        return Q.F32
    always_f32 = (".ssm_conv1d.", ".ffn_gate_inp.", ".ffn_gate_inp_shexp.", "v.position_embd.")
    if any(kind in gguf_name for kind in always_f32) or not gguf_name.endswith(".weight"):
        return Q.F32
    if gguf_name in ("token_embd.weight", "output.weight") and ftype in (
            LlamaFileType.MOSTLY_TQ1_0, LlamaFileType.MOSTLY_TQ2_0):
        return Q.F16
    if qtype not in (Q.F32, Q.F16) and shape[-1] % GGML_QUANT_SIZES[qtype][0] != 0:
        return Q.F16
    return qtype


class _RowStream:
    """Produces one tensor's encoded bytes row block by row block when gguf-py calls ``tofile``."""

    def __init__(self, tensor: PlannedTensor) -> None:
        self.tensor = tensor
        self.nbytes = tensor.nbytes

    def tofile(self, fout) -> None:
        t = self.tensor
        if t.flat_rows is not None:
            source, tail = t.flat_rows, t.shape[-1:]
            n_rows = int(np.prod(t.shape[:-1], dtype=np.int64))
        else:
            source, tail = t.rows, t.shape[1:]
            n_rows = t.shape[0] if t.shape else 1
        row_size = int(np.prod(tail, dtype=np.int64)) if tail else 1
        step = n_rows if t.whole else max(1, CHUNK_ELEMENTS // max(row_size, 1))
        written = 0
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            data = np.ascontiguousarray(source(start, stop), dtype=np.float32)
            expected = (stop - start, *tail)
            if data.shape != expected:
                raise ValueError(f"{t.name}: rows [{start}, {stop}) have shape {data.shape}, expected {expected}")
            encoded = t.encode(data)
            encoded.tofile(fout)
            written += encoded.nbytes
        if written != self.nbytes:
            raise ValueError(f"{t.name}: wrote {written} bytes, planned {self.nbytes}")


def add_tokenizer(writer: GGUFWriter, files: Mapping[str, dict | str], config: Mapping, pre: str) -> None:
    """Tokenizer metadata as ``_set_vocab_gpt2`` writes it (``SpecialVocab`` over the HF files)."""
    tokens, types = tokenizer_files.gguf_token_list(files["tokenizer.json"], int(config["vocab_size"]))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    with tempfile.TemporaryDirectory(prefix="tinymodels-tok-") as scratch:
        write_resources(Path(scratch), {**files, "config.json": dict(config)})
        SpecialVocab(scratch, load_merges=True).add_to_gguf(writer, quiet=True)


def write_resources(directory: Path, files: Mapping[str, dict | str]) -> None:
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content, indent=2, ensure_ascii=False) + "\n"
        (directory / name).write_text(text, encoding="utf-8")


def write_gguf_file(
    path: str | os.PathLike[str],
    arch: str,
    add_metadata: Callable[[GGUFWriter], None],
    tensors: Iterable[PlannedTensor],
) -> Path:
    """Write a GGUF: ``add_metadata(writer)`` adds the KV pairs, then the tensors are streamed in order."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path}: refusing to overwrite an existing file")
    tensors = list(tensors)
    partial = path.parent / f".{path.name}.{os.getpid()}.partial"
    writer = GGUFWriter(partial, arch)
    try:
        add_metadata(writer)
        writer.add_quantization_version(GGML_QUANT_VERSION)
        for t in tensors:
            if t.codec is not None:  # element shape, raw type id written verbatim (see module docstring)
                writer.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes, raw_dtype=t.type_id)
                continue
            dtype = {Q.F32: np.float32, Q.F16: np.float16}.get(t.qtype, np.uint8)
            writer.add_tensor_info(t.name, t.byte_shape, np.dtype(dtype), t.nbytes, raw_dtype=t.qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for t in tensors:
            logger.debug("writing %s %s type %d", t.name, t.shape, t.type_id)
            writer.write_tensor_data(_RowStream(t))
        writer.close()
        os.link(partial, path)  # fails instead of replacing a file that appeared meanwhile
    finally:
        writer.close()
        if partial.exists():
            partial.unlink()
    return path


def planned_nbytes(tensors: Iterable[PlannedTensor]) -> int:
    """Tensor data bytes of a plan (without the alignment padding gguf adds between tensors)."""
    return sum(t.nbytes for t in tensors)
