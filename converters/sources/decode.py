"""Decoding a source tensor's bytes to float32 in its logical row-major shape.

Plain dtypes are numpy views (``ml_dtypes`` for bfloat16 and the 8-bit floats); the common llama.cpp block
types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) go through the compiled decoders of ``ninfer_core.codecs.ggml_kernel``
(bit-identical to gguf-py's, many times faster), the other GGML block types through
``gguf.quants.dequantize`` (vectorized, one class per type); the types gguf-py has no decoder for (Q1_0,
PrismML Q2_0 / PQ2_0 / PTQ1_0) go through ``ninfer_core.codecs`` (the ``gguf_<type>`` / ``ggml_blocks_v1``
passthrough of storage-layouts §5 where registered, else the exact transcode of §6 and its decoder). Block types in big-endian GGUF files and
packed sub-byte safetensors dtypes have no decoder here: a typed error says so.
"""

from __future__ import annotations

import numpy as np

from converters.errors import SourceError
from ninfer_core import codecs
from ninfer_core.codecs import ggml_blocks
from ninfer_core.codecs.ggml_types import BY_NAME as GGML_TYPES
from ninfer_core.errors import NinferError

try:  # ml_dtypes is a declared dependency; its types name the 16/8-bit floats numpy lacks
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

# GGUF plain types: numpy type code without byte order (the GGML type table's ``word``)
GGUF_PLAIN = {t.name: t.word for t in GGML_TYPES.values() if t.word is not None}
# safetensors dtypes that are numpy views (little-endian)
ST_PLAIN = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
            "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
ST_ML = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu"}
# GGML types gguf-py cannot decode, decoded through ninfer_core.codecs
CODEC_TYPES = {"Q1_0", "PQ2_0", "PTQ1_0"}
EXACT_TARGETS = ("q2_g64_fp16", "t2_g128_fp16")


def _no_decoder(t, why: str) -> SourceError:
    return SourceError(f"{t.name}: no decoder for {t.read_type or t.dtype}: {why}", file=str(t.file),
                       json_path=t.name, rule="decoder_available")


def _bf16_to_f32(raw: np.ndarray, order: str) -> np.ndarray:
    # one pass: the shift widens into the uint32 result (3x faster than astype, then shift)
    return np.left_shift(raw.view(order + "u2"), 16, dtype=np.uint32).view(np.float32)


def decode_tensor(t, raw: np.ndarray, *, big_endian: bool = False) -> np.ndarray:
    """``raw`` (the tensor's bytes) → float32 array of shape ``t.shape``. Non-finite results (an infinite
    block scale times a zero code) are values, checked where they matter (docs/robustness.md §Promises):
    numpy's floating-point warnings are not printed beside the tool's own messages."""
    with np.errstate(all="ignore"):
        return _decode(t, raw, big_endian)


def _decode(t, raw: np.ndarray, big_endian: bool) -> np.ndarray:
    shape = t.shape
    if t.elements == 0:
        return np.zeros(shape, dtype=np.float32)
    if t.type_id is None:
        return _decode_safetensors(t, raw).reshape(shape)
    name = t.read_type
    order = ">" if big_endian else "<"
    if name in GGUF_PLAIN:
        return raw.view(order + GGUF_PLAIN[name]).astype(np.float32).reshape(shape)
    if name == "BF16":
        return _bf16_to_f32(raw, order).reshape(shape)
    if big_endian:
        raise _no_decoder(t, "block types of big-endian GGUF files are not decoded")
    ne0 = shape[-1] if shape else 1
    rows = t.elements // ne0 if ne0 else 0
    if name == "Q2_0" or name in CODEC_TYPES:
        return _decode_codec(t, raw, rows, ne0).reshape(shape)
    if name in ggml_blocks.COMPILED:
        return ggml_blocks.dequantize(name, raw.reshape(-1, GGML_TYPES[name].type_size)).reshape(shape)
    import gguf.quants
    from gguf.constants import GGMLQuantizationType

    qtype = GGMLQuantizationType.__members__.get(name)
    if qtype is None or qtype not in gguf.quants._type_traits:
        raise _no_decoder(t, "gguf-py has no dequantizer for it")
    return gguf.quants.dequantize(raw.reshape(rows, -1), qtype).astype(np.float32, copy=False).reshape(shape)


def _decode_codec(t, raw: np.ndarray, rows: int, ne0: int) -> np.ndarray:
    """Q1_0 through its ``gguf_q1_0`` passthrough codec; the PrismML types through their exact v3 target
    (``transcode_ggml`` copies codes and multipliers, so decoding the target gives the source values)."""
    if t.dtype == "Q2_0":
        legacy = GGML_TYPES["Q2_0_G128"]
        name = "Q2_0_G128" if t.block == (legacy.block_size, legacy.type_size) else "Q2_0_G64"
    else:
        name = t.read_type
    shape = [rows, ne0]
    try:
        fmt = codecs.passthrough_format(name)
        if fmt is not None:
            return np.asarray(codecs.decode(fmt, codecs.FORMATS[fmt].layout, shape, raw), dtype=np.float32)
        targets = codecs.exact_targets(name)
        target = next((f for f in EXACT_TARGETS if f in targets), None)
        if target is None:
            raise _no_decoder(t, f"ninfer_core.codecs has no exact target for {name}")
        data = codecs.transcode_ggml(name, raw, shape, target, tensor=t.name)
        return np.asarray(codecs.decode(target, codecs.FORMATS[target].layout, shape, data), dtype=np.float32)
    except NinferError as exc:
        if isinstance(exc, SourceError):
            raise
        raise _no_decoder(t, f"ninfer_core.codecs: {exc}") from None


def _decode_safetensors(t, raw: np.ndarray) -> np.ndarray:
    d = t.dtype
    if d in ST_PLAIN:
        return raw.view(ST_PLAIN[d]).astype(np.float32)
    if d == "BF16":  # safetensors is little-endian; the one-pass widening, as GGUF BF16 (~3x ml_dtypes' astype)
        return _bf16_to_f32(raw, "<")
    if d in ST_ML and ml_dtypes is not None:
        return raw.view(getattr(ml_dtypes, ST_ML[d])).astype(np.float32)
    raise _no_decoder(t, "no float32 decoding for this safetensors dtype")
