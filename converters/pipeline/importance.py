"""Importance weights for the requantized pieces of a plan, from an imatrix (docs/imatrix.md §Name mapping).

:func:`plan_importance` looks up, for every ``encode`` piece of every planned tensor, its source tensor's
entry in the importance file (by GGUF name; an HF tensor's name is first turned into its GGUF name with
gguf-py's tensor name map for the model's GGUF architecture), orders its columns as the piece's (the
chain's column map for a GGUF source; for another source the column map of the mapping's GGUF rule for
that tensor, since the file follows llama.cpp's GGUF order) and
keeps the float32 vector, normalised to mean 1. What cannot be weighted — no entry, a length that is not
the tensor's column count, a rotated piece, a format without a weighted search — is encoded unweighted and
recorded with the reason. The producer asks :meth:`Importance.weights` per piece; provenance takes
:meth:`Importance.to_json` and :meth:`Importance.object_record`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from converters.errors import MappingError, TransformError
from converters.mapping.binder import BoundModel, rule_columns
from converters.mapping.chain import RowRun
from converters.pipeline.planned import Piece, PlannedTensor
from converters.sources.imatrix import Imatrix
from ninfer_core import codecs

#: added to the normalised weights: a column no calibration token touched still counts a little
WEIGHT_FLOOR = np.float32(1e-3)


@dataclass
class Importance:
    """The weights of one conversion: per (object id, piece row start) a float32 ``(K,)`` vector."""

    imatrix: Imatrix
    vectors: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    objects: dict[str, dict] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def weights(self, obj: PlannedTensor, pc: Piece) -> np.ndarray | None:
        return self.vectors.get((obj.id, pc.row_start))

    def object_record(self, object_id: str) -> dict | None:
        return self.objects.get(object_id)

    def to_json(self) -> dict:
        used = sum(1 for r in self.objects.values() if r["used"])
        return {**self.imatrix.to_json(), "objects_weighted": used, "objects_unweighted": len(self.objects) - used,
                "missing": dict(sorted(self.missing.items()))}


def plan_importance(imatrix: Imatrix, objects: list, sources: dict, architecture: str, *,
                    bound: BoundModel | None = None) -> Importance:
    """Weights for every requantized piece of ``objects`` that the file covers (module docstring).
    ``bound``: the binding, whose GGUF rules give the column order of an entry read for a piece bound from
    another source kind (without it, such pieces are not weighted)."""
    imp = Importance(imatrix)
    names = _NameMap(architecture)
    columns = _GgufColumns(bound)
    for o in objects:
        if not isinstance(o, PlannedTensor):
            continue
        enc = [pc for pc in o.pieces if pc.method == "encode"]
        if not enc:
            continue
        weighted, reasons = 0, {}
        if not getattr(codecs.FORMATS.get(o.format), "importance_weighted", False):
            imp.objects[o.id] = {"used": False, "reason": f"{o.format} has no importance-weighted search"}
            continue
        for pc in enc:
            vec, why = _vector(imatrix, pc, sources, names, columns)
            if vec is None:
                reasons[pc.parameter] = why
                if why.startswith("no entry"):
                    imp.missing[pc.source.tensor] = why
                continue
            if vec.shape[0] != o.shape[-1]:
                reasons[pc.parameter] = f"{vec.shape[0]} weights for an object of {o.shape[-1]} columns"
                continue
            imp.vectors[(o.id, pc.row_start)] = vec
            weighted += 1
        rec: dict = {"used": weighted > 0, "pieces_weighted": weighted, "pieces": len(enc)}
        if reasons:
            rec["unweighted"] = reasons
        imp.objects[o.id] = rec
    return imp


def _vector(imatrix: Imatrix, pc: Piece, sources: dict, names: _NameMap,
            gguf_columns: _GgufColumns) -> tuple[np.ndarray | None, str]:
    src = pc.source
    if pc.hadamard_width is not None or pc.source_hadamard is not None:
        return None, "rotated values (Hadamard): a per-column importance does not apply"
    if src.stack or src.transposed:
        return None, "stacked or transposed source tensors are not weighted"
    kind = getattr(sources.get(src.input), "kind", "gguf")
    name = names.gguf_name(src.tensor, kind)
    entry = imatrix.entries.get(name) if name is not None else None
    if entry is None:
        return None, f"no entry for {name or src.tensor} in {imatrix.path.name}"
    chain = src.chain
    if kind == "gguf":  # the entry's columns are the source tensor's
        if entry.shape[1] != chain.source_columns:
            return None, f"the entry has {entry.shape[1]} columns, the tensor {chain.source_columns}"
        cols = chain.columns
    else:  # the entry's columns are in llama.cpp's order: the mapping's GGUF rule for the tensor orders them
        cols, why = gguf_columns(pc.parameter, name, entry.shape[1])
        if why:
            return None, why
    if entry.shape[0] == 1:
        row = entry[0]
    else:
        e = _expert(chain, pc.rows, entry.shape[0])
        if e is None:
            return None, f"the entry holds {entry.shape[0]} matrices and the piece's rows are not one of them"
        row = entry[e]
    if cols is not None:
        row = row[cols]
    mean = float(row.mean(dtype=np.float64))
    if mean <= 0:
        w = np.ones_like(row)
    elif mean >= np.finfo(np.float32).tiny:
        w = row / np.float32(mean)
    else:  # a mean below float32's normal range (0 in float32: a division by zero, an overflow): in float64,
        w = (row.astype(np.float64) / mean).astype(np.float32)  # where row / mean <= the column count

    return np.ascontiguousarray(w + WEIGHT_FLOOR, dtype=np.float32), ""


def _expert(chain, rows: int, nmat: int) -> int | None:
    """The stacked matrix (expert) all of a piece's source rows lie in, or None."""
    total = chain.source_rows
    if total % nmat:
        return None
    per = total // nmat
    ids = chain.rows if chain.rows is not None else RowRun(0, rows)
    ids = ids[0:rows]
    lo, hi = (ids.start, ids.start + ids.length - 1) if isinstance(ids, RowRun) else (int(np.min(ids)), int(np.max(ids)))
    return lo // per if lo // per == hi // per else None


