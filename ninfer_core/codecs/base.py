"""The codec registry, plane geometry and the row-block drivers every format shares.

One class per storage format (``docs/format/layouts.md``), registered by declaration::

    class Q4(RowSplitCodec, fmt="q4_g64_fp16"): ...

A codec declares its layout, its plane list (``plane_specs``: name, size and row geometry of every plane,
in order) and pure numpy kernels that work on a block of whole rows. This module does the rest once:

- **plane offsets** — planes follow each other in the listed order; every plane after the first starts at
  an object-relative offset that is a multiple of 256, the gap being zero bytes; the encoded size ends at
  the last byte of the last plane (storage-layouts "Notation");
- **row views** — every plane is a sequence of *units*, each covering ``unit_rows`` consecutive rows in
  ``unit_bytes`` bytes (a row-major plane: one row per unit; the NVFP4 block-scale plane: 128-row tiles;
  the NVFP4 divisor plane: one FP32 per stacked matrix), so the bytes of rows ``[r0, r1)`` are one
  contiguous sub-range of each plane (container §7.3);
- **drivers** — decode, encode and check split the rows into blocks of about a million elements, which
  bounds temporaries, and run the blocks on a shared worker pool (numpy releases the GIL in its kernels);
  kernels keep their temporaries in per-thread :func:`scratch` buffers, reused from block to block.

Errors are :class:`~ninfer_core.errors.EncodingError` with a stable ``rule``; findings of ``check`` are
:class:`~ninfer_core.findings.Finding` records.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..errors import EncodingError, ResourceError
from ..findings import Finding

PLANE_ALIGNMENT = 256
MAX_RANK = 16
ENCODERS = ("absmax", "mse")
RAW_BYTES_ENCODING = "raw_bytes_v1"
BLOCK_ELEMENTS = 1 << 20  # elements per row block

FORMATS: dict[str, type[Codec]] = {}



def _available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_threads = _available_cores()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def set_threads(n: int | None) -> None:
    """Set how many threads the row-block drivers use (``None``: one per available core)."""
    global _threads, _pool
    with _pool_lock:
        _threads = max(1, _available_cores() if n is None else int(n))
        if _pool is not None:
            _pool.shutdown(wait=True)
            _pool = None


def get_threads() -> int:
    return _threads


def align_up(n: int, a: int) -> int:
    return -(-n // a) * a


def element_count(shape: Sequence[int]) -> int:
    """Number of logical elements of ``shape`` (1 for rank 0), as an exact Python int."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


def fail(message: str, rule: str, section: str = "storage-layouts", *, where: str | None = None) -> EncodingError:
    """Build the EncodingError every codec raises (``where``: tensor or object the error is about)."""
    return EncodingError(message, json_path=where, section=section, rule=rule)


