"""Integer-code formats in ``row_split_k128_v1`` (storage-layouts §1): q2, q4, q5, q6, q8, t2.

Row ``n`` of a ``[N, K]`` object is padded to ``Kp = align_up(K, 128)`` columns and cut into ``Kp / G``
groups; element ``(n, k)`` has a ``b``-bit code pattern ``c`` and decodes to ``value(c) * S[n, k // G]``.
Planes, in order (each 256-aligned after the first)::

    low   [N, Kp*L/8]  low L bits of every pattern, LSB first    L = 2 (b=2), 4 (b=4,5,6), 8 (b=8)
    high  [N, Kp*H/8]  bits L..b-1 of every pattern (q5: H=1, q6: H=2; absent otherwise)
    scale [N, Kp/G]    FP16 multipliers, row-major

    q4 low byte j of a row:  [ code(2j+1) : bits 7..4 | code(2j) : bits 3..0 ]
    q2/t2 low byte j:        [ 4j+3 | 4j+2 | 4j+1 | 4j ]      q5 high byte j: bit i = bit 4 of code(8j+i)

Codes are two's complement (value = signed pattern) except q2 whose unsigned ``u`` means ``u - 1``. Invalid
patterns: q8 ``0x80`` (−128) and t2 ``0b10``. Padding columns ``[K, Kp)`` hold the zero code (``u = 1`` for
q2, 0 otherwise); a group wholly in padding has multiplier ``+0.0``. Decoding is ``c * s`` in float32,
exact (an 8-bit code times an FP16 multiplier fits in 24 bits); it does not validate codes, ``check`` does.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from . import bitpack
from .base import (
    ENCODERS,
    Codec,
    Geometry,
    PlaneSpec,
    Tally,
    align_up,
    compiled_kernels,
    fail,
    kernel_input,
    scratch,
)

ROW_ALIGN = 128


class RowSplitCodec(Codec):
    layout = "row_split_k128_v1"
    section = "storage-layouts §1"
    encoders = ENCODERS
    importance_weighted = True
    decodes_while_encoding = True  # decoded = code value × FP16 multiplier, decode_block's product
    bits: ClassVar[int]
    low_bits: ClassVar[int]
    high_bits: ClassVar[int] = 0
    group: ClassVar[int]
    vmin: ClassVar[int]  # code values an encoder writes
    vmax: ClassVar[int]
    offset_codes: ClassVar[bool] = False  # q2: pattern u means u - 1
    invalid_pattern: ClassVar[int | None] = None
    invalid_desc: ClassVar[str] = ""
    mse_factors: ClassVar[np.ndarray] = np.linspace(0.5, 1.0, 11, dtype=np.float32)
    # lowest code the mse search may write: two's complement -2^(b-1) where it is a valid pattern (q4/q5/q6),
    # one more step on the negative side (docs/imatrix.md §Quality bench); absmax keeps the symmetric range
    mse_vmin: ClassVar[int | None] = None
    # per class, computed once: value of every b-bit pattern; for single-plane formats, per packed byte
    pattern_values: ClassVar[np.ndarray]
    byte_values: ClassVar[np.ndarray | None]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if not hasattr(cls, "group"):
            return
        patterns = np.arange(1 << cls.bits)
        if cls.offset_codes:
            values = patterns - 1
        else:
            values = np.where(patterns >= 1 << (cls.bits - 1), patterns - (1 << cls.bits), patterns)
        cls.pattern_values = values.astype(np.float32)
        cls.zero_pattern = 1 if cls.offset_codes else 0
        cls.byte_values = bitpack.byte_table(cls.pattern_values, cls.low_bits) if not cls.high_bits else None
        cls.findings = {
            "invalid_code": ("ERROR", f"invalid code(s) ({cls.invalid_desc})"),
            "non_finite_multiplier": ("ERROR", "non-finite FP16 multiplier(s)"),
            "negative_multiplier": ("WARNING", "negative multiplier(s) (writers of this format write "
                                               "non-negative multipliers; readers accept them)"),
            "nonzero_padding": ("WARNING", "padding code(s) or padding-group multiplier(s) that are not the "
                                           "zero code / +0.0"),
        }

    # --- traits -------------------------------------------------------------------------------------
    @classmethod
    def bits_per_weight(cls) -> float:
        return cls.bits + 16 / cls.group

    @classmethod
    def multiplier_group(cls) -> int:
        return cls.group

    # --- geometry -----------------------------------------------------------------------------------
    @classmethod
    def check_shape(cls, shape: tuple[int, ...], divisors: int) -> None:
        if len(shape) != 2:
            raise fail(f"{cls.format} needs a rank-2 shape [N, K], got {list(shape)}", "shape_rank", "container §6.2")

    @classmethod
    def plane_specs(cls, shape: tuple[int, ...], divisors: int) -> tuple[list[PlaneSpec], dict]:
        n, k = shape
        kp = align_up(k, ROW_ALIGN)
        row_low, row_high, row_scale = kp * cls.low_bits // 8, kp * cls.high_bits // 8, kp // cls.group * 2
        specs = [PlaneSpec("low", n * row_low, 1, row_low)]
        if cls.high_bits:
            specs.append(PlaneSpec("high", n * row_high, 1, row_high))
        specs.append(PlaneSpec("scale", n * row_scale, 1, row_scale))
        return specs, {"K": k, "Kp": kp, "groups": kp // cls.group}

    # --- kernels ------------------------------------------------------------------------------------
    @classmethod
    def _patterns(cls, views: dict[str, np.ndarray], r0: int, r1: int) -> np.ndarray:
        """``(rows, Kp)`` uint8 code patterns of rows ``[r0, r1)`` (a per-thread scratch buffer)."""
        low = views["low"][r0:r1]
        p = bitpack.unpack(low, cls.low_bits, out=scratch("patterns", (r1 - r0, low.shape[1] * 8 // cls.low_bits),
                                                            np.uint8))
        if cls.high_bits:
            high = views["high"][r0:r1]
            h = bitpack.unpack(high, cls.high_bits, out=scratch("high_bits", p.shape, np.uint8))
            np.left_shift(h, cls.low_bits, out=h)
            np.bitwise_or(p, h, out=p)
        return p

    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        k, kp, g = geom.extra["K"], geom.extra["Kp"], geom.extra["groups"]
        rows = r1 - r0
        low = views["low"][r0:r1]
        if cls.low_bits == 8:
            vals = low.view(np.int8)
        elif cls.byte_values is not None:
            vals = np.take(cls.byte_values, low, axis=0, mode="clip",
                           out=scratch("values", (*low.shape, 8 // cls.low_bits), np.float32))
        else:
            vals = np.take(cls.pattern_values, cls._patterns(views, r0, r1), mode="clip",
                           out=scratch("values", (rows, kp), np.float32))
        vals = vals.reshape(rows, g, cls.group)
        s = views["scale"][r0:r1].view("<f2").astype(np.float32)[:, :, None]
        if k == kp:
            np.multiply(vals, s, out=out.reshape(rows, g, cls.group))
        else:
            full = np.multiply(vals, s, out=scratch("product", (rows, g, cls.group), np.float32))
            out[...] = full.reshape(rows, kp)[:, :k]

    @classmethod
    def encode_block(cls, geom: Geometry, x: np.ndarray, views: dict[str, np.ndarray], r0: int, r1: int,
                     encoder: str, ctx: object, weights: np.ndarray | None = None,
                     decoded: np.ndarray | None = None) -> None:
        # numba is imported on the first encode only (docs/imatrix.md §Requantization speed)
        row_split_kernel = compiled_kernels("row_split_kernel")

        k, kp = geom.extra["K"], geom.extra["Kp"]
        rows = r1 - r0
        if k == kp and x.dtype == np.float32 and x.flags.aligned:
            xb = np.ascontiguousarray(x[r0:r1])
        else:
            xb = scratch("input", (rows, kp), np.float32)
            np.copyto(xb[:, :k], x[r0:r1], casting="unsafe")
            xb[:, k:] = 0
        search = weights is not None or encoder == "mse"  # weights: the weighted search whichever encoder was named
        if weights is not None:
            w = _padded_weights(weights, k, kp)
        else:  # unweighted mse: every weight 1 (absmax reads none)
            w = np.ones((1, kp), dtype=np.float32)
        high = views["high"][r0:r1] if cls.high_bits else _NO_BYTES
        first = row_split_kernel.encode_rows(  # what it only reads as read-only views: its one signature
            kernel_input(xb), kernel_input(w), search, cls.mse_factors, cls.group, cls.vmin, cls.search_vmin(),
            cls.vmax, cls.offset_codes,
            cls.low_bits, cls.high_bits, views["low"][r0:r1], high, views["scale"][r0:r1].view(np.uint16),
            _NO_VALUES if decoded is None else decoded, k)
        if first >= 0:
            i, j = divmod(first, kp)
            raise fail(f"{cls.format}: input element ({r0 + i}, {j}) is not finite", "non_finite_input", cls.section)

    @classmethod
    def search_vmin(cls) -> int:
        return cls.vmin if cls.mse_vmin is None else cls.mse_vmin

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        k = geom.extra["K"]
        t = Tally()
        p = cls._patterns(views, r0, r1)
        if cls.invalid_pattern is not None:
            t.add("invalid_code", p[:, :k] == cls.invalid_pattern, lambda ij: f"row {r0 + ij[0]}, column {ij[1]}")
        t.add("nonzero_padding", p[:, k:] != cls.zero_pattern, lambda ij: f"row {r0 + ij[0]}, column {k + ij[1]}")
        bits = views["scale"][r0:r1].view("<u2")
        real = -(-k // cls.group)
        where = lambda ij: f"row {r0 + ij[0]}, group {ij[1]}"  # noqa: E731
        exp_all_ones = (bits[:, :real] & 0x7C00) == 0x7C00
        t.add("non_finite_multiplier", exp_all_ones, where)
        if not cls.offset_codes:
            t.add("negative_multiplier", ((bits[:, :real] & 0x8000) != 0) & ((bits[:, :real] & 0x7FFF) != 0)
                  & ~exp_all_ones, where)
        t.add("nonzero_padding", bits[:, real:] != 0, lambda ij: f"row {r0 + ij[0]}, group {real + ij[1]}")
        return t


def _padded_weights(w: np.ndarray, k: int, kp: int) -> np.ndarray:
    """``(rows or 1, Kp)`` C-contiguous aligned float32 weights, padding columns weighted 0."""
    if k == kp and w.dtype == np.float32 and w.flags.c_contiguous and w.flags.aligned:
        return w
    out = np.zeros((w.shape[0], kp), dtype=np.float32)
    out[:, :k] = w
    return out


_NO_BYTES = np.zeros((0, 0), dtype=np.uint8)  # a plane the format does not have
_NO_VALUES = np.zeros((0, 0), dtype=np.float32)  # no decoded values asked for


class Q2(RowSplitCodec, fmt="q2_g64_fp16"):
    """Unsigned 2-bit ``u``, value ``(u - 1) * s`` (−1, 0, 1, 2 times ``s``), G64, signed FP16 ``s``."""

    bits, low_bits, group = 2, 2, 64
    vmin, vmax, offset_codes = -1, 2, True
    tolerance_class = "int2"
    mse_factors = np.linspace(0.3, 1.0, 15, dtype=np.float32)


class Q4(RowSplitCodec, fmt="q4_g64_fp16"):
    """Two's complement −8..7, G64."""

    bits, low_bits, group = 4, 4, 64
    vmin, vmax, mse_vmin = -7, 7, -8
    tolerance_class = "int4"


