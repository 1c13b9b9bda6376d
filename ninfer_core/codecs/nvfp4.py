"""``nvfp4`` in ``block_scale_k16_m128x4_v1`` (storage-layouts §3).

Shape ``[N, K]`` with ``N % 128 == 0``, ``K % 64 == 0``; ``divisors`` (default 1) divides ``N``. Planes::

    codes         [N, K/2]  E2M1 nibbles, element (n, k) in byte n*K/2 + k//2, even k in the low nibble;
                            bit 3 sign, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6
    block_scales  N*K/16    one E4M3FN byte per 16 elements of a row, non-negative (sign bit 0, no NaN),
                            in 128x4 tiles (C = K/64 tiles per tile-row):
                            byte(r, c) = ((r//128)*C + c//4)*512 + (r%32)*16 + ((r%128)//32)*4 + c%4
    divisors      [D]       FP32, finite and positive; rows [i*N/D, (i+1)*N/D) use divisor i

Value ``(n, k) = e2m1 * e4m3(scale[n, k//16]) / divisor[n // (N/D)]``: the product is exact in float32 and is
divided once, in float32. Within one 128-row tile-row the scale plane is the array
``P[c//4, r%32, (r%128)//32, c%4]``; swapping axes 1 and 3 of ``scales.reshape(T, 4, 32, C, 4)`` builds it
and the same swap undoes it.

Encoder (``absmax``, the usual two-level scale): per stacked matrix ``divisor = 448 * 6 / amax`` (1 for an
all-zero matrix), block scale ``e4m3(block_amax * divisor / 6)``, code ``e2m1(x * divisor / scale)``, both
rounded to nearest even (ml_dtypes' ``float8_e4m3fn`` and ``float4_e2m1fn`` casts; E2M1 saturated at ±6).
The encode runs in compiled kernels (:mod:`.nvfp4_kernel`, numba, imported on the first encode), one pass
per 16-element block, with the importance-weighted block-scale search (docs/imatrix.md §Weighted search).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..findings import Finding
from . import bitpack
from .base import (
    Codec,
    Geometry,
    PlaneSpec,
    Tally,
    compiled_kernels,
    fail,
    kernel_input,
    run_row_blocks,
    scratch,
)
from .fp8_row import E4M3_MAX, E4M3_VALUES

E2M1_VALUES = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
E2M1_BYTE_VALUES = bitpack.byte_table(E2M1_VALUES, 4)
E2M1_MAX = np.float32(6.0)
TILE_ROWS = 128
F32_MAX = np.float32(np.finfo(np.float32).max)


#: block-scale candidates of the weighted search, as factors of the absmax scale (docs/imatrix.md)
BLOCK_SCALE_FACTORS = np.linspace(0.7, 1.0, 7, dtype=np.float32)


#: the weighted search's candidates in the order tried: the absmax scale (factor 1), then the factors below 1
_CANDIDATES = kernel_input(np.concatenate([BLOCK_SCALE_FACTORS[-1:], BLOCK_SCALE_FACTORS[:-1]]))
_NO_WEIGHTS = kernel_input(np.empty((0, 0), dtype=np.float32))
_NO_DECODED = np.empty((0, 0), dtype=np.float32)


def _float32_rows(x: np.ndarray, r0: int, r1: int, name: str) -> np.ndarray:
    """Rows ``[r0, r1)`` of ``x`` as an aligned C-contiguous float32 array, read-only: a view when they are
    one, else a copy (numpy's cast) into this thread's scratch buffer ``name``."""
    xb = x[r0:r1]
    if not (xb.dtype == np.float32 and xb.flags.c_contiguous and xb.flags.aligned):
        xb = scratch(name, xb.shape, np.float32)
        np.copyto(xb, x[r0:r1], casting="unsafe")
    return kernel_input(xb)


def unswizzle(tiles: np.ndarray, k: int) -> np.ndarray:
    """``(T, C*512)`` tile bytes → ``(T*128, K/16)`` block scales in (row, block) order."""
    c = k // 64
    return tiles.reshape(-1, c, 32, 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1, k // 16)


def swizzle(scales: np.ndarray, k: int) -> np.ndarray:
    """``(T*128, K/16)`` block scales → ``(T, C*512)`` tile bytes. The 4 scale bytes of a tile row's column stay
    together, so they move as one 32-bit word (a fifth of the time of moving bytes)."""
    c = k // 64
    words = np.ascontiguousarray(scales).view(np.uint32)
    return words.reshape(-1, 4, 32, c).transpose(0, 3, 2, 1).reshape(-1, c * 128).view(np.uint8)


class NVFP4(Codec, fmt="nvfp4"):
    layout = "block_scale_k16_m128x4_v1"
    importance_weighted = True
    decodes_while_encoding = True  # decoded = E2M1 value × E4M3 block scale / divisor, decode_block's arithmetic
    section = "storage-layouts §3"
    row_quantum = TILE_ROWS
    divisors_per_member = True
    whole_object = True  # the divisor is the amax of the whole matrix (of each stacked member)
    tolerance_class = "fp4-e2m1"
    findings = {
        "block_scale_nan": ("ERROR", "NaN block scale(s) (E4M3FN 0x7F/0xFF)"),
        "block_scale_sign": ("ERROR", "block scale(s) with the sign bit set (must be unsigned UE4M3)"),
    }

    @classmethod
    def bits_per_weight(cls) -> float:
        return 4 + 8 / 16  # an E2M1 code, and an E4M3FN block scale per 16 elements

    @classmethod
    def check_shape(cls, shape: tuple[int, ...], divisors: int) -> None:
        if len(shape) != 2 or shape[0] % TILE_ROWS or shape[1] % 64:
            raise fail(f"nvfp4 needs a shape [N, K] with N % 128 == 0 and K % 64 == 0, got {list(shape)}",
                       "nvfp4_shape", "container §6.2")
        if shape[0] % divisors:
            raise fail(f"nvfp4 divisors = {divisors} does not divide N = {shape[0]}", "nvfp4_divisors", cls.section)

    @classmethod
    def plane_specs(cls, shape: tuple[int, ...], divisors: int) -> tuple[list[PlaneSpec], dict]:
        n, k = shape
        return [
            PlaneSpec("codes", n * k // 2, 1, k // 2),
            PlaneSpec("block_scales", n * k // 16, TILE_ROWS, TILE_ROWS * k // 16),
            PlaneSpec("divisors", divisors * 4, n // divisors, 4),
        ], {"K": k, "rows_per_divisor": n // divisors}

    @classmethod
    def _row_divisors(cls, geom: Geometry, divisors: np.ndarray, r0: int, r1: int) -> np.ndarray:
        return divisors[np.arange(r0, r1) // geom.extra["rows_per_divisor"]][:, None, None]

    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        k, rows = geom.extra["K"], r1 - r0
        np.take(E2M1_BYTE_VALUES, views["codes"][r0:r1], axis=0, mode="clip", out=out.reshape(rows, k // 2, 2))
        scales = np.take(E4M3_VALUES, unswizzle(views["block_scales"][r0 // TILE_ROWS : r1 // TILE_ROWS], k))
        prod = out.reshape(rows, k // 16, 16)
        np.multiply(prod, scales[:, :, None], out=prod)
        np.divide(prod, cls._row_divisors(geom, views["divisors"].view("<f4").ravel(), r0, r1), out=prod)

    @classmethod
    def encode_context(cls, geom: Geometry, x: np.ndarray) -> np.ndarray:
        """One divisor per stacked matrix, ``448 * 6 / amax`` (1 when the matrix is all zeros)."""
        nvfp4_kernel = compiled_kernels("nvfp4_kernel")

        n = geom.n_rows
        row_amax = np.empty(n, dtype=np.float32)

        def work(r0: int, r1: int) -> None:
            first = nvfp4_kernel.row_amax(_float32_rows(x, r0, r1, "amax_rows"), row_amax[r0:r1])
            if first >= 0:
                i, j = divmod(first, x.shape[1])
                raise fail(f"nvfp4: input element ({r0 + i}, {j}) is not finite", "non_finite_input", cls.section)

        run_row_blocks(n, cls.block_rows(geom), work)
        amax = row_amax.reshape(geom.divisors, -1).max(axis=1)
        with np.errstate(divide="ignore", over="ignore"):
            d = np.where(amax > 0, (E4M3_MAX * E2M1_MAX) / amax, np.float32(1.0)).astype(np.float32)
        return np.minimum(d, F32_MAX)

    @classmethod
    def encode_block(cls, geom: Geometry, x: np.ndarray, views: dict[str, np.ndarray], r0: int, r1: int,
                     encoder: str, ctx: np.ndarray, weights: np.ndarray | None = None,
                     decoded: np.ndarray | None = None) -> None:
        nvfp4_kernel = compiled_kernels("nvfp4_kernel")

        if r0 == 0:
            views["divisors"][...] = ctx.astype("<f4").view(np.uint8).reshape(-1, 4)
        row_divisor = kernel_input(ctx[np.arange(r0, r1) // geom.extra["rows_per_divisor"]])
        w = _NO_WEIGHTS if weights is None else kernel_input(np.require(weights, np.float32, ["C", "A"]))
        tiles = views["block_scales"][r0 // TILE_ROWS : r1 // TILE_ROWS]
        # decoded: the operations of decode_block on the codes and scales just chosen
        nvfp4_kernel.encode_rows(_float32_rows(x, r0, r1, "nvfp4_rows"), row_divisor, w, _CANDIDATES,
                                 views["codes"][r0:r1], tiles, _NO_DECODED if decoded is None else decoded)

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        t = Tally()
        b = unswizzle(views["block_scales"][r0 // TILE_ROWS : r1 // TILE_ROWS], geom.extra["K"])
        nan = (b & 0x7F) == 0x7F
        where = lambda ij: f"row {r0 + ij[0]}, block {ij[1]} (columns {16 * ij[1]}..{16 * ij[1] + 15})"  # noqa: E731
        t.add("block_scale_nan", nan, where)
        t.add("block_scale_sign", ((b & 0x80) != 0) & ~nan, where)
        return t

    @classmethod
    def check(cls, geom: Geometry, buf: np.ndarray, json_path: str) -> list[Finding]:
        found = super().check(geom, buf, json_path)
        d = cls.plane_views(geom, buf)["divisors"].view("<f4").ravel()
        bad = ~(np.isfinite(d) & (d > 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            found.append(Finding("invalid_divisor", "ERROR", json_path,
                                 f"nvfp4: {int(bad.sum())} divisor(s) not finite and positive, first divisor {i} "
                                 f"= {d[i]!r} (rows {i * geom.extra['rows_per_divisor']}..)", cls.section))
        return found
