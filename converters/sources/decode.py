"""Decoding a source tensor's bytes to float32 in its logical row-major shape.

Plain dtypes are numpy views (``ml_dtypes`` for bfloat16 and the 8-bit floats); GGML block types go through
``gguf.quants.dequantize`` (vectorized, one class per type); the types gguf-py has no decoder for (Q1_0,
PrismML Q2_0 / PQ2_0 / PTQ1_0) go through ``ninfer_core.codecs.decode`` with the ``gguf_<type>`` /
``ggml_blocks_v1`` passthrough formats of storage-layouts §5. Block types in big-endian GGUF files and
packed sub-byte safetensors dtypes have no decoder here: a typed error says so.
"""

from __future__ import annotations

import numpy as np

from converters.errors import SourceError

try:  # ml_dtypes is a declared dependency; its types name the 16/8-bit floats numpy lacks
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

# GGUF plain types: numpy type code without byte order
GGUF_PLAIN = {"F32": "f4", "F16": "f2", "F64": "f8", "I8": "i1", "I16": "i2", "I32": "i4", "I64": "i8"}
# safetensors dtypes that are numpy views (little-endian)
ST_PLAIN = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
            "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
ST_ML = {"BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E8M0": "float8_e8m0fnu"}
# GGML types decoded by ninfer_core.codecs (storage-layouts §5 format names)
CODEC_FORMATS = {"Q1_0": "gguf_q1_0", "PQ2_0": "gguf_pq2_0", "PTQ1_0": "gguf_ptq1_0"}


def _no_decoder(t, why: str) -> SourceError:
    return SourceError(f"{t.name}: no decoder for {t.read_type or t.dtype}: {why}", file=str(t.file),
                       json_path=t.name, rule="decoder_available")


def _bf16_to_f32(raw: np.ndarray, order: str) -> np.ndarray:
    u16 = raw.view(order + "u2").astype(np.uint32)
    return (u16 << 16).view(np.float32)


def decode_tensor(t, raw: np.ndarray, *, big_endian: bool = False) -> np.ndarray:
    """``raw`` (the tensor's bytes) → float32 array of shape ``t.shape``."""
    shape = t.shape
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
    if name == "Q2_0" or name in CODEC_FORMATS:
        return _decode_codec(t, raw, rows, ne0).reshape(shape)
    import gguf.quants
    from gguf.constants import GGMLQuantizationType

    qtype = GGMLQuantizationType.__members__.get(name)
    if qtype is None or qtype not in gguf.quants._type_traits:
        raise _no_decoder(t, "gguf-py has no dequantizer for it")
    if t.elements == 0:
        return np.zeros(shape, dtype=np.float32)
    return gguf.quants.dequantize(raw.reshape(rows, -1), qtype).astype(np.float32, copy=False).reshape(shape)


def _decode_codec(t, raw: np.ndarray, rows: int, ne0: int) -> np.ndarray:
    if t.dtype == "Q2_0":
        fmt = "gguf_pq2_0" if t.block == (128, 34) else "gguf_q2_0"
    else:
        fmt = CODEC_FORMATS[t.read_type]
    try:
        from ninfer_core import codecs
    except ImportError:
        raise _no_decoder(t, "ninfer_core.codecs is not available") from None
    try:
        return np.asarray(codecs.decode(fmt, "ggml_blocks_v1", [rows, ne0], raw), dtype=np.float32)
    except (KeyError, LookupError, ValueError) as exc:
        raise _no_decoder(t, f"ninfer_core.codecs cannot decode {fmt}: {exc}") from None


def _decode_safetensors(t, raw: np.ndarray) -> np.ndarray:
    d = t.dtype
    if d in ST_PLAIN:
        return raw.view(ST_PLAIN[d]).astype(np.float32)
    if d in ST_ML and ml_dtypes is not None:
        return raw.view(getattr(ml_dtypes, ST_ML[d])).astype(np.float32)
    raise _no_decoder(t, "no float32 decoding for this safetensors dtype")