class _GgufColumns:
    """Parameter name, GGUF tensor name → the column map of the mapping's GGUF rule for it (binder.rule_columns)."""

    def __init__(self, bound: BoundModel | None) -> None:
        self.bound = bound
        self.params = {p.name: p for p in bound.parameters} if bound is not None else {}

    def __call__(self, parameter: str, tensor: str, columns: int) -> tuple[np.ndarray | None, str]:
        p = self.params.get(parameter)
        if p is None:
            return None, f"the column order of {tensor} for {parameter} is unknown (no binding given)"
        try:
            return rule_columns(p, "gguf", tensor, columns, self.bound.env), ""
        except LookupError:
            return None, f"no gguf rule of the mapping for {parameter} reads {tensor}: its column order is unknown"
        except (MappingError, TransformError) as exc:
            return None, f"the gguf rule of {parameter} does not apply to {tensor} of {columns} columns: {exc.message}"


class _NameMap:
    """Source tensor name → the GGUF name llama.cpp (and so the imatrix) uses."""

    def __init__(self, architecture: str) -> None:
        self.architecture = architecture
        self._map = None

    def gguf_name(self, tensor: str, source_kind: str) -> str | None:
        if source_kind == "gguf":
            return tensor
        if self._map is None:
            self._map = _tensor_name_map(self.architecture) or False
        if not self._map:
            return None
        return self._map.get_name(tensor, try_suffixes=(".weight", ".bias"))


def _tensor_name_map(architecture: str):
    import gguf

    from converters.errors import ConversionError
    from converters.model import architectures

    try:
        gguf_archs = getattr(architectures.module(architecture), "GGUF_ARCHITECTURES", ())
    except ConversionError:  # not an architecture module's name: no GGUF names to map to
        return None
    by_name = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}
    for a in gguf_archs:
        if a in by_name:
            return gguf.get_tensor_name_map(by_name[a], 1024)
    return None
