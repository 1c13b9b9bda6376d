"""GGML block types as data: id, name, elements and bytes per block — gguf-py's list plus the fork types.

gguf-py (``gguf.constants.GGMLQuantizationType``/``GGML_QUANT_SIZES``) knows the upstream types. The
PrismML fork and the official ggml Q2_0 add the rows of ``FORK_TYPES`` (docs/gguf-conventions.md §Ternary
and binary GGML types). Type id 42 is **ambiguous**: PrismML's legacy Q2_0 stores 128 elements in 34 bytes,
the official ggml Q2_0 64 elements in 18 bytes (same bit layout). This module names the two
``Q2_0_G128`` and ``Q2_0_G64``; callers may pass either name, or the id 42 or the name ``Q2_0``, which are
resolved from the tensor's byte length (34 vs 36 bytes per 128 elements; the two never coincide) —
never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from .base import fail


@dataclass(frozen=True)
class GGMLType:
    """One GGML block type: ``block_size`` elements stored in ``type_size`` bytes."""

    name: str
    type_id: int
    block_size: int
    type_size: int
    origin: str

    def nbytes(self, n_elements: int) -> int:
        return n_elements // self.block_size * self.type_size


# Types gguf-py does not list. Block layouts: docs/gguf-conventions.md; decoders in ggml_blocks.py.
FORK_TYPES = (
    GGMLType("Q2_0_G128", 42, 128, 2 + 128 // 4, "PrismML legacy Q2_0: fp16 d, qs[32]"),
    GGMLType("Q2_0_G64", 42, 64, 2 + 64 // 4, "ggml Q2_0: fp16 d, qs[16]"),
    GGMLType("PQ2_0", 142, 128, 2 + 128 // 4, "PrismML PQ2_0: fp16 d, qs[32] (as legacy Q2_0)"),
    GGMLType("PTQ1_0", 143, 128, 24 + 2 + 2, "PrismML PTQ1_0: qs[24], qh[2], fp16 d last"),
)
# Names (and ids) that stand for several types; resolved by the tensor's byte length.
AMBIGUOUS_NAMES = {"Q2_0": ("Q2_0_G128", "Q2_0_G64")}

BY_NAME: dict[str, GGMLType] = {t.name: t for t in FORK_TYPES}
for _qt in GGMLQuantizationType:
    if _qt in GGML_QUANT_SIZES and _qt.name not in AMBIGUOUS_NAMES and _qt.name not in BY_NAME:
        _b, _t = GGML_QUANT_SIZES[_qt]
        BY_NAME[_qt.name] = GGMLType(_qt.name, int(_qt.value), _b, _t, "gguf-py")
GGUF_PY_TYPES = tuple(t for t in BY_NAME.values() if t.origin == "gguf-py")

BY_ID: dict[int, tuple[GGMLType, ...]] = {}
for _t in BY_NAME.values():
    BY_ID[_t.type_id] = (*BY_ID.get(_t.type_id, ()), _t)


def candidates(ggml_type: int | str) -> tuple[GGMLType, ...]:
    """Every type an id or name may stand for (one, except for id 42 / ``Q2_0``)."""
    if isinstance(ggml_type, bool) or not isinstance(ggml_type, int | str):
        raise fail(f"GGML type must be an id or a name, got {ggml_type!r}", "unknown_ggml_type", "storage-layouts §5")
    if isinstance(ggml_type, str):
        name = ggml_type.upper()
        if name in AMBIGUOUS_NAMES:
            return tuple(BY_NAME[n] for n in AMBIGUOUS_NAMES[name])
        found = (BY_NAME[name],) if name in BY_NAME else ()
    else:
        found = BY_ID.get(int(ggml_type), ())
    if not found:
        raise fail(f"unknown GGML type {ggml_type!r}", "unknown_ggml_type", "storage-layouts §5")
    return found


def resolve(ggml_type: int | str, n_elements: int, n_bytes: int, *, tensor: str | None = None) -> GGMLType:
    """The type whose block geometry stores ``n_elements`` in exactly ``n_bytes``.

    Raises EncodingError (rule ``ggml_type_size``) when no candidate fits, naming the tensor."""
    options = candidates(ggml_type)
    fits = [t for t in options if n_elements % t.block_size == 0 and t.nbytes(n_elements) == n_bytes]
    if len(fits) != 1:
        expected = ", ".join(
            f"{t.name}: {t.nbytes(n_elements) if n_elements % t.block_size == 0 else 'n/a'} bytes" for t in options
        )
        raise fail(f"GGML type {ggml_type!r} with {n_elements} elements cannot occupy {n_bytes} bytes "
                   f"(expected {expected})", "ggml_type_size", "storage-layouts §5", where=tensor)
    return fits[0]
