"""The named value and order transforms that mapping rules cite (``mappings/*.yaml``).

Each transform is one small function on a numpy array, registered by name with its kind and the names
of its integer arguments (the YAML gives them as expressions over the config):

- ``rows`` transforms reorder, select or reshape the *leading* axes (axis 0 is "the rows"; for a 1-D
  tensor, its elements). They never look at values, so the engine also runs them on an array of row
  numbers to learn which source rows land where; that is how a block-quantized tensor (Q8_0, Q4_K…) is
  reordered on its raw bytes and stays exact (layout spec §6). They never touch the last axis.
- ``columns`` transforms permute the last axis (the input columns of a matrix). On block-quantized
  bytes they are exact only when every block of ``B`` columns moves whole.
- ``values`` transforms change numbers (computed in float64, then rounded once to the target).

Facts about the conventions being undone: ``docs/gguf-conventions.md``; llama.cpp's
``conversion/qwen.py`` (``_LinearAttentionVReorderBase._reorder_v_heads``, ``Qwen3NextModel.modify_tensors``).
Hadamard rotation (storage-layouts §7) is a recipe choice, not a mapping rule: see
:func:`hadamard_rotate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from converters.errors import TransformError

KINDS = ("rows", "columns", "values")


@dataclass(frozen=True)
class Transform:
    """A registered transform: its function, kind and argument names (all integers)."""

    name: str
    kind: str
    params: tuple[str, ...]
    fn: Callable[..., np.ndarray]
    doc: str
    inverse: Callable[[np.ndarray], np.ndarray] | None = None  # a ``values`` transform's undo (float64)

    def __call__(self, x: np.ndarray, **args: int) -> np.ndarray:
        return self.fn(x, **args)


REGISTRY: dict[str, Transform] = {}


def transform(kind: str, *params: str, inverse: Callable[[np.ndarray], np.ndarray] | None = None) -> Callable:
    """Register ``fn`` under its own name as a ``kind`` transform taking integer ``params``; a ``values``
    transform states its ``inverse`` (what the source stored, from the logical values: gate 7's structure
    question, docs/acceptance.md §Golden: two questions)."""
    if kind not in KINDS:
        raise ValueError(f"unknown transform kind {kind!r}")
    if (kind == "values") != (inverse is not None):
        raise ValueError("a values transform, and only one, states its inverse")

    def register(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        if fn.__name__ in REGISTRY:
            raise ValueError(f"transform {fn.__name__!r} registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()[0]
        REGISTRY[fn.__name__] = Transform(fn.__name__, kind, params, fn, doc, inverse)
        return fn

    return register


def get(name: str) -> Transform:
    try:
        return REGISTRY[name]
    except KeyError:
        raise TransformError(f"unknown transform {name!r} (known: {', '.join(sorted(REGISTRY))})") from None


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise TransformError(message)


# --- rows -------------------------------------------------------------------------------------


@transform("rows", "start", "stop")
def row_slice(x: np.ndarray, *, start: int, stop: int) -> np.ndarray:
    """Rows ``[start, stop)`` (a fused projection's part: ``in_proj_qkv`` → q | k | v)."""
    _need(0 <= start < stop <= x.shape[0], f"row_slice [{start}, {stop}) outside {x.shape[0]} rows")
    return x[start:stop]


@transform("rows", "heads", "stride", "offset", "count")
def select_head_rows(x: np.ndarray, *, heads: int, stride: int, offset: int, count: int) -> np.ndarray:
    """Per head ``h``, rows ``[h*stride + offset, +count)``: de-interleaves ``[q | gate]`` per head."""
    _need(heads * stride == x.shape[0], f"select_head_rows: {heads} heads x {stride} rows != {x.shape[0]}")
    _need(0 <= offset and offset + count <= stride and count > 0,
          f"select_head_rows: rows [{offset}, {offset + count}) outside a head of {stride}")
    per_head = x.reshape(heads, stride, *x.shape[1:])[:, offset:offset + count]
    return per_head.reshape(heads * count, *x.shape[1:])


def tiled_to_grouped_heads(num_k_heads: int, num_v_heads: int) -> np.ndarray:
    """Head permutation ``p``: grouped head ``g`` is tiled head ``p[g]``.

    llama.cpp stores value heads tiled, ``t = j*Hk + k`` for key head ``k`` and replica ``j < r``
    (``r = Hv/Hk``); Hugging Face groups them by key head, ``g = k*r + j``. So ``p[g] = (g % r)*Hk + g // r``.
    """
    _need(num_k_heads > 0 and num_v_heads % num_k_heads == 0,
          f"{num_v_heads} value heads are not a multiple of {num_k_heads} key heads")
    r = num_v_heads // num_k_heads
    g = np.arange(num_v_heads)
    return (g % r) * num_k_heads + g // r


def _head_blocks(n: int, head_dim: int, perm: np.ndarray) -> np.ndarray:
    return (perm[:, None] * head_dim + np.arange(head_dim)[None, :]).reshape(n)


@transform("rows", "num_k_heads", "num_v_heads", "head_dim", "start")
def v_heads_tiled_to_grouped(x: np.ndarray, *, num_k_heads: int, num_v_heads: int, head_dim: int,
                             start: int) -> np.ndarray:
    """Rows ``[start, start + Hv*head_dim)`` from tiled to grouped value-head order (whole rows move)."""
    span = num_v_heads * head_dim
    _need(0 <= start and start + span == x.shape[0],
          f"v_heads_tiled_to_grouped: rows [{start}, {start + span}) must end the {x.shape[0]} rows")
    order = np.concatenate([np.arange(start), start + _head_blocks(span, head_dim,
                                                                   tiled_to_grouped_heads(num_k_heads, num_v_heads))])
    return x[order]


@transform("rows", "index")
def pick(x: np.ndarray, *, index: int) -> np.ndarray:
    """``x[index]``: one entry of a stacked leading axis (expert ``e`` of an ``[E, N, K]`` bank)."""
    _need(x.ndim >= 2 and 0 <= index < x.shape[0], f"pick: index {index} outside {x.shape[0]} entries of {x.shape}")
    return x[index]


@transform("rows", "source", "destination")
def move_axis(x: np.ndarray, *, source: int, destination: int) -> np.ndarray:
    """Move leading axis ``source`` to position ``destination`` (halves stacked as ``[2, N, C, p, p]`` →
    the Conv3d ``[N, C, 2, p, p]``); both must be leading axes, the last axis stays last."""
    _need(x.ndim >= 1 and 0 <= source < x.ndim and 0 <= destination < x.ndim,
          f"move_axis: axes {source} -> {destination} outside the leading axes of {x.shape}")
    return np.moveaxis(x, source, destination)


@transform("rows", "axis")
def squeeze(x: np.ndarray, *, axis: int) -> np.ndarray:
    """Drop a leading axis of length 1 (``conv1d`` ``[C, 1, k]`` → ``[C, k]``)."""
    _need(0 <= axis < x.ndim and x.shape[axis] == 1, f"squeeze: axis {axis} of {x.shape} is not 1")
    return np.squeeze(x, axis=axis)


# --- columns ----------------------------------------------------------------------------------


@transform("columns", "num_k_heads", "num_v_heads", "head_dim")
def v_head_columns_tiled_to_grouped(x: np.ndarray, *, num_k_heads: int, num_v_heads: int,
                                    head_dim: int) -> np.ndarray:
    """Input columns from tiled to grouped value-head order (``ssm_out`` → ``out_proj``)."""
    span = num_v_heads * head_dim
    _need(x.shape[-1] == span, f"v_head_columns_tiled_to_grouped: {x.shape[-1]} columns, expected {span}")
    return x[..., _head_blocks(span, head_dim, tiled_to_grouped_heads(num_k_heads, num_v_heads))]


# --- values -----------------------------------------------------------------------------------


def _shift_norm(w: np.ndarray) -> np.ndarray:
    return np.asarray(w, dtype=np.float64) + 1.0


def _ssm_a_from_a_log(a_log: np.ndarray) -> np.ndarray:
    return -np.exp(np.asarray(a_log, dtype=np.float64))


@transform("values", inverse=_shift_norm)
def unshift_norm(x: np.ndarray) -> np.ndarray:
    """``w = g - 1``: undo llama.cpp's ``+1`` on zero-centred Qwen3.5 RMSNorm weights (float64)."""
    return np.asarray(x, dtype=np.float64) - 1.0


@transform("values", inverse=_ssm_a_from_a_log)
def a_log_from_ssm_a(x: np.ndarray) -> np.ndarray:
    """``A_log = log(-ssm_a)`` in float64 (llama.cpp wrote ``ssm_a = -exp(A_log)``); needs ``ssm_a < 0``."""
    x = np.asarray(x, dtype=np.float64)
    bad = ~(x < 0)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        raise TransformError(f"a_log_from_ssm_a: ssm_a[{i}] = {float(x.reshape(-1)[i])!r} is not negative")
    return np.log(-x)


# --- Hadamard (storage-layouts §7) --------------------------------------------------------------

HADAMARD_BLOCK = 1024


def hadamard_matrix(n: int = HADAMARD_BLOCK) -> np.ndarray:
    """Normalized Sylvester Walsh–Hadamard matrix of order ``n`` (a power of two): ``H = H^T = H^-1``."""
    _need(n > 0 and n & (n - 1) == 0, f"Hadamard order {n} is not a power of two")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def hadamard_signs(width: int, seed: int) -> np.ndarray:
    """Deterministic ±1 signs (float32) for input width ``width``, from ``seed`` and the width."""
    rng = np.random.default_rng([seed, width])
    return np.where(rng.random(width) < 0.5, -1.0, 1.0).astype(np.float32)


def hadamard_rotate(w: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``W' = W · D · H`` per 1024-column block (``D = diag(signs)``), so ``W' · H(s ⊙ x) = W x``."""
    return _rotate(w, signs, inverse=False)


def hadamard_unrotate(w: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Inverse of :func:`hadamard_rotate`: ``W = W' · H · D`` per block."""
    return _rotate(w, signs, inverse=True)


def fwht(x: np.ndarray) -> np.ndarray:
    """``x · H`` for the normalized Sylvester matrix of the last axis' order (a power of two), float64, by
    the butterfly (pairs ``j``, ``j + h`` of every ``2h``-block become ``a + b``, ``a - b``): ``n log n``
    instead of the dense ``n²`` product — a 27B model rotates 10⁹ rows' blocks, and the gates un-rotate them
    again. Compiled (:mod:`converters.mapping.fwht_kernel`): each row's stages run in place while the row is in
    cache; each output element is the same sums in the same order as the textbook recursion, so results do not
    depend on the implementation."""
    from converters.mapping.fwht_kernel import butterfly

    n = x.shape[-1]
    _need(n > 0 and n & (n - 1) == 0, f"Hadamard order {n} is not a power of two")
    y = np.array(x, dtype=np.float64).reshape(-1, n)
    butterfly(y)
    y /= np.sqrt(n)
    return y.reshape(x.shape)


def _rotate(w: np.ndarray, signs: np.ndarray, *, inverse: bool) -> np.ndarray:
    k = w.shape[-1]
    _need(k % HADAMARD_BLOCK == 0, f"Hadamard rotation needs K % {HADAMARD_BLOCK} == 0, K = {k}")
    _need(signs.shape == (k,), f"Hadamard signs have shape {signs.shape}, expected ({k},)")
    blocks = np.asarray(w, dtype=np.float64).reshape(*w.shape[:-1], k // HADAMARD_BLOCK, HADAMARD_BLOCK)
    s = np.asarray(signs, dtype=np.float64).reshape(k // HADAMARD_BLOCK, HADAMARD_BLOCK)
    out = fwht(blocks) * s if inverse else fwht(blocks * s)
    return out.reshape(w.shape)