class Q5(RowSplitCodec, fmt="q5_g64_fp16"):
    """Two's complement −16..15, G64; bit 4 in the high plane."""

    bits, low_bits, high_bits, group = 5, 4, 1, 64
    vmin, vmax, mse_vmin = -15, 15, -16
    tolerance_class = "int5"


class Q6(RowSplitCodec, fmt="q6_g64_fp16"):
    """Two's complement −32..31, G64; bits 4..5 in the high plane."""

    bits, low_bits, high_bits, group = 6, 4, 2, 64
    vmin, vmax, mse_vmin = -31, 31, -32
    tolerance_class = "int6"


class Q8(RowSplitCodec, fmt="q8_g32_fp16"):
    """Two's complement −127..127 (−128 invalid), G32."""

    bits, low_bits, group = 8, 8, 32
    vmin, vmax = -127, 127
    tolerance_class = "int8"
    invalid_pattern, invalid_desc = 0x80, "code -128"


class T2(RowSplitCodec, fmt="t2_g128_fp16"):
    """Ternary −1..1 as 2-bit two's complement (``0b10`` invalid), G128."""

    bits, low_bits, group = 2, 2, 128
    vmin, vmax = -1, 1
    tolerance_class = "ternary"
    invalid_pattern, invalid_desc = 0b10, "code 0b10"
    mse_factors = np.linspace(0.3, 1.0, 15, dtype=np.float32)
