"""One quantized module of a prequantized checkpoint, read as the virtual tensor ``<module>.weight``.

:class:`QuantizedWeight` is the contract the pipeline codes against (docs/prequantized.md §Source-layer
contract): ``kind``, logical ``shape`` ``(N, K)``, ``group``, ``symmetric``, ``weight_divisor``,
``activation_divisor``, ``parts`` (role → component :class:`~converters.sources.SourceTensor`) and

- ``dequantize(r0, r1)``: float32 ``[r1 - r0, K]``, the source library's own rule (operation order and
  intermediate dtype) for rows ``[r0, r1)``, reading only those rows' components;
- ``exact_targets()``: v3 formats the values convert to without requantizing, with their label;
- ``transcode(fmt, r0, r1)``: the encoded bytes of rows ``[r0, r1)`` as one object of ``fmt`` (``divisors=1``);
  ``gather(fmt, runs)``: the same for several row runs in order (a mapping's row split or permutation);
- ``code_span(fmt, r0, r1)``: where the source holds those rows' code plane unchanged (NVFP4 into nvfp4), if it does;
- ``max_ulp(fmt)``: the bound of docs/prequantized.md §Ulp distance between ``fmt``'s decode rule and the
  library rule, over every (code, scale) pair the tensor's scales admit.

The storage families (NVFP4, FP8, packed integers) live in :mod:`.families`; the conventions' tensor
names and library rules in :mod:`.compressed_tensors`, :mod:`.modelopt`, :mod:`.fp8_block`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ninfer_core.codecs.base import fail

from . import targets

KINDS = ("CT_NVFP4", "MO_NVFP4", "CT_FP8_TENSOR", "CT_FP8_CHANNEL", "CT_FP8_BLOCK", "MO_FP8", "FP8_BLOCK",
         "CT_INT4", "CT_INT8")
CONVENTIONS = {"CT": "compressed-tensors", "MO": "modelopt", "FP8": "fp8"}
SECTION = "docs/prequantized.md §Exactness table"


@dataclass(eq=False)
class QuantizedWeight:
    """Base of every quantized module; subclasses implement the family's reads and the convention's rule."""

    family = ""  # "nvfp4" | "fp8" | "int": the storage family (:mod:`.families`)

    name: str
    kind: str
    shape: tuple[int, int]
    parts: dict[str, Any]
    library_dtype: str
    group: int | None = None
    symmetric: bool = True
    weight_divisor: float | None = None
    activation_divisor: float | None = None
    scheme: dict = field(default_factory=dict)
    _targets: dict | None = field(default=None, repr=False)
    _distinct: Any = field(default=None, repr=False)  # the distinct scale values (targets.distinct_scales)
    _span: Any = field(default=None, repr=False)  # NVFP4: the block-scale bytes' (min, max) (targets.scale_byte_range)
    _ulp: dict = field(default_factory=dict, repr=False)

    # --- described --------------------------------------------------------------------------------
    @property
    def convention(self) -> str:
        return CONVENTIONS[self.kind.split("_", 1)[0]]

    @property
    def file(self):
        return next(iter(self.parts.values())).file

    @property
    def value_relation(self) -> str:
        """One line: how the library computes a value (docs/prequantized.md §Value relations)."""
        raise NotImplementedError

    def describe(self) -> dict:
        """The source quantization of this weight, for provenance and ``convert inspect``."""
        return {"kind": self.kind, "convention": self.convention, "group": self.group,
                "symmetric": self.symmetric, "library_dtype": self.library_dtype,
                "weight_divisor": self.weight_divisor, "activation_divisor": self.activation_divisor,
                "parts": {role: t.name for role, t in self.parts.items()}, "value_relation": self.value_relation}

    # --- values -----------------------------------------------------------------------------------
    def dequantize(self, r0: int, r1: int) -> np.ndarray:
        """float32 ``[r1 - r0, K]``: the library's output (in ``library_dtype``) widened to float32."""
        r0, r1 = self._rows(r0, r1)
        if r0 == r1:  # an empty row range (a row reader's slice past the end): nothing to read
            return np.zeros((0, self.shape[1]), dtype=np.float32)
        return np.asarray(self._dequantize(r0, r1), dtype=np.float32).reshape(r1 - r0, self.shape[1])

    def _dequantize(self, r0: int, r1: int) -> np.ndarray:
        raise NotImplementedError

    def _rows(self, r0: int, r1: int) -> tuple[int, int]:
        n = self.shape[0]
        r0, r1 = int(r0), int(r1)
        if not 0 <= r0 <= r1 <= n:
            raise fail(f"{self.name}: rows [{r0}, {r1}) outside its {n} rows", "row_range", SECTION, where=self.name)
        return r0, r1

    # --- exact targets ----------------------------------------------------------------------------
    def exact_targets(self) -> dict[str, str]:
        """v3 formats in preference order → ``bit-exact`` / ``value-exact`` (docs/prequantized.md §Exactness
        table); computed once from the configuration and the scales (the codes only for INT8's −128)."""
        if self._targets is None:
            self._targets = targets.exact_targets(self)
        return dict(self._targets)

    def no_quantized_target(self) -> str | None:
        """Why no quantized format (only ``bf16`` / ``fp32``) holds this weight exactly, or None when one does."""
        return targets.no_quantized_target(self)

    def transcode(self, fmt: str, r0: int, r1: int, *, codes: bool = True) -> np.ndarray:
        """Rows ``[r0, r1)`` as one ``fmt`` object ``(r1 - r0, K)``, ``divisors = 1``, in
        ``codecs.FORMATS[fmt].layout``: a uint8 array. EncodingError names the tensor, row and block of
        anything ``fmt`` cannot represent (never a silent clamp). ``codes=False``: where :meth:`code_span`
        names the code plane's bytes, it is not filled (the caller copies it from there)."""
        return targets.transcode(self, fmt, [self._rows(r0, r1)], codes=codes)

    def gather(self, fmt: str, runs: list[tuple[int, int]]) -> np.ndarray:
        """The rows of ``runs`` (``[(r0, r1), …]``, in order) as one ``fmt`` object: each row's codes and scales
        moved with it (nvfp4's block scales re-tiled for the destination rows, which must be whole 128-row
        tiles; the runs need not be) — a mapping's row split or permutation kept exactly
        (docs/prequantized.md §Row gathers)."""
        return targets.transcode(self, fmt, [self._rows(r0, r1) for r0, r1 in runs])

    def code_span(self, fmt: str, r0: int, r1: int) -> tuple[Any, int, int] | None:
        """``(file, offset, length)`` of the source bytes that are rows ``[r0, r1)`` of ``fmt``'s code plane byte
        for byte (NVFP4 into nvfp4), or None: the writer can copy them file to file (docs/io-speed.md
        §Prequantized bench)."""
        r0, r1 = self._rows(r0, r1)
        return targets.code_span(self, fmt, r0, r1)

    def max_ulp(self, fmt: str) -> int:
        """The ulp bound of ``fmt``'s decode against the library rule (docs/prequantized.md §Ulp distance)."""
        if fmt not in self._ulp:
            self._ulp[fmt] = targets.ulp_bound(self, fmt)
        return self._ulp[fmt]
