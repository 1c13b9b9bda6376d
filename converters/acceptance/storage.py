"""Gate 7's structure question, the source's side: the artifact's decoded values read back the way the source
would hold them, then as the source's own conventions say they mean (docs/acceptance.md §Golden: two
questions).

For one logical parameter with artifact values ``A``::

    reading(A) = to_logical(storage, chain.source_order(A))

- ``chain.source_order`` undoes the mapping's transforms: the mapping file's claim of how the source stores
  the parameter (:meth:`converters.mapping.chain.Chain.source_order`);
- :func:`to_logical` applies the source format's conventions as stated apart from the mappings — for a GGUF,
  its architecture's ``GGUF_STORAGE`` (:class:`~converters.model.architectures._family.GgufStorage`); a
  Hugging Face checkpoint is the logical form itself.

When the mapping's transforms are the source's conventions, ``reading(A)`` is ``A`` again and the source's
forward on it is the artifact's forward; a mapping that misses, adds or misorders a transform (a norm shift,
value heads left tiled, ``ssm_a`` taken for ``A_log``) makes them differ at any precision of ``A``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from converters.acceptance.gates.decode import RowView
from converters.model.architectures._family import AS_HF, GgufStorage

#: the zero-centred RMSNorm weights (a GGUF stores ``1 + w``), by the leaf of their logical name
SHIFTED_NORMS = ("input_norm", "post_attention_norm", "attention/query_norm", "attention/key_norm")
#: gated delta net parameters with one block of rows per value head: leaf → rows per head (``dv``: value dim)
VALUE_HEAD_ROWS = {"gdn/value": "dv", "gdn/z": "dv", "gdn/b": 1, "gdn/a": 1, "gdn/dt_bias": 1, "gdn/a_log": 1}


def source_storage(model) -> GgufStorage:
    """How the source of ``model`` stores the parameters: its architecture's ``GGUF_STORAGE`` for a GGUF, else as
    Hugging Face does."""
    if getattr(model.source, "kind", None) != "gguf":
        return AS_HF
    return getattr(model.architecture, "GGUF_STORAGE", AS_HF)


def tiled_to_grouped(n_value_heads: int, n_key_heads: int) -> np.ndarray:
    """``order[g]``: the tiled position of grouped value head ``g``. Tiled ``t = j·Hk + k`` and grouped
    ``g = k·r + j`` name replica ``j`` of key head ``k``: laid out as a ``[r, Hk]`` grid of tiled positions,
    the grouped order reads it column by column."""
    return np.arange(n_value_heads).reshape(n_value_heads // n_key_heads, n_key_heads).T.reshape(-1)


def _blocks(order: np.ndarray, size: int) -> np.ndarray:
    return (order[:, None] * size + np.arange(size)[None, :]).reshape(-1)


def to_logical(storage: GgufStorage, spec, name: str, x: np.ndarray) -> np.ndarray:
    """Values ``x`` of parameter ``name`` as the source stores them → the logical (Hugging Face) values, by the
    source's conventions alone (float64 where values change)."""
    leaf = name.split("/", 3)[-1] if name.startswith("text/layers/") else name.removeprefix("text/")
    if storage.shifted_norms and spec.zero_centred_norms and (leaf in SHIFTED_NORMS or name == "text/final_norm"):
        x = np.asarray(x, dtype=np.float64) - 1.0
    if storage.decay_as_ssm_a and leaf == "gdn/a_log":
        with np.errstate(invalid="ignore", divide="ignore"):  # a positive "ssm_a" reads as NaN: it is no ssm_a
            x = np.log(-np.asarray(x, dtype=np.float64))
    hk, hv = spec.linear_num_key_heads, spec.linear_num_value_heads
    if not (storage.tiled_value_heads and hk and hv != hk):
        return x
    order = tiled_to_grouped(hv, hk)
    dv = spec.linear_value_head_dim
    if leaf in VALUE_HEAD_ROWS:
        size = dv if VALUE_HEAD_ROWS[leaf] == "dv" else 1
        return x[_blocks(order, size)]
    if leaf == "gdn/conv1d":
        start = 2 * hk * spec.linear_key_head_dim
        return np.concatenate([x[:start], x[start:][_blocks(order, dv)]])
    if leaf == "gdn/output" and storage.tiled_output_columns:
        return x[:, _blocks(order, dv)]
    return x


class SourceReading:
    """``reading(name, A, whole)`` for the parameters of ``model``'s text (see the module docstring): ``whole``
    is false for a block of rows of the embedding or the head, whose chains never reorder rows."""

    def __init__(self, model, spec) -> None:
        self.bound, self.spec, self.storage = model.bound, spec, source_storage(model)
        self.names = {p.name for p in model.bound.parameters}

    def chain(self, name: str):
        p = self.bound.parameter(name if name in self.names else "text/token_embedding")
        while p.source is None:  # tied: read through the target's chain
            p = self.bound.parameter(p.tied_to)
        return p.source.chain

    def __call__(self, name: str, values: np.ndarray, whole: bool = True) -> np.ndarray:
        shape = values.shape
        chain = self.chain(name)
        stored = chain.source_order(values.reshape(-1, chain.n_columns), whole=whole)
        return np.asarray(to_logical(self.storage, self.spec, name, stored), dtype=np.float32).reshape(shape)


class _ReadRows:
    """A :class:`RowView` whose rows come back through ``reading``."""

    def __init__(self, view: RowView, name: str, reading: SourceReading) -> None:
        self.view, self.name, self.reading, self.shape = view, name, reading, view.shape

    def __getitem__(self, key) -> np.ndarray:
        return self.reading(self.name, self.view[key], whole=False)


class ReadBack(Mapping):
    """The artifact's parameters as the source reads them back (``as_source``), or — ``watch`` — the artifact's own
    values, each compared with its reading on the way: ``differences[name]`` is the largest ``|reading - A|``
    over ``max |A|`` (0.0: equal)."""

    def __init__(self, params: Mapping, reading: SourceReading, *, as_source: bool) -> None:
        self.params, self.reading, self.as_source = params, reading, as_source
        self.differences: dict[str, float] = {}

    def __getitem__(self, name: str):
        value = self.params[name]
        if isinstance(value, RowView):
            return _ReadRows(value, name, self.reading) if self.as_source else _Watched(value, name, self)
        read = self.reading(name, value)
        if self.as_source:
            return read
        self.note(name, value, read)
        return value

    def note(self, name: str, value: np.ndarray, read: np.ndarray) -> None:
        if np.array_equal(value, read):
            diff = 0.0
        else:
            scale = float(np.max(np.abs(value))) or 1.0
            with np.errstate(invalid="ignore"):
                diff = float(np.nan_to_num(np.max(np.abs(read.astype(np.float64) - value)), nan=np.inf)) / scale
        self.differences[name] = max(diff, self.differences.get(name, 0.0))

    def __contains__(self, name) -> bool:
        return name in self.params

    def __iter__(self):
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)


class _Watched:
    """A :class:`RowView` of the artifact whose rows are also compared with their reading (:class:`ReadBack`)."""

    def __init__(self, view: RowView, name: str, owner: ReadBack) -> None:
        self.view, self.name, self.owner, self.shape = view, name, owner, view.shape

    def __getitem__(self, key) -> np.ndarray:
        rows = self.view[key]
        self.owner.note(self.name, rows, self.owner.reading(self.name, rows, whole=False))
        return rows
