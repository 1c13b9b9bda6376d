"""GGUF passthrough: ``gguf_<type>`` in ``ggml_blocks_v1`` (storage-layouts §5).

One format per GGML block type gguf-py knows (``gguf_q4_k``, ``gguf_iq4_xs``, ``gguf_q4_0``, ``gguf_f32``, …).
Shape ``[N, K]`` with ``K % B == 0``; one plane, ``blocks``: ``N * (K/B) * T`` bytes, the block stream exactly
as GGUF stores a tensor with dims ``(K, N)``, so row ``n`` is bytes ``[n*(K/B)*T, (n+1)*(K/B)*T)``.

Decoding follows ggml: the compiled decoders of ``ggml_kernel`` for the common llama.cpp types (Q8_0, Q4_0,
Q4_K, Q5_K, Q6_K; bit-identical to gguf-py's), gguf-py's ``gguf.quants.dequantize`` for the other types it
knows, and the readers in ``ggml_blocks`` (Q1_0, Q8_1, Q8_K, integer and F64 types). Encoding from floats uses gguf-py's reference
quantizer where gguf-py has one (the ``absmax`` encoder name stands for it); other types are only ever
copied from a source file (``transcode_ggml``).

``check`` reads the FP16 multipliers at the byte offsets the GGML type table records
(``GGMLType.multipliers``, from ggml's block structs) and reports non-finite ones as errors, without decoding.
"""

from __future__ import annotations

from typing import ClassVar

import gguf.quants
import numpy as np
from gguf.constants import GGMLQuantizationType

from . import ggml_blocks
from .base import Codec, Geometry, PlaneSpec, Tally, fail
from .ggml_types import GGUF_PY_TYPES, GGMLType

LAYOUT = "ggml_blocks_v1"

_PLAIN = (GGMLQuantizationType.F32, GGMLQuantizationType.F16)  # gguf.quants handles these without a class


def _gguf_py_can_quantize(qt: GGMLQuantizationType) -> bool:
    traits = gguf.quants._type_traits.get(qt)
    return qt in _PLAIN or (traits is not None and "quantize_blocks" in vars(traits))


class GGMLPassthrough(Codec):
    layout = LAYOUT
    section = "storage-layouts §5"
    ggml_passthrough = True
    tolerance_class = "passthrough"
    ggml: ClassVar[GGMLType]
    qtype: ClassVar[GGMLQuantizationType]
    findings = {"non_finite_multiplier": ("ERROR", "block(s) with a non-finite FP16 multiplier")}

    @classmethod
    def bits_per_weight(cls) -> float:
        return 8 * cls.ggml.type_size / cls.ggml.block_size

    @classmethod
    def check_shape(cls, shape: tuple[int, ...], divisors: int) -> None:
        if len(shape) != 2:
            raise fail(f"{cls.format} needs a rank-2 shape [N, K], got {list(shape)}", "shape_rank", "container §6.2")
        if shape[1] % cls.ggml.block_size:
            raise fail(f"{cls.format}: K = {shape[1]} is not a multiple of the {cls.ggml.name} block size "
                       f"{cls.ggml.block_size}", "ggml_block_shape", cls.section)

    @classmethod
    def plane_specs(cls, shape: tuple[int, ...], divisors: int) -> tuple[list[PlaneSpec], dict]:
        n, k = shape
        row = k // cls.ggml.block_size * cls.ggml.type_size
        return [PlaneSpec("blocks", n * row, 1, row)], {}

    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        rows = views["blocks"][r0:r1]
        own = ggml_blocks.dequantize(cls.ggml.name, rows.reshape(-1, cls.ggml.type_size))
        if own is not None:
            out.reshape(-1, cls.ggml.block_size)[...] = own
        elif cls.qtype in gguf.quants._type_traits or cls.qtype in _PLAIN:
            out[...] = gguf.quants.dequantize(rows, cls.qtype)
        else:
            raise fail(f"no decoder for GGML type {cls.ggml.name}", "no_decoder", cls.section)

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        t = Tally()
        at = cls.ggml.multipliers
        if at:
            blocks = views["blocks"][r0:r1].reshape(r1 - r0, -1, cls.ggml.type_size)
            words = np.stack([blocks[..., i].astype(np.uint16) | (blocks[..., i + 1].astype(np.uint16) << 8)
                              for i in at], axis=-1)
            t.add("non_finite_multiplier", ((words & 0x7C00) == 0x7C00).any(axis=-1),
                  lambda ij: f"row {r0 + ij[0]}, block {ij[1]}")
        return t

    @classmethod
    def encode_block(cls, geom: Geometry, x: np.ndarray, views: dict[str, np.ndarray], r0: int, r1: int,
                     encoder: str, ctx: object) -> None:
        xb = np.asarray(x[r0:r1], dtype=np.float32)
        views["blocks"][r0:r1] = np.asarray(gguf.quants.quantize(xb, cls.qtype)).view(np.uint8).reshape(r1 - r0, -1)


def _register() -> None:
    for t in GGUF_PY_TYPES:
        qt = GGMLQuantizationType[t.name]
        integer = t.word is not None and t.word.startswith("i")
        ns = {"ggml": t, "qtype": qt, "encoders": ("absmax",) if _gguf_py_can_quantize(qt) else (),
              "integer_word": f"<{t.word}" if integer else None}
        type(f"GGUF_{t.name}", (GGMLPassthrough,), ns, fmt=f"gguf_{t.name.lower()}")


_register()
