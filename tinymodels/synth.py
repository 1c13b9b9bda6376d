"""Deterministic float "ground truth" values for generated checkpoints.

Every tensor is described by a :class:`TensorSpec` (HF name, HF shape, initialiser). Its values are
drawn row block by row block: block ``b`` (``ROW_BLOCK`` rows along axis 0) comes from
``numpy.random.default_rng([seed, crc32(name), b])``, so any row range of any tensor can be produced
on its own, in any order, without holding the tensor (the 4 GiB benchmark models are streamed).

Rules that make the values useful as a test reference:

- **bf16-exact.** Values are rounded to bfloat16 (round to nearest even, gguf-py's ``BF16`` codec,
  which matches ``ggml_compute_fp32_to_bf16``) and magnitudes below 2**-14 are flushed to 0, so the
  same numbers are exactly representable in BF16, F16 and F32: an HF directory written in any of
  these dtypes and a GGUF written in F32/F16/BF16 hold the reference bit for bit, and llama.cpp's
  ``w + 1`` norm shift (done in float32) is exactly invertible.
- **Order-sensitive.** Matrix row ``r`` carries the scale ``0.5 + frac((r + 1)·φ⁻¹)`` (golden-ratio
  sequence: distinct for every row, not monotonic, so no id range dominates the logits) on top of the
  noise, so per-row norms differ; a swapped row or head changes values and norms even when every
  size is right.
- **Architecture-plausible.** Zero-centred norms (Qwen3.5 ``x̂·(1+w)``) are drawn around 0, plain
  and gated norms around 1, ``A_log = log(U(1, 16))`` (transformers draws ``A`` from ``U(0.01, 16)``),
  ``dt_bias`` around 1 (transformers initialises it to ones), linear layers at ``1/sqrt(fan_in)``
  (``fan_in`` = the product of all axes but the first, so a Conv3d patch embedding is scaled by its
  whole receptive field), the projections back into the residual stream (``o_proj``, ``out_proj``,
  ``down_proj``: init ``residual``) at half that, GPT-2 style, so the tiny model is well conditioned:
  quantization noise moves the logits little while a swapped head moves them a lot. Biases (vision
  tower) are small values around 0.

:class:`StackedSpec` composes specs into one tensor (MoE expert banks: experts stacked on a new
leading axis, each expert optionally the row-concatenation of several projections, e.g. transformers'
fused ``gate_up_proj``), so a fused tensor holds bit for bit the values of its per-expert parts and
any row range is produced from the parts' row blocks alone.
"""

from __future__ import annotations

import collections
import zlib
from dataclasses import dataclass

import numpy as np
from gguf.quants import BF16

ROW_BLOCK = 256
F16_MIN_NORMAL = 2.0**-14
INV_PHI = (5.0**0.5 - 1.0) / 2.0

INITS = ("linear", "residual", "embedding", "norm_zero", "norm_one", "conv", "a_log", "dt_bias", "bias")


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), returned as float32: gguf-py's ``BF16``
    block codec over the whole array at once (its blocks are single values, so ``gguf.quants.quantize``'s
    16-row grouping would only add calls, not change a bit)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    return BF16.dequantize_blocks(BF16.quantize_blocks(x.reshape(-1, 1))).reshape(x.shape)


