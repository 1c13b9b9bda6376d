"""GGML block types as data: id, name, elements and bytes per block — gguf-py's list plus the fork types.

gguf-py (``gguf.constants.GGMLQuantizationType``/``GGML_QUANT_SIZES``) knows the upstream types. The
PrismML fork and the official ggml Q2_0 add the rows of ``FORK_TYPES`` (docs/gguf-conventions.md §Ternary
and binary GGML types). Type id 42 is **ambiguous**: PrismML's legacy Q2_0 stores 128 elements in 34 bytes,
the official ggml Q2_0 64 elements in 18 bytes (same bit layout). This module names the two
``Q2_0_G128`` and ``Q2_0_G64``; callers may pass either name, or the id 42 or the name ``Q2_0``, which are
resolved from the tensor's byte length (34 vs 36 bytes per 128 elements; the two never coincide) —
never assumed.

This is the project's one table of GGML block facts. Besides the geometry it records, per type, where a
block keeps its FP16 multipliers (``multipliers``: byte offsets of ``d``, ``dmin``, ``m``, from ggml's
block structs), whether llama.cpp's quantizer writes ``d >= 0`` (``d_non_negative``; ``None`` where not
recorded) and, for the plain types, the numpy element type (``word``). The codecs, the GGUF reader of
``converters.sources`` and the acceptance probes read these rows; see docs/format/codec-traits.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from .base import fail


@dataclass(frozen=True)
class GGMLType:
    """One GGML block type: ``block_size`` elements stored in ``type_size`` bytes (and the facts of the
    module docstring: ``multipliers``, ``d_non_negative``, ``word``)."""

    name: str
    type_id: int
    block_size: int
    type_size: int
    origin: str
    multipliers: tuple[int, ...] = ()
    d_non_negative: bool | None = None
    word: str | None = None

    def nbytes(self, n_elements: int) -> int:
        return n_elements // self.block_size * self.type_size


# Types gguf-py does not list. Block layouts: docs/gguf-conventions.md; decoders in ggml_blocks.py.
FORK_TYPES = (
    GGMLType("Q2_0_G128", 42, 128, 2 + 128 // 4, "PrismML legacy Q2_0: fp16 d, qs[32]", (0,)),
    GGMLType("Q2_0_G64", 42, 64, 2 + 64 // 4, "ggml Q2_0: fp16 d, qs[16]", (0,)),
    GGMLType("PQ2_0", 142, 128, 2 + 128 // 4, "PrismML PQ2_0: fp16 d, qs[32] (as legacy Q2_0)", (0,)),
    GGMLType("PTQ1_0", 143, 128, 24 + 2 + 2, "PrismML PTQ1_0: qs[24], qh[2], fp16 d last", (26,)),
)
# Names (and ids) that stand for several types; resolved by the tensor's byte length.
AMBIGUOUS_NAMES = {"Q2_0": ("Q2_0_G128", "Q2_0_G64")}

# Byte offsets of the FP16 multipliers (d, dmin, m) inside one block, from ggml's block structs.
_MULTIPLIERS = {
    "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
    "Q2_K": (80, 82),  # scales[16] qs[64] d dmin
    "Q3_K": (108,),  # hmask[32] qs[64] scales[12] d
    "Q4_K": (0, 2), "Q5_K": (0, 2),  # d dmin scales[12] ...
    "Q6_K": (208,),  # ql[128] qh[64] scales[16] d
    "IQ2_XXS": (0,), "IQ2_XS": (0,), "IQ2_S": (0,), "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,),
    "IQ4_NL": (0,), "IQ4_XS": (0,),
    "TQ1_0": (52,),  # qs[48] qh[4] d
    "TQ2_0": (64,),  # qs[64] d
    "Q1_0": (0,),
}
# llama.cpp's quantizers (ggml-quants.c): Q4_0/Q5_0 store d = max / -8 (-16) and Q3_K/Q6_K a signed
# super-block d; the others listed here d = amax / qmax >= 0.
_D_NON_NEGATIVE = {"Q8_0": True, "Q4_0": False, "Q4_1": True, "Q5_0": False, "Q5_1": True,
                   "Q2_K": True, "Q3_K": False, "Q4_K": True, "Q5_K": True, "Q6_K": False}
# numpy element type (byte order not included) of the plain types
_WORDS = {"F32": "f4", "F16": "f2", "F64": "f8", "I8": "i1", "I16": "i2", "I32": "i4", "I64": "i8"}

BY_NAME: dict[str, GGMLType] = {t.name: t for t in FORK_TYPES}
for _qt in GGMLQuantizationType:
    if _qt in GGML_QUANT_SIZES and _qt.name not in AMBIGUOUS_NAMES and _qt.name not in BY_NAME:
        _b, _t = GGML_QUANT_SIZES[_qt]
        BY_NAME[_qt.name] = GGMLType(_qt.name, int(_qt.value), _b, _t, "gguf-py", _MULTIPLIERS.get(_qt.name, ()),
                                     _D_NON_NEGATIVE.get(_qt.name), _WORDS.get(_qt.name))
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
