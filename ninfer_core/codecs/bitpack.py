"""Little-endian bit-field packing: ``w``-bit fields, lowest bits first (storage-layouts §1, §3).

Element ``k`` of a packed row sits in byte ``floor(k*w/8)`` at bit offset ``(k*w) mod 8``::

    w = 4:  byte j = [ k=2j+1 : bits 7..4 | k=2j   : bits 3..0 ]
    w = 2:  byte j = [ 4j+3 | 4j+2 | 4j+1 | 4j ]       (bits 7-6, 5-4, 3-2, 1-0)
    w = 1:  byte j = [ 8j+7 | ... | 8j ]               (bit 7 ... bit 0)

The same order is used by ggml's Q2_0/Q1_0 blocks and by the NVFP4 code plane, so transcoders copy those
bytes unchanged. Unpacking goes through a 256-entry table per width (one gather per byte instead of one
shift-and-mask pass per field); packing reads the fields of a byte as one little-endian word.
"""

from __future__ import annotations

import numpy as np

from .base import scratch

_BYTE = np.arange(256, dtype=np.uint16)


def _unpack_table(w: int) -> np.ndarray:
    per = 8 // w
    shifts = np.arange(per, dtype=np.uint16) * w
    return ((_BYTE[:, None] >> shifts[None, :]) & ((1 << w) - 1)).astype(np.uint8)


UNPACK_TABLES = {w: _unpack_table(w) for w in (1, 2, 4)}


def unpack(packed: np.ndarray, w: int, out: np.ndarray | None = None) -> np.ndarray:
    """``(rows, nbytes)`` uint8 → ``(rows, nbytes * 8 // w)`` uint8 field values (into ``out`` if given)."""
    if w == 8:
        return packed
    rows = packed.shape[0]
    if out is None:
        return np.take(UNPACK_TABLES[w], packed, axis=0).reshape(rows, -1)
    np.take(UNPACK_TABLES[w], packed, axis=0, out=out.reshape(*packed.shape, 8 // w), mode="clip")
    return out


def pack(fields: np.ndarray, w: int, out: np.ndarray) -> np.ndarray:
    """``(rows, n)`` uint8 fields (only the low ``w`` bits are used) → ``out``, ``(rows, n * w // 8)`` uint8.

    The fields of one byte are read as one little-endian word (2 or 4 bytes) and shifted into place, so
    every step is a contiguous whole-array operation (temporaries in per-thread scratch buffers)."""
    if w == 8:
        out[...] = fields
        return out
    if w == 1:
        out[...] = np.packbits(fields & np.uint8(1), axis=-1, bitorder="little")
        return out
    # Mask every byte to its field, then OR in the masked word shifted right by 8i - wi so that field i lands
    # at bit wi of the low byte; whatever lands above bit 7 is dropped by the final narrowing copy.
    word = "<u2" if w == 4 else "<u4"
    v = np.ascontiguousarray(fields).view(word)
    masked = np.bitwise_and(v, 0x0F0F if w == 4 else 0x03030303, out=scratch("pack_masked", v.shape, word))
    acc = scratch("pack_acc", v.shape, word)
    np.right_shift(masked, 8 - w, out=acc)
    np.bitwise_or(acc, masked, out=acc)
    if w == 2:
        part = scratch("pack_part", v.shape, word)
        for i in (2, 3):
            np.right_shift(masked, 6 * i, out=part)
            np.bitwise_or(acc, part, out=acc)
    np.copyto(out, acc, casting="unsafe")
    return out


def byte_table(values: np.ndarray, w: int) -> np.ndarray:
    """A ``(256, 8 // w)`` table mapping each packed byte to the values of its fields, lowest first;
    ``values`` maps a ``w``-bit field to its value (any dtype)."""
    return values[UNPACK_TABLES[w].astype(np.intp)] if w < 8 else values[np.arange(256)][:, None]
