"""``fp8_e4m3fn_row_bf16`` in ``row_scale_v1`` (storage-layouts §2).

Planes::

    codes   [N, K]  E4M3FN bytes (bias 7, no infinities; 0x7F and 0xFF are NaN and invalid), no padding
    scales  [N]     BF16 row multipliers, finite

Value ``(n, k) = e4m3(code[n, k]) * scale[n]`` in float32 (exact: 4 × 8 significant bits). E4M3FN and BF16
conversions use ml_dtypes (round to nearest even); the encoder (``absmax``) takes ``scale = amax / 448``
per row, rounds it to BF16, and saturates codes to ±448 so that no NaN code is ever written.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .base import Codec, Geometry, PlaneSpec, Tally, fail

E4M3_MAX = np.float32(448.0)
E4M3_VALUES = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


def bf16_to_f32(words: np.ndarray) -> np.ndarray:
    return (words.astype(np.uint32) << np.uint32(16)).view(np.float32)


#: row-scale candidates of the weighted search, as factors of the absmax scale (docs/imatrix.md)
ROW_SCALE_FACTORS = np.linspace(0.8, 1.0, 5, dtype=np.float32)


def _codes(xb: np.ndarray, s32: np.ndarray) -> np.ndarray:
    """E4M3FN codes of ``xb / s`` per row, saturated to ±448 (no NaN code)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s32 != 0, xb / s32, np.float32(0))
    np.clip(q, -E4M3_MAX, E4M3_MAX, out=q)
    return q.astype(ml_dtypes.float8_e4m3fn)


def _row_error(xb: np.ndarray, q: np.ndarray, s32: np.ndarray, w: np.ndarray) -> np.ndarray:
    d = xb - q.astype(np.float32) * s32
    return np.einsum("rk,rk->r", d * w, d)[:, None]


class FP8Row(Codec, fmt="fp8_e4m3fn_row_bf16"):
    layout = "row_scale_v1"
    importance_weighted = True
    section = "storage-layouts §2"
    tolerance_class = "fp8-e4m3"
    findings = {
        "invalid_code": ("ERROR", "NaN code(s) 0x7F/0xFF"),
        "non_finite_multiplier": ("ERROR", "non-finite BF16 row scale(s)"),
    }

    @classmethod
    def bits_per_weight(cls) -> float:
        return 8.0  # plus one BF16 scale per row

    @classmethod
    def check_shape(cls, shape: tuple[int, ...], divisors: int) -> None:
        if len(shape) != 2:
            raise fail(f"{cls.format} needs a rank-2 shape [N, K], got {list(shape)}", "shape_rank", "container §6.2")

    @classmethod
    def plane_specs(cls, shape: tuple[int, ...], divisors: int) -> tuple[list[PlaneSpec], dict]:
        n, k = shape
        return [PlaneSpec("codes", n * k, 1, k), PlaneSpec("scales", n * 2, 1, 2)], {}

    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        s = bf16_to_f32(views["scales"][r0:r1].view("<u2"))
        np.take(E4M3_VALUES, views["codes"][r0:r1], mode="clip", out=out)
        np.multiply(out, s, out=out)

    @classmethod
    def encode_block(cls, geom: Geometry, x: np.ndarray, views: dict[str, np.ndarray], r0: int, r1: int,
                     encoder: str, ctx: object, weights: np.ndarray | None = None) -> None:
        xb = np.asarray(x[r0:r1], dtype=np.float32)
        if not np.isfinite(xb).all():
            i, j = np.argwhere(~np.isfinite(xb))[0]
            raise fail(f"{cls.format}: input element ({r0 + i}, {j}) is not finite", "non_finite_input", cls.section)
        base = np.abs(xb).max(axis=1, keepdims=True) / E4M3_MAX
        s = (base + np.float32(0)).astype(ml_dtypes.bfloat16)
        q = _codes(xb, s.astype(np.float32))
        if weights is not None:  # the row scale with the lowest importance-weighted error (docs/imatrix.md)
            best_e = _row_error(xb, q, s.astype(np.float32), weights)
            for f in ROW_SCALE_FACTORS[:-1]:
                cand = (base * f + np.float32(0)).astype(ml_dtypes.bfloat16)
                cq = _codes(xb, cand.astype(np.float32))
                e = _row_error(xb, cq, cand.astype(np.float32), weights)
                better = e < best_e
                best_e = np.where(better, e, best_e)
                s = np.where(better, cand, s)
                q = np.where(better, cq, q)
        views["codes"][r0:r1] = q.view(np.uint8)
        views["scales"][r0:r1] = s.view(np.uint8).reshape(r1 - r0, 2)

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        t = Tally()
        t.add("invalid_code", (views["codes"][r0:r1] & 0x7F) == 0x7F, lambda ij: f"row {r0 + ij[0]}, column {ij[1]}")
        t.add("non_finite_multiplier", (views["scales"][r0:r1].view("<u2") & 0x7F80) == 0x7F80,
              lambda ij: f"row {r0 + ij[0]}")
        return t