@dataclass(frozen=True)
class Plane:
    """A contiguous byte region of an encoded object.

    ``offset``/``size`` are relative to the object's first byte. The plane is ``size // unit_bytes``
    units of ``unit_bytes`` bytes, unit ``u`` covering rows ``[u * unit_rows, (u + 1) * unit_rows)`` of the
    object's ``n_rows`` rows.
    """

    name: str
    offset: int
    size: int
    n_rows: int
    unit_rows: int
    unit_bytes: int

    def rows(self, r0: int, r1: int) -> tuple[int, int]:
        """``(offset, size)`` — object-relative — of the bytes of this plane that cover rows ``[r0, r1)``.

        Exact for row-major planes; for a plane whose units span several rows (NVFP4 block-scale tiles,
        NVFP4 divisors) it is the smallest run of whole units covering the rows (container §7.3: the view
        keeps the parent's swizzle and divisor).
        """
        check_row_range(r0, r1, self.n_rows)
        u0 = r0 // self.unit_rows
        u1 = -(-r1 // self.unit_rows) if r1 > r0 else u0
        return self.offset + u0 * self.unit_bytes, (u1 - u0) * self.unit_bytes


@dataclass(frozen=True)
class PlaneSpec:
    """A plane before placement: name, byte size and row geometry (see :class:`Plane`)."""

    name: str
    size: int
    unit_rows: int
    unit_bytes: int


def check_row_range(r0: int, r1: int, n_rows: int) -> None:
    if not (isinstance(r0, int | np.integer) and isinstance(r1, int | np.integer) and 0 <= r0 <= r1 <= n_rows):
        raise fail(f"row range [{r0}, {r1}) is not inside [0, {n_rows}]", "row_range", "container §7.3")


@dataclass(frozen=True)
class Geometry:
    """Everything a kernel needs about one (format, layout, shape, divisors): sizes computed once."""

    shape: tuple[int, ...]
    divisors: int
    n_rows: int
    planes: tuple[Plane, ...]
    extra: dict = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        last = self.planes[-1]
        return last.offset + last.size


def place_planes(specs: Sequence[PlaneSpec], n_rows: int) -> tuple[Plane, ...]:
    """Give each plane its offset: in order, each after the first 256-aligned (storage-layouts Notation)."""
    planes, pos = [], 0
    for i, s in enumerate(specs):
        if i:
            pos = align_up(pos, PLANE_ALIGNMENT)
        planes.append(Plane(s.name, pos, s.size, n_rows, s.unit_rows, s.unit_bytes))
        pos += s.size
    return tuple(planes)


def as_u8(data, what: str = "data") -> np.ndarray:
    """A flat uint8 view of ``data`` (bytes, bytearray, memoryview, numpy array incl. memmap) — no copy
    unless the array is not contiguous."""
    if isinstance(data, np.ndarray):
        arr = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        return arr.reshape(-1).view(np.uint8)
    try:
        return np.frombuffer(data, dtype=np.uint8)
    except TypeError as exc:
        raise fail(f"{what} is not a byte buffer ({type(data).__name__})", "not_a_buffer") from exc


_local = threading.local()


_KERNELS_LOCK = threading.Lock()
_KERNELS_FAILED: dict[str, str] = {}


def compiled_kernels(name: str):
    """The compiled kernel module ``name`` of this package (numba; imported on the first encode, once, under a
    lock: worker threads encode at once). A host that cannot load it — under ``ulimit -v`` numba's import
    fails with ImportError, OSError or MemoryError, and a second try meets a half-imported ``numba``
    (AttributeError) — gets one typed :class:`~ninfer_core.errors.ResourceError` on every call, not a
    traceback (docs/robustness.md §Promises)."""
    with _KERNELS_LOCK:
        if name not in _KERNELS_FAILED:
            try:
                return importlib.import_module(f"{__package__}.{name}")
            except (ImportError, OSError, MemoryError, AttributeError) as exc:
                _KERNELS_FAILED[name] = f"{type(exc).__name__}: {exc}"
    raise ResourceError(f"the compiled encode kernels ({name}, numba) cannot be loaded: {_KERNELS_FAILED[name]}; "
                        "on a memory-limited host (ulimit -v) raise the limit", rule="kernels_unavailable",
                        section="docs/robustness.md §Promises")


def kernel_input(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``, the one array type the compiled encode kernels take for what they only
    read: numba compiles one signature per array type, so a writeable and a read-only input (a mapped
    source) would otherwise compile the kernel twice (docs/imatrix.md §Requantization speed)."""
    v = a.view()
    v.flags.writeable = False
    return v


def scratch(name: str, shape: Sequence[int], dtype) -> np.ndarray:
    """A reusable per-thread buffer ``name`` viewed as ``shape``/``dtype`` (contents undefined).

    Kernels write their large temporaries here with ``out=``: a fresh array per row block costs a page
    fault per 4 KiB in a worker thread, which measured 2–10× slower than the arithmetic itself. A
    buffer lives as long as its thread: one row block's worth per name, in each pool thread and in each
    thread that ran a single-block call."""
    dt = np.dtype(dtype)
    n = element_count(shape) * dt.itemsize
    pool = _local.__dict__.setdefault("pool", {})
    buf = pool.get(name)
    if buf is None or buf.size < n:
        buf = pool[name] = np.empty(max(n, 1), dtype=np.uint8)
    return buf[:n].view(dt).reshape(shape)


def _worker_init() -> None:
    _local.in_pool = True


def _get_pool() -> ThreadPoolExecutor:
    """The shared worker pool, started on first use. Its threads live as long as the process, so their
    scratch buffers stay mapped from one call to the next."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_threads, thread_name_prefix="ninfer-codecs",
                                       initializer=_worker_init)
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of the parent's pool threads: start a fresh pool there on first use."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def run_row_blocks(n_rows: int, block_rows: int, fn: Callable[[int, int], object]) -> list:
    """Call ``fn(r0, r1)`` over consecutive row blocks, on the worker pool when there are several;
    results come back in row order, and the first exception (in row order) propagates. A call made from
    a pool thread runs inline (no nested waiting on the pool)."""
    bounds = [(r, min(r + block_rows, n_rows)) for r in range(0, n_rows, block_rows)]
    if len(bounds) <= 1 or _threads == 1 or getattr(_local, "in_pool", False):
        return [fn(r0, r1) for r0, r1 in bounds]
    futures = [_get_pool().submit(fn, r0, r1) for r0, r1 in bounds]
    return [f.result() for f in futures]


class Tally:
    """Counts of one rule's violations in a block and where the first one is."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, str] = {}

    def add(self, rule: str, mask: np.ndarray, locate: Callable[[tuple[int, ...]], str]) -> None:
        n = int(np.count_nonzero(mask))
        if not n:
            return
        self.counts[rule] = self.counts.get(rule, 0) + n
        if rule not in self.first:
            first = np.unravel_index(int(np.argmax(mask)), mask.shape)  # argmax: first True, no index array
            self.first[rule] = locate(tuple(int(i) for i in first))

    def merge(self, other: Tally) -> None:
        for rule, n in other.counts.items():
            self.counts[rule] = self.counts.get(rule, 0) + n
            self.first.setdefault(rule, other.first[rule])


class Codec:
    """Base of every format codec. Subclasses set the class attributes and implement the kernels."""

    format: ClassVar[str]
    layout: ClassVar[str]
    section: ClassVar[str] = "storage-layouts"
    encoders: ClassVar[tuple[str, ...]] = ("absmax",)
    row_quantum: ClassVar[int] = 1
    # rule -> (severity, message); message is formatted with the count, the first location and the format.
    findings: ClassVar[dict[str, tuple[str, str]]] = {}
    # Traits: what converters ask about a format instead of comparing its name (traits.py, docs/format/codec-traits.md).
    divisors_per_member: ClassVar[bool] = False  # divisors > 1 allowed: one weight divisor per stacked member
    whole_object: ClassVar[bool] = False  # encoded whole (whole-matrix quantities), not row block by row block
    tolerance_class: ClassVar[str]  # the accuracy class of a requantization into this format
    ggml_passthrough: ClassVar[bool] = False  # GGML blocks stored as they are
    integer_word: ClassVar[str | None] = None  # numpy type of the words when they hold integers
    importance_weighted: ClassVar[bool] = False  # encode_block takes per-column weights (docs/imatrix.md)
    decodes_while_encoding: ClassVar[bool] = False  # encode_block fills ``decoded`` itself (see Codec.encode)

    def __init_subclass__(cls, fmt: str | None = None, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if fmt is None:
            return
        if fmt in FORMATS:
            raise TypeError(f"format {fmt!r} registered twice")
        cls.format = fmt
        FORMATS[fmt] = cls

    # --- geometry -------------------------------------------------------------------------------
    @classmethod
    def check_shape(cls, shape: tuple[int, ...], divisors: int) -> None:
        """Raise EncodingError unless ``shape``/``divisors`` is allowed for this format (container §6.2)."""
        raise NotImplementedError

    @classmethod
    def plane_specs(cls, shape: tuple[int, ...], divisors: int) -> tuple[list[PlaneSpec], dict]:
        """The plane list in order, and format-specific sizes for the kernels."""
        raise NotImplementedError

    @classmethod
    def bits_per_weight(cls) -> float:
        """Storage bits per element, group multipliers included (per-row and per-tensor extras not)."""
        raise NotImplementedError

    @classmethod
    def multiplier_group(cls) -> int | None:
        """Elements that share one multiplier along a row, for formats with fixed groups (else None)."""
        return None

    @classmethod
    def n_rows(cls, shape: tuple[int, ...]) -> int:
        return shape[0] if shape else 1

    @classmethod
    def geometry(cls, shape: tuple[int, ...], divisors: int) -> Geometry:
        cls.check_shape(shape, divisors)
        specs, extra = cls.plane_specs(shape, divisors)
        n = cls.n_rows(shape)
        return Geometry(shape, divisors, n, place_planes(specs, n), extra)

    @classmethod
    def block_rows(cls, geom: Geometry) -> int:
        """Rows per block: about :data:`BLOCK_ELEMENTS` elements, a multiple of ``row_quantum``."""
        per_row = max(1, element_count(geom.shape[1:]))
        rows = max(1, BLOCK_ELEMENTS // per_row)
        return max(cls.row_quantum, rows // cls.row_quantum * cls.row_quantum)

    @staticmethod
    def plane_views(geom: Geometry, buf: np.ndarray) -> dict[str, np.ndarray]:
        """Each plane of ``buf`` as a 2-D uint8 view ``(units, unit_bytes)``."""
        return {p.name: buf[p.offset : p.offset + p.size].reshape(-1, p.unit_bytes) for p in geom.planes}

    # --- kernels (row blocks) -----------------------------------------------------------------------
    @classmethod
    def decode_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int, out: np.ndarray) -> None:
        raise NotImplementedError

    @classmethod
    def encode_context(cls, geom: Geometry, x: np.ndarray) -> object:
        """Whole-tensor quantities an encoder needs before the row blocks (NVFP4 divisors)."""
        return None

    @classmethod
    def encode_block(cls, geom: Geometry, x: np.ndarray, views: dict[str, np.ndarray], r0: int, r1: int,
                     encoder: str, ctx: object) -> None:
        raise NotImplementedError

    @classmethod
    def check_block(cls, geom: Geometry, views: dict[str, np.ndarray], r0: int, r1: int) -> Tally:
        return Tally()

    # --- drivers ------------------------------------------------------------------------------------
    @classmethod
    def decode(cls, geom: Geometry, buf: np.ndarray, rows: tuple[int, int] | None = None) -> np.ndarray:
        """float32 values of the object (or of rows ``[r0, r1)``; decoded from whole ``row_quantum`` tiles)."""
        r0, r1 = (0, geom.n_rows) if rows is None else rows
        check_row_range(r0, r1, geom.n_rows)
        q = cls.row_quantum
        a0, a1 = r0 // q * q, min(geom.n_rows, align_up(r1, q))
        views = cls.plane_views(geom, buf)
        out = np.empty((a1 - a0, *geom.shape[1:]), dtype=np.float32)

        def work(b0: int, b1: int) -> None:
            cls.decode_block(geom, views, a0 + b0, a0 + b1, out[b0:b1])

        run_row_blocks(a1 - a0, cls.block_rows(geom), work)
        out = out[r0 - a0 : r1 - a0]
        return out.reshape(geom.shape) if rows is None else out

    @classmethod
    def encode(cls, geom: Geometry, x: np.ndarray, encoder: str, weights: np.ndarray | None = None,
               decoded: np.ndarray | None = None) -> np.ndarray:
        """The encoded object as the uint8 array it is built in (``codecs.encode`` makes ``bytes`` of it).
        ``weights``: float32 importance ``(1, K)`` or ``(rows, K)`` for a codec with ``importance_weighted``.
        ``decoded``: a float32 ``(rows, …)`` array that receives what :meth:`decode` of the result returns,
        made in the same row block while it is in the cache — from the codes and multipliers the encoder
        chose when the codec ``decodes_while_encoding``, else by ``decode_block`` of the block just written
        (a ``whole_object`` codec's later planes are complete only at the end: :meth:`decode` of the result)."""
        if encoder not in cls.encoders:
            raise fail(f"encoder {encoder!r} is not available for {cls.format} (available: "
                       f"{', '.join(cls.encoders)})", "encoder_unsupported", cls.section)
        buf = np.zeros(geom.nbytes, dtype=np.uint8)
        views = cls.plane_views(geom, buf)
        xr = x.reshape(geom.n_rows, -1) if x.ndim != 2 else x
        ctx = cls.encode_context(geom, xr)
        if weights is not None:
            if not cls.importance_weighted:
                raise fail(f"{cls.format} has no importance-weighted encoder", "encoder_unsupported", cls.section)
            if weights.ndim != 2 or weights.shape[1] != xr.shape[1] or weights.shape[0] not in (1, xr.shape[0]):
                raise fail(f"importance weights of shape {list(weights.shape)} do not fit {list(xr.shape)}",
                           "importance_shape", "docs/imatrix.md §Weighted search")

        def work(r0: int, r1: int) -> None:
            extra = {}
            if weights is not None:
                extra["weights"] = weights if weights.shape[0] == 1 else weights[r0:r1]
            if decoded is not None and cls.decodes_while_encoding:
                extra["decoded"] = decoded[r0:r1]
            cls.encode_block(geom, xr, views, r0, r1, encoder, ctx, **extra)
            if decoded is not None and not cls.decodes_while_encoding and not cls.whole_object:
                cls.decode_block(geom, views, r0, r1, decoded[r0:r1])

        run_row_blocks(geom.n_rows, cls.block_rows(geom), work)
        if decoded is not None and not cls.decodes_while_encoding and cls.whole_object:
            decoded[...] = cls.decode(geom, buf)  # whole-object planes (a divisor) are complete only now
        return buf

    @classmethod
    def check(cls, geom: Geometry, buf: np.ndarray, json_path: str) -> list[Finding]:
        views = cls.plane_views(geom, buf)
        tally = Tally()
        for t in run_row_blocks(geom.n_rows, cls.block_rows(geom), lambda r0, r1: cls.check_block(geom, views, r0, r1)):
            tally.merge(t)
        gap_bytes, first_gap = 0, None
        prev_end = 0
        for p in geom.planes:
            gap = buf[prev_end : p.offset]
            nz = int(np.count_nonzero(gap))
            if nz and first_gap is None:
                first_gap = f"byte {prev_end + int(np.flatnonzero(gap)[0])} (before plane {p.name!r})"
            gap_bytes += nz
            prev_end = p.offset + p.size
        found = []
        for rule, n in tally.counts.items():
            severity, message = cls.findings[rule]
            found.append(Finding(rule=rule, severity=severity, json_path=json_path, section=cls.section,
                                 message=f"{cls.format}: {n} {message}, first at {tally.first[rule]}"))
        if gap_bytes:
            found.append(Finding("nonzero_padding", "WARNING", json_path,
                                 f"{gap_bytes} non-zero byte(s) in the gaps between planes, first at {first_gap}",
                                 "storage-layouts Notation"))
        return found

