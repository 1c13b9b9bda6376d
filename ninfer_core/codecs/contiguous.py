"""``bf16``, ``fp32`` and ``int32`` in ``contiguous_le_v1`` (storage-layouts §4, container §6.2).

One plane, ``data``: the ``elements(shape)`` little-endian words in C order, any rank 0..16. Rows for a
row view are along axis 0 (rank 0: one row). BF16 is produced with ml_dtypes (round to nearest even, as
torch and ggml do) and read by shifting the word into the high half of a float32. ``decode`` returns
float32 for every format (int32 exactly up to 2**24 in magnitude; read the words with
``np.frombuffer(data, "<i4")`` where larger integers matter).
"""

from __future__ import annotations

from typing import ClassVar

import ml_dtypes
import numpy as np

from .base import ENCODERS, MAX_RANK, Codec, Geometry, PlaneSpec, Tally, element_count, fail


class ContiguousCodec(Codec):
    layout = "contiguous_le_v1"
    section = "storage-layouts §4"
    encoders = ENCODERS  # no choice to make: the conversion is exact or round-to-nearest-even
    word: ClassVar[np.dtype]
    findings = {"non_finite_value": ("WARNING", "non-finite value(s)")}

    @classmethod
    def bits_per_weight(cls) -> float:
        return 8.0 * cls.word.itemsize

    @classmethod
    def check_shape(cls, shape: tuple[int, ...], divisors: int) -> None:
        if len(shape) > MAX_RANK:
            raise fail(f"{cls.format} allows rank 0..{MAX_RANK}, got rank {len(shape)}", "shape_rank", "container §6.2")

    @classmethod
    def plane_specs(cls, shape: tuple[int, ...], divisors: int) -> tuple[list[PlaneSpec], dict]:
        row = element_count(shape[1:]) * cls.word.itemsize
        return [PlaneSpec("data", element_count(shape) * cls.word.itemsize, 1, row)], {}

    @classmethod
    def words(cls, views: dict[str, np.ndarray], r0: int, r1: int) -> np.ndarray:
        return views["data"][r0:r1].view(cls.word)

    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        out.reshape(r1 - r0, -1)[...] = cls.words(views, r0, r1)

    @classmethod
    def from_values(cls, x: np.ndarray) -> np.ndarray:
        return x.astype(cls.word)

    @classmethod
    def encode_block(cls, geom: Geometry, x: np.ndarray, views: dict[str, np.ndarray], r0: int, r1: int,
                     encoder: str, ctx: object) -> None:
        views["data"][r0:r1] = cls.from_values(np.ascontiguousarray(x[r0:r1])).view(np.uint8)

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        t = Tally()
        if cls.word.kind != "i":
            v = cls.words(views, r0, r1)
            t.add("non_finite_value", ~np.isfinite(v.astype(np.float32)),
                  lambda ij: f"row {r0 + ij[0]}, element {ij[1]} of the row")
        return t


class BF16(ContiguousCodec, fmt="bf16"):
    word = np.dtype("<u2")
    tolerance_class = "bf16"

    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        o = out.reshape(r1 - r0, -1).view(np.uint32)
        np.left_shift(cls.words(views, r0, r1), 16, out=o, dtype=np.uint32)

    @classmethod
    def from_values(cls, x: np.ndarray) -> np.ndarray:
        return x.astype(ml_dtypes.bfloat16).view(cls.word)

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        t = Tally()
        t.add("non_finite_value", (cls.words(views, r0, r1) & 0x7F80) == 0x7F80,
              lambda ij: f"row {r0 + ij[0]}, element {ij[1]} of the row")
        return t


class FP32(ContiguousCodec, fmt="fp32"):
    word = np.dtype("<f4")
    tolerance_class = "fp32"


class Int32(ContiguousCodec, fmt="int32"):
    word = np.dtype("<i4")
    tolerance_class = "integer"
    integer_word = "<i4"

    @classmethod
    def from_values(cls, x: np.ndarray) -> np.ndarray:
        if x.dtype.kind not in "iub":
            xf = x.astype(np.float64)
            if not (np.isfinite(xf).all() and (xf == np.round(xf)).all()):
                raise fail("int32 input holds non-integer values", "not_integer", cls.section)
            x = xf
        if x.size and (x.min() < -(2**31) or x.max() > 2**31 - 1):
            raise fail("int32 input holds values outside the int32 range", "int32_range", cls.section)
        return x.astype(cls.word)
