"""What a plan is made of (docs/format/container.md §7, §8, §9.1): :class:`Piece` (one member's rows of a
parent and how its bytes are made), :class:`PlannedTensor`, :class:`PlannedLiteral` (auxiliary tensors the
uses bind), :class:`PlannedResource` (frontend files) and the :class:`Plan` that lists them in payload
order. :mod:`converters.pipeline.plan` makes them; produce, template, proposal and scale-out read them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from converters.mapping.binder import BoundModel, BoundSource
from converters.mapping.recipes import Recipe
from converters.sources.hadamard import FORWARD, INVERSE

EXACTNESS = ("bit-exact", "value-exact", "requantized")


@dataclass(frozen=True)
class Piece:
    """One logical parameter's rows inside a parent object."""

    parameter: str
    row_start: int
    rows: int
    source: BoundSource
    source_type: str
    method: str  # "transcode" | "encode"
    exactness: str  # planned: bit-exact / value-exact by construction, "requantized" until measured
    hadamard_width: int | None = None
    deferred_columns: np.ndarray | None = None  # input_columns of a passthrough that keeps column order
    source_hadamard: str | None = None  # the source stores it rotated (hadamard.py): "forward" / "inverse"
    column_groups: int | None = None  # columns move as whole target groups of this size, after transcoding
    quantization: dict | None = None  # a prequantized source (prequantized.py): scheme, value relation, max_ulp

    def describe(self) -> dict:
        out = {"parameter": self.parameter, "rows": [self.row_start, self.row_start + self.rows],
               "source": self.source.tensor, "source_type": self.source_type,
               "transforms": list(self.source.chain.steps), "method": self.method}
        if self.hadamard_width is not None:
            out["hadamard_rotate"] = self.hadamard_width
        if self.deferred_columns is not None:
            out["columns"] = "kept in source order; the use binds input_columns"
        if self.column_groups is not None:
            out["columns"] = f"moved as whole {self.column_groups}-column groups after the exact transcode"
        if self.source_hadamard == FORWARD:
            out["hadamard"] = "stored rotated by the source (W·D·H); kept, the use binds the source's signs"
        elif self.source_hadamard == INVERSE:
            out["hadamard"] = "stored rotated by the source; un-rotated here (s ⊙ H(w'), float64)"
        return out


@dataclass
class PlannedTensor:
    id: str
    shape: tuple[int, ...]
    format: str
    layout: str
    divisors: int
    bytes: int
    pieces: tuple[Piece, ...]
    encoder: str
    roles: tuple[str, ...]
    component: str
    layer: int | None
    notes: tuple[str, ...] = ()
    bank_rows: int = 0  # an expert bank (expert_bank.py): rows per expert; 0 otherwise
    rule: str = ""  # what chose the format: a recipe role or group, or a command-line override (the plan shows it)
    probed: str | None = None  # the label a probe of its values gave (converters.pipeline.exactness.predict)
    kind = "tensor"

    @property
    def exactness(self) -> str:
        """The object's one label (converters/pipeline/exactness.py): the probe's, else its least exact piece's."""
        return self.probed or max((p.exactness for p in self.pieces), key=EXACTNESS.index)

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(p.source.tensor for p in self.pieces))


def needs_measure(o) -> bool:
    """Whether a conversion measures the error of planned object ``o``: a tensor with a piece that is
    re-encoded (requantized) rather than copied. The in-process conversion and the staged one's JSON
    reservation ask this same predicate."""
    return isinstance(o, PlannedTensor) and any(p.method == "encode" for p in o.pieces)


@dataclass
class PlannedLiteral:
    """A small tensor whose values the plan itself computes (signs, permutations, divisors)."""

    id: str
    shape: tuple[int, ...]
    format: str
    layout: str
    values: np.ndarray
    bytes: int
    component: str
    note: str
    divisors: int = 1
    kind = "tensor"
    exactness = "bit-exact"
    layer = None


@dataclass
class PlannedResource:
    id: str
    data: bytes
    role: str
    component: str
    provenance: dict
    kind = "resource"
    exactness = "bit-exact"
    layer = None

    @property
    def bytes(self) -> int:
        return len(self.data)


@dataclass
class Plan:
    objects: list
    bindings: dict[str, dict]
    uses: list[dict]
    components: dict[str, dict]
    recipe: Recipe
    bound: BoundModel
    only_layer: int | None = None
    notes: list[str] = field(default_factory=list)
    importance: object = None  # converters.pipeline.importance.Importance with --imatrix (docs/imatrix.md)

    def object(self, object_id: str):
        for o in self.objects:
            if o.id == object_id:
                return o
        raise KeyError(object_id)

    @property
    def payload_bytes(self) -> int:
        return sum(o.bytes for o in self.objects)
