"""Hand-written packers for the ternary and binary GGML block types: upstream TQ1_0 (34), TQ2_0 (35),
Q1_0 (41), Q2_0 (42, group 64), and the PrismML fork's legacy Q2_0 (42, group 128), PQ2_0 (142) and
PTQ1_0 (143).

Why hand-written: gguf-py 0.19 encodes TQ1_0/TQ2_0 only and knows none of the fork's ids, and the
generators need to choose every block's codes and scale (values exactly ``code × fp16 d``) so that the
reference is exact. TQ1_0 and TQ2_0 are cross-checked against ``gguf.quants`` in the tests.

Layouts (``docs/gguf-conventions.md`` §Ternary and binary GGML types, checked against
PrismML-Eng/llama.cpp ``ggml-common.h`` ``block_pq2_0`` / ``block_ptq1_0`` and
``dequantize_row_{pq2_0,ptq1_0}`` as quoted by third-party readers of the fork, and upstream
``quantize_row_tq1_0_ref`` / ``dequantize_row_tq2_0``):

=========== ===== ====== ================== ============================================================
name        id    elems  bytes              layout (``d`` = fp16 scale)
=========== ===== ====== ================== ============================================================
TQ1_0       34    256    54                 ``qs[48] qh[4] d``: trits, ``qs[0..31]`` → ``32n+m``,
                                            ``qs[32..47]`` → ``160+16n+m``, ``qh[h]`` → ``240+4n+h``
TQ2_0       35    256    66                 ``qs[64] d``: bits ``2l`` of ``qs[j+m]`` (``j`` ∈ {0, 32})
                                            → element ``4j+32l+m``
Q1_0        41    128    18                 ``d qs[16]``: bit ``j%8`` of byte ``j/8``; 1 → +d, 0 → −d
Q2_0        42    64     18                 ``d qs[16]``: bits ``2(j%4)`` of byte ``j/4``, ``(q−1)·d``
Q2_0_LEGACY 42    128    34                 as Q2_0 with 128 elements (PrismML before the upstream id)
PQ2_0       142   128    34                 as Q2_0_LEGACY
PTQ1_0      143   128    28                 ``qs[24] qh[2] d``: trits, ``qs[0..15]`` → ``16n+m``,
                                            ``qs[16..23]`` → ``80+8n+m``, ``qh[h]`` → ``120+2n+h``
=========== ===== ====== ================== ============================================================

Trit bytes: digits ``t_n + 1`` of a byte, first most significant, ``Q = Σ q_n·3^(4−n)`` (a ``qh`` byte
holds four digits and a trailing 0), stored as ``ceil(Q·256/243)``; digit ``n`` is read back as
``((uint8)(b·3^n) · 3) >> 8``. Ternary codes ``t`` ∈ {−1, 0, 1}; the 2-bit types also decode code
``q = 3`` as ``+2·d``; Q1_0 codes are ±1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POW3 = np.array([1, 3, 9, 27, 81], dtype=np.uint16)


def _trit_bytes(digits: np.ndarray) -> np.ndarray:
    """``(..., 5)`` digits in 0..2, first most significant → ``(...)`` packed bytes."""
    q = (digits.astype(np.uint16) * POW3[::-1]).sum(axis=-1, dtype=np.uint16)
    return ((q * 256 + 242) // 243).astype(np.uint8)


def _byte_trits(packed: np.ndarray, count: int) -> np.ndarray:
    """``(...)`` packed bytes → ``(..., count)`` digits 0..2, the first most significant."""
    shifted = (packed[..., None].astype(np.uint16) * POW3[:count]) & 0xFF
    return ((shifted * 3) >> 8).astype(np.int8)


@dataclass(frozen=True)
class BlockFormat:
    """One ternary/binary block type: geometry, where ``d`` sits, and the code ↔ byte mapping."""

    name: str
    type_id: int
    block_elements: int
    block_bytes: int
    scale_first: bool
    codes: tuple[int, ...] = (-1, 0, 1)

    # subclasses implement _pack_codes / _unpack_codes on ``(n, block_elements)`` int8 codes

    def pack(self, codes: np.ndarray, d: np.ndarray) -> np.ndarray:
        """``(n, block_elements)`` codes and ``(n,)`` fp16 scales → ``(n, block_bytes)`` uint8."""
        codes = np.asarray(codes, dtype=np.int8).reshape(-1, self.block_elements)
        d = np.asarray(d, dtype=np.float16).reshape(-1)
        if d.shape[0] != codes.shape[0]:
            raise ValueError(f"{self.name}: {codes.shape[0]} blocks but {d.shape[0]} scales")
        if not np.isin(codes, self.codes).all():
            raise ValueError(f"{self.name}: codes outside {self.codes}")
        body = self._pack_codes(codes)
        scale = d.view(np.uint8).reshape(-1, 2)
        parts = [scale, body] if self.scale_first else [body, scale]
        return np.concatenate(parts, axis=1)

    def unpack(self, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(n, block_bytes)`` uint8 → ``(codes (n, block_elements) int8, d (n,) float16)``."""
        blocks = np.ascontiguousarray(blocks, dtype=np.uint8).reshape(-1, self.block_bytes)
        if self.scale_first:
            scale, body = blocks[:, :2], blocks[:, 2:]
        else:
            scale, body = blocks[:, -2:], blocks[:, :-2]
        return self._unpack_codes(body), np.ascontiguousarray(scale).view(np.float16).reshape(-1)

    def encode(self, values: np.ndarray) -> np.ndarray:
        """Exact encoding of values that are ``code × d`` per block (``d`` = the block's largest
        ``|value|``, fp16): ``(..., K)`` float → ``(..., K // block_elements · block_bytes)`` uint8.
        Raises ``ValueError`` when a value is not exactly representable that way."""
        values = np.asarray(values, dtype=np.float32)
        lead, k = values.shape[:-1], values.shape[-1]
        if k % self.block_elements:
            raise ValueError(f"{self.name}: row length {k} is not a multiple of {self.block_elements}")
        blocks = values.reshape(-1, self.block_elements)
        d = np.abs(blocks).max(axis=1).astype(np.float16)
        scale = d.astype(np.float32)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            codes = np.where(scale > 0, np.rint(blocks / scale), 0).astype(np.int8)
        if self.codes == (-1, 1):
            codes = np.where(codes < 0, -1, 1).astype(np.int8)
        if not np.array_equal(codes.astype(np.float32) * scale, blocks) or not np.isin(codes, self.codes).all():
            raise ValueError(f"{self.name}: values are not exactly code × fp16 block scale")
        return self.pack(codes, d).reshape(*lead, k // self.block_elements * self.block_bytes)

    def decode(self, data: np.ndarray, k: int) -> np.ndarray:
        """``(..., k // block_elements · block_bytes)`` uint8 → ``(..., k)`` float32."""
        data = np.ascontiguousarray(data, dtype=np.uint8)
        lead = data.shape[:-1]
        codes, d = self.unpack(data.reshape(-1, self.block_bytes))
        if codes.size != int(np.prod(lead, dtype=np.int64)) * k:
            raise ValueError(f"{self.name}: {data.shape} bytes do not hold rows of {k} elements")
        return (codes.astype(np.float32) * d.astype(np.float32)[:, None]).reshape(*lead, k)

    def _pack_codes(self, codes: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _unpack_codes(self, body: np.ndarray) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class TritFormat(BlockFormat):
    """Base-3 packing (TQ1_0, PTQ1_0): ``stages`` are the ``qs`` byte groups, largest first; within a
    stage of ``c`` bytes, byte ``m`` holds elements ``start + n·c + m``; ``qh`` bytes hold four digits."""

    stages: tuple[int, ...] = ()
    qh_bytes: int = 0

    def _pack_codes(self, codes: np.ndarray) -> np.ndarray:
        q = (codes + 1).astype(np.uint8)
        n = q.shape[0]
        out, start = [], 0
        for c in self.stages:
            digits = q[:, start : start + 5 * c].reshape(n, 5, c).transpose(0, 2, 1)
            out.append(_trit_bytes(digits))
            start += 5 * c
        h = self.qh_bytes
        digits = q[:, start : start + 4 * h].reshape(n, 4, h).transpose(0, 2, 1)
        out.append(_trit_bytes(np.concatenate([digits, np.zeros((n, h, 1), np.uint8)], axis=2)))
        return np.concatenate(out, axis=1)

    def _unpack_codes(self, body: np.ndarray) -> np.ndarray:
        n = body.shape[0]
        out, offset = [], 0
        for c in self.stages:
            digits = _byte_trits(body[:, offset : offset + c], 5)  # (n, c, 5)
            out.append(digits.transpose(0, 2, 1).reshape(n, 5 * c))
            offset += c
        h = self.qh_bytes
        digits = _byte_trits(body[:, offset : offset + h], 4)
        out.append(digits.transpose(0, 2, 1).reshape(n, 4 * h))
        return (np.concatenate(out, axis=1) - 1).astype(np.int8)


@dataclass(frozen=True)
class SequentialTwoBitFormat(BlockFormat):
    """Q2_0 / PQ2_0: element ``j`` at bits ``2·(j%4)`` of byte ``j/4``, code ``q = t + 1``."""

    codes: tuple[int, ...] = (-1, 0, 1, 2)

    def _pack_codes(self, codes: np.ndarray) -> np.ndarray:
        q = (codes + 1).astype(np.uint8).reshape(codes.shape[0], -1, 4)
        return (q << np.array([0, 2, 4, 6], np.uint8)).sum(axis=2, dtype=np.uint8)

    def _unpack_codes(self, body: np.ndarray) -> np.ndarray:
        q = (body[:, :, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3
        return (q.reshape(body.shape[0], -1).astype(np.int8) - 1).astype(np.int8)


@dataclass(frozen=True)
class ChunkedTwoBitFormat(BlockFormat):
    """TQ2_0: 32-byte chunks; bits ``2l`` of byte ``m`` of chunk ``c`` → element ``128c + 32l + m``."""

    codes: tuple[int, ...] = (-1, 0, 1, 2)

    def _pack_codes(self, codes: np.ndarray) -> np.ndarray:
        q = (codes + 1).astype(np.uint8).reshape(codes.shape[0], -1, 4, 32)
        shifts = np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]
        return (q << shifts).sum(axis=2, dtype=np.uint8).reshape(codes.shape[0], -1)

    def _unpack_codes(self, body: np.ndarray) -> np.ndarray:
        chunks = body.reshape(body.shape[0], -1, 1, 32)
        q = (chunks >> np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]) & 3
        return (q.reshape(body.shape[0], -1).astype(np.int8) - 1).astype(np.int8)


@dataclass(frozen=True)
class BinaryFormat(BlockFormat):
    """Q1_0: bit ``j%8`` of byte ``j/8`` is element ``j``; 1 → +d, 0 → −d."""

    codes: tuple[int, ...] = (-1, 1)

    def _pack_codes(self, codes: np.ndarray) -> np.ndarray:
        bits = (codes > 0).astype(np.uint8).reshape(codes.shape[0], -1, 8)
        return (bits << np.arange(8, dtype=np.uint8)).sum(axis=2, dtype=np.uint8)

    def _unpack_codes(self, body: np.ndarray) -> np.ndarray:
        bits = (body[:, :, None] >> np.arange(8, dtype=np.uint8)) & 1
        return (bits.reshape(body.shape[0], -1).astype(np.int8) * 2 - 1).astype(np.int8)


FORMATS: dict[str, BlockFormat] = {
    f.name: f
    for f in (
        TritFormat("TQ1_0", 34, 256, 54, scale_first=False, stages=(32, 16), qh_bytes=4),
        ChunkedTwoBitFormat("TQ2_0", 35, 256, 66, scale_first=False),
        BinaryFormat("Q1_0", 41, 128, 18, scale_first=True),
        SequentialTwoBitFormat("Q2_0", 42, 64, 18, scale_first=True),
        SequentialTwoBitFormat("Q2_0_LEGACY", 42, 128, 34, scale_first=True),
        SequentialTwoBitFormat("PQ2_0", 142, 128, 34, scale_first=True),
        TritFormat("PTQ1_0", 143, 128, 28, scale_first=False, stages=(16, 8), qh_bytes=2),
    )
}


def block_format(name: str) -> BlockFormat:
    try:
        return FORMATS[name.upper()]
    except KeyError:
        raise ValueError(f"block type {name!r} not supported; choose one of {', '.join(FORMATS)}") from None
