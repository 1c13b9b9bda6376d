"""numpy readers of GGML blocks that gguf-py cannot decode: ternary/binary fork types and a few plain ones.

Every reader takes ``(n_blocks, type_size)`` uint8 blocks. The ternary/2-bit/1-bit readers return the raw
FP16 multiplier words and the codes *as stored* (so that transcoders copy them without a float round
trip); ``DEQUANTIZERS`` turns blocks into float32 values. Layouts (docs/gguf-conventions.md):

    Q1_0     128/18  [d:fp16][qs:16]       element j = bit j%8 of qs[j/8]; 1 → +d, 0 → −d
    Q2_0     128/34  [d:fp16][qs:32]       element j = bits 2(j%4).. of qs[j/4]; value (q−1)·d
             64/18   [d:fp16][qs:16]       (PQ2_0 = the 128/34 form)
    TQ2_0    256/66  [qs:64][d:fp16]       chunk c∈{0,1}: bits 2l.. of qs[32c+m] = element 128c+32l+m
    TQ1_0    256/54  [qs:48][qh:4][d:fp16] base-3, trit n of byte b = ((uint8)(b·3ⁿ)·3) >> 8, first trit
    PTQ1_0   128/28  [qs:24][qh:2][d:fp16]   most significant; value (t−1)·d; segments in TRIT_SEGMENTS

gguf-py has numpy decoders for TQ1_0/TQ2_0 (used as the reference in the tests) but not for Q1_0, Q2_0,
PQ2_0 or PTQ1_0, hence this module. Q8_1 and Q8_K (ggml's dot-product intermediates, never written to
GGUF by llama.cpp) and the plain integer/F64 types are decoded here too, with the sizes gguf-py lists
(Q8_1: float32 d, float32 s, int8 qs[32]; Q8_K: float32 d, int8 qs[256], int16 bsums[16]).
"""

from __future__ import annotations

import numpy as np

from . import bitpack

# TQ1_0 / PTQ1_0 base-3 segments: (first byte, bytes, trits per byte, first element); trit n of byte
# first+m holds element base + n*bytes + m.
TRIT_SEGMENTS = {
    "TQ1_0": ((0, 32, 5, 0), (32, 16, 5, 160), (48, 4, 4, 240)),
    "PTQ1_0": ((0, 16, 5, 0), (16, 8, 5, 80), (24, 2, 4, 120)),
}
_POW3 = np.array([1, 3, 9, 27, 81], dtype=np.uint8)


def fp16_words(blocks: np.ndarray, at: int) -> np.ndarray:
    """The little-endian FP16 word at byte ``at`` of every block, as uint16 ``(n_blocks,)``."""
    return blocks[:, at].astype(np.uint16) | (blocks[:, at + 1].astype(np.uint16) << np.uint16(8))


def words_to_f32(words: np.ndarray) -> np.ndarray:
    return words.view(np.float16).astype(np.float32)


def trits(packed: np.ndarray, n_trits: int) -> np.ndarray:
    """``(n, m)`` bytes → ``(n, n_trits, m)`` trits 0..2, trit ``i`` = ``((uint8)(b * 3**i) * 3) >> 8``."""
    shifted = packed[:, None, :] * _POW3[:n_trits, None]  # uint8 arithmetic wraps, as the C code does
    return ((shifted.astype(np.uint16) * 3) >> 8).astype(np.uint8)


def q1_0(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q1_0 → (d words, bits ``(n, 128)``)."""
    return fp16_words(blocks, 0), np.unpackbits(blocks[:, 2:18], axis=1, bitorder="little")


def q2_0(blocks: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Q2_0 / PQ2_0 (d first) → (d words, codes q ``(n, block_size)`` in 0..3)."""
    return fp16_words(blocks, 0), bitpack.unpack(blocks[:, 2 : 2 + block_size // 4], 2)


def tq2_0(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TQ2_0 → (d words, codes q ``(n, 256)`` in 0..3, element order)."""
    qs = blocks[:, :64].reshape(-1, 2, 1, 32) >> (np.arange(4, dtype=np.uint8) * 2).reshape(1, 1, 4, 1)
    return fp16_words(blocks, 64), (qs & 3).reshape(-1, 256)


def base3(blocks: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """TQ1_0 / PTQ1_0 → (d words (last two bytes), trits ``(n, block_size)`` in 0..2, element order)."""
    parts = [trits(blocks[:, s : s + m], k).reshape(len(blocks), -1) for s, m, k, _ in TRIT_SEGMENTS[name]]
    return fp16_words(blocks, blocks.shape[1] - 2), np.concatenate(parts, axis=1)


def _offset_values(d: np.ndarray, q: np.ndarray) -> np.ndarray:
    return (q.astype(np.float32) - 1) * words_to_f32(d)[:, None]


def _q1_0_values(blocks: np.ndarray) -> np.ndarray:
    d, bits = q1_0(blocks)
    dv = words_to_f32(d)[:, None]
    return np.where(bits != 0, dv, -dv)


DEQUANTIZERS = {
    "Q1_0": _q1_0_values,
    "Q2_0_G128": lambda b: _offset_values(*q2_0(b, 128)),
    "Q2_0_G64": lambda b: _offset_values(*q2_0(b, 64)),
    "PQ2_0": lambda b: _offset_values(*q2_0(b, 128)),
    "TQ2_0": lambda b: _offset_values(*tq2_0(b)),
    "TQ1_0": lambda b: _offset_values(*base3(b, "TQ1_0")),
    "PTQ1_0": lambda b: _offset_values(*base3(b, "PTQ1_0")),
    "Q8_1": lambda b: b[:, 8:].view(np.int8) * b[:, :4].copy().view("<f4"),
    "Q8_K": lambda b: b[:, 4:260].view(np.int8) * b[:, :4].copy().view("<f4"),
    "I8": lambda b: b.view(np.int8).astype(np.float32),
    "I16": lambda b: b.copy().view("<i2").astype(np.float32),
    "I32": lambda b: b.copy().view("<i4").astype(np.float32),
    "I64": lambda b: b.copy().view("<i8").astype(np.float32),
    "F64": lambda b: b.copy().view("<f8").astype(np.float32),
}

#: types with a compiled decoder (:mod:`.ggml_kernel`, bit-identical to gguf-py's, imported on first use)
COMPILED = frozenset({"Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K"})


def dequantize(name: str, blocks: np.ndarray) -> np.ndarray | None:
    """``(n_blocks, type_size)`` uint8 blocks of GGML type ``name`` → ``(n_blocks, block_size)`` float32: the
    compiled decoder where there is one (:data:`COMPILED`), else this module's reader; ``None`` when neither
    decodes ``name`` (the caller uses gguf-py's)."""
    if name in COMPILED:
        from . import ggml_kernel

        return ggml_kernel.TYPES[name](blocks)
    own = DEQUANTIZERS.get(name)
    return None if own is None else own(blocks)