@dataclass(frozen=True)
class TensorSpec:
    """One HF tensor: name, shape (HF order, rows first) and initialiser (one of ``INITS``)."""

    name: str
    shape: tuple[int, ...]
    init: str

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"{self.name}: unknown initialiser {self.init!r}")

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def row_size(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1

    @property
    def size(self) -> int:
        return self.rows * self.row_size

    def values(self, seed: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The float32 values of rows ``[start, stop)`` with shape ``(stop - start, *shape[1:])``."""
        stop = self.rows if stop is None else stop
        if not 0 <= start <= stop <= self.rows:
            raise ValueError(f"{self.name}: row range [{start}, {stop}) outside 0..{self.rows}")
        first, last = start // ROW_BLOCK, (stop + ROW_BLOCK - 1) // ROW_BLOCK
        blocks = [self._block(seed, b) for b in range(first, last)]
        rows = np.concatenate(blocks, axis=0) if blocks else np.empty((0, self.row_size), np.float32)
        rows = rows[start - first * ROW_BLOCK : stop - first * ROW_BLOCK]
        return rows.reshape((stop - start, *self.shape[1:]))

    def _block(self, seed: int, block: int) -> np.ndarray:
        if self.size * 4 > CACHED_TENSOR_BYTES:  # a real-size tensor streams: its blocks are drawn when asked
            return self._draw(seed, block)
        key = (self.name, self.shape, self.init, seed, block)
        cached = _BLOCKS.get(key)
        if cached is None:
            cached = _BLOCKS.put(key, self._draw(seed, block))
        return cached

    def _draw(self, seed: int, block: int) -> np.ndarray:
        lo = block * ROW_BLOCK
        hi = min(lo + ROW_BLOCK, self.rows)
        rng = np.random.default_rng([seed, zlib.crc32(self.name.encode()), block])
        shape = (hi - lo, self.row_size)
        if self.init == "a_log":
            raw = np.log(rng.uniform(1.0, 16.0, size=shape)).astype(np.float32)
        else:
            raw = rng.standard_normal(size=shape, dtype=np.float32)
            raw = _shape_noise(raw, self.init, self.shape, lo, hi)
        raw = round_bf16(raw)
        return np.where(np.abs(raw) < F16_MIN_NORMAL, np.float32(0), raw)


#: tensors up to this size (float32 bytes) keep their drawn blocks (:class:`_BlockCache`): a tiny model's
CACHED_TENSOR_BYTES = 256 << 10


class _BlockCache:
    """The row blocks of small tensors drawn last in this process, up to :attr:`limit` bytes (read-only arrays):
    tests write the same tiny model many times, and a block's values depend only on its key."""

    def __init__(self, limit: int) -> None:
        self.limit, self.bytes, self.blocks = limit, 0, collections.OrderedDict()

    def get(self, key) -> np.ndarray | None:
        block = self.blocks.get(key)
        if block is not None:
            self.blocks.move_to_end(key)
        return block

    def put(self, key, block: np.ndarray) -> np.ndarray:
        block.setflags(write=False)
        self.blocks[key] = block
        self.bytes += block.nbytes
        while self.bytes > self.limit:
            self.bytes -= self.blocks.popitem(last=False)[1].nbytes
        return block


_BLOCKS = _BlockCache(32 << 20)


def _shape_noise(noise: np.ndarray, init: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """Scale and shift standard-normal noise for rows ``[lo, hi)`` of a tensor of ``shape``."""
    if init in ("linear", "residual", "embedding"):
        row_scale = (0.5 + np.modf((np.arange(lo, hi, dtype=np.float64) + 1.0) * INV_PHI)[0]).astype(np.float32)
        fan_in = float(np.prod(shape[1:], dtype=np.int64))
        gain = {"linear": 1.0 / np.sqrt(fan_in), "residual": 0.5 / np.sqrt(fan_in), "embedding": 1.0}[init]
        return noise * (row_scale[:, None] * np.float32(gain))
    if init == "norm_zero":
        return noise * np.float32(0.1)
    if init == "norm_one":
        return np.float32(1.0) + noise * np.float32(0.1)
    if init == "conv":
        return noise * np.float32(0.4)
    if init == "bias":
        return noise * np.float32(0.02)
    return np.float32(1.0) + noise * np.float32(0.3)  # dt_bias


@dataclass(frozen=True)
class StackedSpec:
    """A tensor built from other specs: ``experts[e]`` are stacked on a new leading axis, the parts of
    one expert concatenated along their rows. Shape ``(E, sum(part rows), *part.shape[1:])``.

    It has the :class:`TensorSpec` surface the writers use (``name``, ``shape``, ``rows``,
    ``row_size``, ``size``, ``values``) plus :meth:`flat_values`, which produces a range of the
    flattened last-axis rows (``E·N`` rows of ``K``) so a bank is streamed in chunks smaller than one
    expert.
    """

    name: str
    experts: tuple[tuple[TensorSpec, ...], ...]

    def __post_init__(self) -> None:
        tails = {p.shape[1:] for parts in self.experts for p in parts}
        heights = {sum(p.rows for p in parts) for parts in self.experts}
        if not self.experts or len(tails) != 1 or len(heights) != 1:
            raise ValueError(f"{self.name}: experts must be non-empty and have equal shapes")

    @property
    def shape(self) -> tuple[int, ...]:
        first = self.experts[0]
        return (len(self.experts), sum(p.rows for p in first), *first[0].shape[1:])

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def row_size(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64))

    @property
    def size(self) -> int:
        return self.rows * self.row_size

    def values(self, seed: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Experts ``[start, stop)`` with shape ``(stop - start, *shape[1:])``."""
        stop = self.rows if stop is None else stop
        if not 0 <= start <= stop <= self.rows:
            raise ValueError(f"{self.name}: expert range [{start}, {stop}) outside 0..{self.rows}")
        out = np.empty((stop - start, *self.shape[1:]), np.float32)
        for i, e in enumerate(range(start, stop)):
            out[i] = np.concatenate([p.values(seed) for p in self.experts[e]], axis=0)
        return out

    def flat_values(self, seed: int, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` of the tensor viewed as ``(E·N, prod(shape[2:]))``."""
        per_expert = self.shape[1]
        width = int(np.prod(self.shape[2:], dtype=np.int64))
        if not 0 <= start <= stop <= self.rows * per_expert:
            raise ValueError(f"{self.name}: row range [{start}, {stop}) outside 0..{self.rows * per_expert}")
        pieces = []
        row = start
        while row < stop:
            expert, local = divmod(row, per_expert)
            offset = 0
            for part in self.experts[expert]:
                if local < offset + part.rows:
                    take = min(stop - row, offset + part.rows - local)
                    pieces.append(part.values(seed, local - offset, local - offset + take).reshape(take, width))
                    row += take
                    break
                offset += part.rows
        return np.concatenate(pieces, axis=0) if pieces else np.empty((0, width), np.float32)
