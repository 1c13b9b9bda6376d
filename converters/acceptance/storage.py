"""Gate 7's structure question, the source's side: the artifact's decoded values read back the way the source
would hold them, then as the source's own conventions say they mean (docs/acceptance.md §Golden: two
questions).

For one logical parameter with artifact values ``A``::

    reading(A) = to_logical(storage, chain.source_order(A))

- ``chain.source_order`` undoes the mapping's transforms: the mapping file's claim of how the source stores
  the parameter (:meth:`converters.mapping.chain.Chain.source_order`);
- :func:`to_logical` applies the source format's conventions as stated apart from the mappings — its
  architecture's ``GGUF_STORAGE`` or ``HF_STORAGE`` (:class:`~converters.model.architectures._family.Storage`;
  without one, the logical form itself).

When the mapping's transforms are the source's conventions, ``reading(A)`` is ``A`` again and the source's
forward on it is the artifact's forward; a mapping that misses, adds or misorders a transform (a norm shift,
value heads left tiled, ``ssm_a`` taken for ``A_log``) makes them differ at any precision of ``A``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from converters.acceptance.gates.decode import RowView
from converters.model.architectures._family import LOGICAL, Storage

#: the zero-centred RMSNorm weights (a GGUF stores ``1 + w``), by the leaf of their logical name
SHIFTED_NORMS = ("input_norm", "post_attention_norm", "attention/query_norm", "attention/key_norm")
#: gated delta net parameters with one block of rows per value head: leaf → rows per head (``dv``: value dim)
VALUE_HEAD_ROWS = {"gdn/value": "dv", "gdn/z": "dv", "gdn/b": 1, "gdn/a": 1, "gdn/dt_bias": 1, "gdn/a_log": 1}


#: fused expert banks, by the end of their source tensor's name (``Storage.transposed_expert_banks``)
EXPERT_BANKS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")


def source_storage(model) -> Storage:
    """How the source of ``model`` stores the parameters: its architecture's ``GGUF_STORAGE`` for a GGUF,
    ``HF_STORAGE`` for a Hugging Face checkpoint; the logical form where it declares none."""
    kind = "GGUF" if getattr(model.source, "kind", None) == "gguf" else "HF"
    return getattr(model.architecture, f"{kind}_STORAGE", LOGICAL)


def storage_name(model) -> str:
    """``hf`` / ``gguf`` (the logical form), or ``<kind>:<architecture>`` whose stated conventions apply."""
    kind = getattr(model.source, "kind", "hf")
    return kind if source_storage(model) == LOGICAL else f"{kind}:{model.architecture.NAME}"


def tiled_to_grouped(n_value_heads: int, n_key_heads: int) -> np.ndarray:
    """``order[g]``: the tiled position of grouped value head ``g``. Tiled ``t = j·Hk + k`` and grouped
    ``g = k·r + j`` name replica ``j`` of key head ``k``: laid out as a ``[r, Hk]`` grid of tiled positions,
    the grouped order reads it column by column."""
    return np.arange(n_value_heads).reshape(n_value_heads // n_key_heads, n_key_heads).T.reshape(-1)


def _blocks(order: np.ndarray, size: int) -> np.ndarray:
    return (order[:, None] * size + np.arange(size)[None, :]).reshape(-1)


def fused_rows(storage: Storage, spec, name: str) -> np.ndarray | None:
    """The rows of its fused source tensor that parameter ``name`` is, ascending, by the source's conventions
    alone; None where they state no fused tensor for it (the rows the mapping reads are then not checked)."""
    leaf = name.split("/", 3)[-1]
    if storage.gated_query_fused and leaf in ("attention/query", "attention/gate"):
        d, offset = spec.head_dim, 0 if leaf == "attention/query" else spec.head_dim
        return (np.arange(spec.num_heads)[:, None] * 2 * d + offset + np.arange(d)[None, :]).reshape(-1)
    if storage.gdn_qkv_fused and leaf in ("gdn/query", "gdn/key", "gdn/value"):
        kd = spec.linear_num_key_heads * spec.linear_key_head_dim
        start = {"gdn/query": 0, "gdn/key": kd, "gdn/value": 2 * kd}[leaf]
        width = kd if leaf != "gdn/value" else spec.linear_num_value_heads * spec.linear_value_head_dim
        return np.arange(start, start + width)
    return None


def to_logical(storage: Storage, spec, name: str, x: np.ndarray, tensor: str = "") -> np.ndarray:
    """Values ``x`` of parameter ``name`` as the source stores them in its tensor ``tensor`` → the logical values,
    by the source's conventions alone (float64 where values change)."""
    if storage.transposed_expert_banks and tensor.endswith(EXPERT_BANKS):
        x = np.asarray(x).T
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
    is false for a block of rows of the embedding or the head, whose chains never reorder rows. A parameter the
    source's conventions place in a fused tensor (:func:`fused_rows`) other than where the mapping reads it is
    read from that tensor as rebuilt from every parameter the mapping reads there (``fetch(name)``: the
    artifact's values)."""

    def __init__(self, model, spec, fetch) -> None:
        self.bound, self.spec, self.storage, self.fetch = model.bound, spec, source_storage(model), fetch
        self.names = {p.name for p in model.bound.parameters}

    def __call__(self, name: str, values: np.ndarray, whole: bool = True) -> np.ndarray:
        shape = values.shape
        source = self.bound.source_of(name if name in self.names else "text/token_embedding")
        rows = fused_rows(self.storage, self.spec, name) if whole else None
        if rows is not None and not np.array_equal(np.sort(source.chain.row_sources()), rows):
            stored = self.rebuilt(source)[rows]  # in the source's order: the conventions below reorder it
        else:
            stored = source.chain.source_order(values.reshape(-1, source.chain.n_columns), whole=whole)
        if source.transposed:  # read transposed: the tensor holds the transpose (one expert's matrix)
            stored = stored.T
        logical = to_logical(self.storage, self.spec, name, stored, source.tensor)
        return np.asarray(logical, dtype=np.float32).reshape(shape)

    def rebuilt(self, source) -> np.ndarray:
        """``source``'s tensor as the artifact's values of every parameter the mapping reads from it give it back
        (rows no parameter reads: NaN)."""
        out = np.full((source.chain.source_rows, source.chain.source_columns), np.nan, dtype=np.float32)
        for p in self.bound.parameters:
            if p.source is not None and (p.source.input, p.source.tensor) == (source.input, source.tensor):
                chain = p.source.chain
                out[chain.row_sources()] = chain.unapply(np.asarray(self.fetch(p.name)).reshape(-1, chain.n_columns))
        return out


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
        if _same_memory(value, read) or np.array_equal(value, read):  # untouched: a view of the same values
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


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


class _Watched:
    """A :class:`RowView` of the artifact whose rows are also compared with their reading (:class:`ReadBack`)."""

    def __init__(self, view: RowView, name: str, owner: ReadBack) -> None:
        self.view, self.name, self.owner, self.shape = view, name, owner, view.shape

    def __getitem__(self, key) -> np.ndarray:
        rows = self.view[key]
        self.owner.note(self.name, rows, self.owner.reading(self.name, rows, whole=False))
        return rows
