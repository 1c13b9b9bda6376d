"""Exact transcoding of GGML block bytes into v3 formats (storage-layouts §6), without a float round trip.

``TRANSCODES`` is the table of supported (source type, target format) pairs with their exactness, which a
converter records in provenance:

- ``bit_exact``: the source's codes and multipliers (or whole words) are copied unchanged;
- ``value_exact``: codes are re-encoded (ternary trits → two's complement, negative multipliers folded
  into the codes) and every decoded value is identical.

Every transcoder reads whole rows of ``(N, K/B, T)`` blocks and fills the planes of the target format (row
blocks on the thread pool, like the codecs). A block the target cannot represent — a Q2_0/TQ2_0 code 3 going
to t2, a Q8_0 code −128, a non-finite multiplier, two 64-blocks of Q2_0_G64 with different magnitudes
sharing one t2 group — raises EncodingError naming the tensor and the block, never a silent clamp.

Sign folding for t2 (storage-layouts §1: writers of t2 write non-negative multipliers): a block with
``d < 0`` is stored as ``|d|`` with its ternary codes negated, which is value-exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import bitpack, ggml_blocks
from .base import FORMATS, Geometry, run_row_blocks
from .base import fail as _fail
from .ggml_types import GGUF_PY_TYPES

SECTION = "storage-layouts §6"
FP16_EXP = 0x7C00
FP16_SIGN = 0x8000


def _block_error(where: str | None, block: int, nb: int, bsize: int, what: str, rule: str):
    row, b = divmod(block, nb)
    tensor = f"tensor {where!r}: " if where else ""
    return _fail(f"{tensor}block {block} (row {row}, elements {b * bsize}..{(b + 1) * bsize - 1}) {what}",
                 rule, SECTION, where=where)


def _check_finite(d: np.ndarray, r0: int, nb: int, bsize: int, where: str | None) -> None:
    bad = (d & FP16_EXP) == FP16_EXP
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise _block_error(where, r0 * nb + i, nb, bsize, "has a non-finite FP16 multiplier", "non_finite_multiplier")


# --- bit-exact copies into row_split planes -------------------------------------------------------------

def _q8_0_to_q8(src: np.ndarray, geom: Geometry, views: dict, r0: int, r1: int, where: str | None) -> None:
    """Q8_0 ``[d:fp16][qs:int8 x32]`` → q8 low plane (codes) and scale plane (d), both copied."""
    nb = src.shape[1]
    blocks = src[r0:r1].reshape(r1 - r0, -1).view(np.dtype([("d", "<u2"), ("qs", "V32")]))
    scale = views["scale"][r0:r1].view("<u2")[:, :nb]
    scale[...] = blocks["d"]
    _check_finite(scale, r0, nb, 32, where)  # on the copied words, not the strided field: 10x faster
    low = views["low"][r0:r1]
    low.view("V32")[:, :nb] = blocks["qs"]
    if low[:, : nb * 32].view(np.int8).min(initial=0) == -128:  # one pass; where, only when there is one
        i = int(np.flatnonzero(low[:, : nb * 32].reshape(-1) == 0x80)[0])
        raise _block_error(where, r0 * nb + i // 32, nb, 32, "holds code -128, invalid in q8_g32_fp16", "invalid_code")


def _q2_0_to_q2(src: np.ndarray, geom: Geometry, views: dict, r0: int, r1: int, where: str | None) -> None:
    """Q2_0 / PQ2_0 ``[d:fp16][qs]`` → q2: the 2-bit fields are already in q2's order and meaning (u − 1),
    so qs bytes are copied; ``d`` is copied to each 64-group of its block."""
    nb, qbytes = src.shape[1], src.shape[2] - 2
    blocks = src[r0:r1].reshape(r1 - r0, -1).view(np.dtype([("d", "<u2"), ("qs", f"V{qbytes}")]))
    d = blocks["d"]
    _check_finite(d, r0, nb, qbytes * 4, where)
    low = views["low"][r0:r1]
    low[:, nb * qbytes :] = 0x55  # padding columns: zero code u = 1 in every field
    low.view(f"V{qbytes}")[:, :nb] = blocks["qs"]
    reps = qbytes * 4 // 64
    views["scale"][r0:r1].view("<u2")[:, : nb * reps] = np.repeat(d, reps, axis=1)


# --- value-exact re-encoding into t2 ---------------------------------------------------------------------

def _t2_rows(values: np.ndarray, d: np.ndarray, views: dict, r0: int, r1: int) -> None:
    """Write ternary ``values`` ``(rows, nb, B)`` int8 in −1..1 with FP16 words ``d`` ``(rows, nb)`` (B a
    multiple of 128) as t2: negative multipliers folded into the codes."""
    rows, nb, bsize = values.shape
    neg = (d & FP16_SIGN) != 0
    v = np.where(neg[:, :, None], -values, values).astype(np.int8).view(np.uint8)
    low = views["low"][r0:r1]
    bitpack.pack(v.reshape(rows, -1), 2, out=low[:, : nb * bsize // 4])
    per = bsize // 128
    views["scale"][r0:r1].view("<u2")[:, : nb * per] = np.repeat(d & 0x7FFF, per, axis=1)


def _ternary(reader: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], offset: int, max_code: int):
    """Transcoder from a block reader returning (d words, codes); value = code − offset; codes above
    ``max_code`` are not ternary."""

    def run(src: np.ndarray, geom: Geometry, views: dict, r0: int, r1: int, where: str | None) -> None:
        rows, nb = r1 - r0, src.shape[1]
        d, q = reader(src[r0:r1].reshape(rows * nb, -1))
        bsize = q.shape[1]
        _check_finite(d, r0, nb, bsize, where)
        bad = (q > max_code).any(axis=1)
        if bad.any():
            raise _block_error(where, r0 * nb + int(np.flatnonzero(bad)[0]), nb, bsize,
                               "holds code 3 (value 2*d), which t2_g128_fp16 cannot represent", "unrepresentable_block")
        values = q.astype(np.int8) - np.int8(offset)
        _t2_rows(values.reshape(rows, nb, bsize), d.reshape(rows, nb), views, r0, r1)

    return run


def _q1_0_reader(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d, bits = ggml_blocks.q1_0(blocks)
    return d, bits * np.uint8(2)  # bit 1 → +1, bit 0 → −1: code 2b, value code − 1


def _q2_0_g64_to_t2(src: np.ndarray, geom: Geometry, views: dict, r0: int, r1: int, where: str | None) -> None:
    """Official Q2_0 (64/18) → t2: the two 64-blocks of a 128-group must share ``|d|`` unless one of them is
    all zeros (its multiplier does not matter)."""
    rows, nb = r1 - r0, src.shape[1]
    d, q = ggml_blocks.q2_0(src[r0:r1].reshape(rows * nb, -1), 64)
    _check_finite(d, r0, nb, 64, where)
    bad = (q == 3).any(axis=1)
    if bad.any():
        raise _block_error(where, r0 * nb + int(np.flatnonzero(bad)[0]), nb, 64,
                           "holds code 3 (value 2*d), which t2_g128_fp16 cannot represent", "unrepresentable_block")
    groups = -(-nb // 2)
    values = np.zeros((rows, groups * 2, 64), dtype=np.int8)
    values[:, :nb] = q.reshape(rows, nb, 64).astype(np.int8) - np.int8(1)
    neg = np.zeros((rows, groups * 2), dtype=bool)
    neg[:, :nb] = (d.reshape(rows, nb) & FP16_SIGN) != 0
    values = np.where(neg[:, :, None], -values, values).reshape(rows, groups, 128)
    mag = np.zeros((rows, groups * 2), dtype=np.uint16)
    mag[:, :nb] = d.reshape(rows, nb) & 0x7FFF
    nz = (values.reshape(rows, groups, 2, 64) != 0).any(axis=-1)
    mag = mag.reshape(rows, groups, 2)
    clash = nz[..., 0] & nz[..., 1] & (mag[..., 0] != mag[..., 1])
    if clash.any():
        r, g = (int(i) for i in np.argwhere(clash)[0])
        raise _block_error(where, (r0 + r) * nb + 2 * g + 1, nb, 64,
                           f"has multiplier magnitude {mag[r, g, 1]:#06x} but block {(r0 + r) * nb + 2 * g} of the same "
                           f"t2 group has {mag[r, g, 0]:#06x}", "unrepresentable_block")
    scale = np.where(nz[..., 0] | ~nz[..., 1], mag[..., 0], mag[..., 1])
    bitpack.pack(values.view(np.uint8).reshape(rows, -1), 2, out=views["low"][r0:r1][:, : groups * 32])
    views["scale"][r0:r1].view("<u2")[:, :groups] = scale


# --- contiguous and passthrough targets (src rows are the object's rows) -----------------------------------

def _copy_rows(plane: str):
    def run(src: np.ndarray, geom: Geometry, views: dict, r0: int, r1: int, where: str | None) -> None:
        views[plane][r0:r1] = src[r0:r1].reshape(r1 - r0, -1)

    return run


def _f16_to_fp32(src: np.ndarray, geom: Geometry, views: dict, r0: int, r1: int, where: str | None) -> None:
    views["data"][r0:r1] = src[r0:r1].reshape(r1 - r0, -1).view("<f2").astype("<f4").view(np.uint8)


@dataclass(frozen=True)
class Transcode:
    """One exact path: ``run(src, geom, views, r0, r1, tensor)`` fills rows ``[r0, r1)`` of the target
    planes from ``src``, the source bytes with one row per target row (``(N, K/B, T)`` for rank 2)."""

    run: Callable
    exactness: str


_to_t2_from_q2 = _ternary(lambda b: ggml_blocks.q2_0(b, 128), 1, 2)

# (source GGML type, target format) -> how. Every ``gguf_<type>`` passthrough target is added below.
TRANSCODES: dict[tuple[str, str], Transcode] = {
    ("Q8_0", "q8_g32_fp16"): Transcode(_q8_0_to_q8, "bit_exact"),
    ("Q2_0_G128", "q2_g64_fp16"): Transcode(_q2_0_to_q2, "bit_exact"),
    ("Q2_0_G64", "q2_g64_fp16"): Transcode(_q2_0_to_q2, "bit_exact"),
    ("PQ2_0", "q2_g64_fp16"): Transcode(_q2_0_to_q2, "bit_exact"),
    ("Q2_0_G128", "t2_g128_fp16"): Transcode(_to_t2_from_q2, "value_exact"),
    ("PQ2_0", "t2_g128_fp16"): Transcode(_to_t2_from_q2, "value_exact"),
    ("Q2_0_G64", "t2_g128_fp16"): Transcode(_q2_0_g64_to_t2, "value_exact"),
    ("TQ2_0", "t2_g128_fp16"): Transcode(_ternary(ggml_blocks.tq2_0, 1, 2), "value_exact"),
    ("TQ1_0", "t2_g128_fp16"): Transcode(_ternary(lambda b: ggml_blocks.base3(b, "TQ1_0"), 1, 2), "value_exact"),
    ("PTQ1_0", "t2_g128_fp16"): Transcode(_ternary(lambda b: ggml_blocks.base3(b, "PTQ1_0"), 1, 2), "value_exact"),
    ("Q1_0", "t2_g128_fp16"): Transcode(_ternary(_q1_0_reader, 1, 2), "value_exact"),
    ("BF16", "bf16"): Transcode(_copy_rows("data"), "bit_exact"),
    ("F32", "fp32"): Transcode(_copy_rows("data"), "bit_exact"),
    ("F16", "fp32"): Transcode(_f16_to_fp32, "value_exact"),  # every FP16 is a float32: widened, not rounded
}
for _t in GGUF_PY_TYPES:
    TRANSCODES[(_t.name, f"gguf_{_t.name.lower()}")] = Transcode(_copy_rows("blocks"), "bit_exact")


def run_transcode(path: Transcode, target: str, src: np.ndarray, geom: Geometry, where: str | None, *,
                  inline: bool = False) -> np.ndarray:
    """Fill a zeroed object of ``target`` from ``src`` blocks ``(N, K/B, T)``; its bytes as a uint8 array.
    ``inline``: all rows in the calling thread, else row blocks on the pool."""
    codec = FORMATS[target]
    buf = np.zeros(geom.nbytes, dtype=np.uint8)
    views = codec.plane_views(geom, buf)
    block_rows = max(1, geom.n_rows) if inline else codec.block_rows(geom)
    run_row_blocks(geom.n_rows, block_rows, lambda r0, r1: path.run(src, geom, views, r0, r1, where))
    return buf
