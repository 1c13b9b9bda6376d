"""Compiled decoders of the GGML block types llama.cpp's quantized files are made of (numba; storage-layouts §5,
docs/acceptance.md §Golden at scale).

:func:`ninfer_core.codecs.ggml_blocks.dequantize` imports this module on its first decode of one of
:data:`TYPES` (numba's import costs about a third of a second). Kernels are ``njit(nogil=True, cache=True)``:
compiled once per machine into ``__pycache__``. Each computes, in float32 and in the same order, the value
gguf-py's numpy decoder (``gguf.quants``, the reference of ggml's ``dequantize_row_*``) gives, so the two are
bit-identical (``tests/codecs/test_ggml_kernel.py``); they only run about 10–20 times faster, which is what
lets verify's reference forward decode a 7B model in seconds. The FP16 multipliers are widened to float32 by
numpy before the kernel (one per block), the codes unpacked inside it:

    Q8_0   32/34   [d][qs:int8 32]                         x = d·q
    Q4_0   32/18   [d][qs:16]                              x = d·(q − 8), low nibbles first
    Q4_K   256/144 [d][dmin][scales:12][qs:128]            x = (d·sc_j)·q − dmin·m_j, 6-bit sc/m per 32
    Q5_K   256/176 [d][dmin][scales:12][qh:32][qs:128]     as Q4_K, bit j//32 of qh gives the fifth bit
    Q6_K   256/210 [ql:128][qh:64][scales:int8 16][d]      x = (d·sc_j)·(q − 32), one scale per 16
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = {"nogil": True, "cache": True}


@numba.njit(**_JIT)
def _q8_0(qs, d, out):
    for b in range(qs.shape[0]):
        s = d[b]
        for j in range(32):
            out[b, j] = np.float32(np.int8(qs[b, 2 + j])) * s


@numba.njit(**_JIT)
def _q4_0(qs, d, out):
    for b in range(qs.shape[0]):
        s = d[b]
        for j in range(16):
            v = qs[b, 2 + j]
            out[b, j] = np.float32(np.int8(v & 0x0F) - np.int8(8)) * s
            out[b, j + 16] = np.float32(np.int8(v >> 4) - np.int8(8)) * s


@numba.njit(**_JIT)
def _scale_min(blk, j):
    """The 6-bit scale and minimum of sub-block ``j`` (0..7) of a Q4_K/Q5_K block (gguf-py ``get_scale_min``)."""
    if j < 4:
        return blk[4 + j] & 0x3F, blk[8 + j] & 0x3F
    md = blk[12 + j - 4]
    return (md & 0x0F) | ((blk[4 + j - 4] >> 2) & 0x30), (md >> 4) | ((blk[8 + j - 4] >> 2) & 0x30)


@numba.njit(**_JIT)
def _q4_k(blocks, d, dmin, five, out):
    """Q4_K, and Q5_K with ``five`` (its ``qh`` at byte 16 moves the nibbles to byte 48)."""
    qs_at = 48 if five else 16
    for b in range(blocks.shape[0]):
        blk = blocks[b]
        for j in range(8):
            sc, m = _scale_min(blk, j)
            ds = d[b] * np.float32(sc)
            dm = dmin[b] * np.float32(m)
            base, shift = qs_at + (j // 2) * 32, (j % 2) * 4
            for i in range(32):
                q = (blk[base + i] >> shift) & 0x0F
                if five:
                    q |= ((blk[16 + i] >> j) & 0x01) << 4
                out[b, 32 * j + i] = ds * np.float32(q) - dm


@numba.njit(**_JIT)
def _q6_k(blocks, d, out):
    for b in range(blocks.shape[0]):
        blk = blocks[b]
        for h in range(2):  # two halves of 128 elements: ql[64h..], qh[32h..]
            for c in range(4):  # chunks of 32: ql nibble c//2 of bytes (c%2)*32.., qh bits 2c
                for i in range(32):
                    lo = (blk[64 * h + (c % 2) * 32 + i] >> (4 * (c // 2))) & 0x0F
                    hi = (blk[128 + 32 * h + i] >> (2 * c)) & 0x03
                    e = 128 * h + 32 * c + i
                    sc = np.float32(np.int8(blk[192 + e // 16]))
                    q = np.int8(lo | (hi << 4)) - np.int8(32)
                    out[b, e] = (d[b] * sc) * np.float32(q)


def _words(blocks: np.ndarray, at: int) -> np.ndarray:
    """The FP16 word at byte ``at`` of every block, as float32."""
    return np.ascontiguousarray(blocks[:, at : at + 2]).view(np.float16).reshape(-1).astype(np.float32)


def _run(kernel, block_size: int, *fp16_at: int, flags: tuple = ()):
    def decode(blocks: np.ndarray) -> np.ndarray:
        blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
        out = np.empty((blocks.shape[0], block_size), dtype=np.float32)
        if blocks.shape[0]:
            kernel(blocks, *(_words(blocks, at) for at in fp16_at), *flags, out)
        return out
    return decode


#: GGML type name → ``(n_blocks, type_size)`` uint8 → ``(n_blocks, block_size)`` float32
TYPES = {
    "Q8_0": _run(_q8_0, 32, 0),
    "Q4_0": _run(_q4_0, 32, 0),
    "Q4_K": _run(_q4_k, 256, 0, 2, flags=(False,)),
    "Q5_K": _run(_q4_k, 256, 0, 2, flags=(True,)),
    "Q6_K": _run(_q6_k, 256, 208),
}
