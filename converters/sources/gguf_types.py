"""GGML tensor type ids as a GGUF file declares them: what each id can mean and what that fixes.

Block geometry comes from the project's one GGML type table, :mod:`ninfer_core.codecs.ggml_types` (gguf-py's
types plus the fork types); this module adds only what a reader of old files must know on top of it: the
ids whose meaning changed across ggml versions. Rules (docs/gguf-conventions.md "Ternary and binary GGML
types"):

- Stable ids take their name and ``(elements, bytes)`` per block from the GGML type table.
- **Q8_1 (id 9)** has two published layouts (40 bytes per 32 elements in llama.cpp b1500, 36 in modern
  ggml), both under GGUF v3 / quantization version 2: the name is kept, the byte length of a non-empty
  tensor is unknown, the 32-element row block is still enforced.
- **K-quants (ids 10-15)** were 64-element blocks under b1500's ``LLAMA_QKK_64`` and 256-element blocks by
  default: names kept, only the common 64-element row multiple enforced, non-empty byte length unknown.
- **Ids 16-25** shifted each time an IQ type was added until upstream PR 6050 pinned the integers: the
  type is ``AMBIGUOUS_<id>`` with the published candidate names; non-empty byte length unknown.
- **Id 42** is ``Q2_0`` with two PrismML meanings (legacy 128 elements / 34 bytes, official 64 / 18); it is
  resolved only from the tensor's data range (see :func:`resolve_q2_0`). **142** PQ2_0 (128/34) and
  **143** PTQ1_0 (128/28) are PrismML fork ids known here as data.
- Any other id is unknown: numeric id kept, byte length ``None``.

Empty tensors (a zero dimension) have a derived zero byte length for every id except unknown ones.

For the converters, which must read modern files, :attr:`GGMLType.modern` names the layout of current ggml
(after PR 6050). Reading a historically ambiguous tensor under it is an explicit assumption that the
source records (``Source.layout_assumptions``); inspection never makes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ninfer_core.codecs.ggml_types import BY_ID, BY_NAME

# Candidate names per id 16-25 across the published ggml.h snapshots between b1500 and PR 6050 (each
# IQ type inserted before I8/I16/I32, which moved up by one every time). Derived from the snapshot
# sequence: b1500 (16 I8, 17 I16, 18 I32), then +IQ2_XXS, +IQ2_XS, +IQ3_XXS, +IQ1_S, +IQ4_NL, +IQ3_S,
# +IQ2_S, +IQ4_XS (I32 reaching 26, where it stayed).
AMBIGUOUS_CANDIDATES: dict[int, tuple[str, ...]] = {
    16: ("I8", "IQ2_XXS"),
    17: ("I16", "I8", "IQ2_XS"),
    18: ("I32", "I16", "I8", "IQ3_XXS"),
    19: ("I32", "I16", "I8", "IQ1_S"),
    20: ("I32", "I16", "I8", "IQ4_NL"),
    21: ("I32", "I16", "I8", "IQ3_S"),
    22: ("I32", "I16", "I8", "IQ2_S"),
    23: ("I32", "I16", "I8", "IQ4_XS"),
    24: ("I32", "I16", "I8"),
    25: ("I32", "I16"),
}

def _block(name: str) -> tuple[int, int]:
    """``(elements, bytes)`` of one block of ``name`` in the GGML type table."""
    t = BY_NAME[name]
    return t.block_size, t.type_size


# (b1500, modern ggml). Reader-specific: gguf-py's (and so the GGML type table's) Q8_1 row is the 40-byte one.
Q8_1_LAYOUTS = ((32, 40), (32, 36))
K_QUANT_IDS = range(10, 16)
K_QUANT_ROW_MULTIPLE = 64

Q2_0_ID = 42
Q2_0_LAYOUTS = {"prismml-legacy": _block("Q2_0_G128"), "ggml-official": _block("Q2_0_G64")}

# PrismML fork ids, not in gguf-py (docs/gguf-conventions.md table), as the GGML type table holds them.
FORK_TYPES: dict[int, tuple[str, tuple[int, int]]] = {
    t.type_id: (t.name, _block(t.name)) for t in BY_NAME.values() if t.origin != "gguf-py" and t.type_id != Q2_0_ID
}


@dataclass(frozen=True)
class GGMLType:
    """What a declared type id fixes.

    ``name`` is the reported type label; ``block`` is ``(elements, bytes)`` when the id fixes the
    storage layout, else ``None``; ``row_multiple`` is the first-dimension multiple that every candidate
    layout requires; ``status`` is ``known`` / ``layout_ambiguous`` (name known, layout not) /
    ``ambiguous`` (name not known) / ``q2_0`` (resolved per tensor) / ``unknown``; ``candidates`` the
    published names or layouts; ``modern`` the ``(name, block)`` of current ggml for ambiguous ids.
    """

    type_id: int
    name: str
    block: tuple[int, int] | None
    row_multiple: int
    status: str
    candidates: tuple[str, ...] = ()
    modern: tuple[str, tuple[int, int]] | None = None

    @property
    def known(self) -> bool:
        return self.status == "known"


def _gguf_name(type_id: int) -> str | None:
    """The name gguf-py gives ``type_id`` today (None for an id it does not list)."""
    found = [t for t in BY_ID.get(type_id, ()) if t.origin == "gguf-py"]
    return found[0].name if found else None


def _modern(name: str) -> tuple[str, tuple[int, int]]:
    return name, _block(name)


def ggml_type(type_id: int) -> GGMLType:
    """The :class:`GGMLType` for a declared id (any u32)."""
    if type_id == 9:
        return GGMLType(9, "Q8_1", None, 32, "layout_ambiguous",
                        candidates=("40 bytes per 32 elements (llama.cpp b1500)",
                                    "36 bytes per 32 elements (modern ggml)"),
                        modern=("Q8_1", Q8_1_LAYOUTS[1]))
    if type_id in K_QUANT_IDS:
        name = _gguf_name(type_id)
        return GGMLType(type_id, name, None, K_QUANT_ROW_MULTIPLE, "layout_ambiguous",
                        candidates=("64-element blocks (b1500 LLAMA_QKK_64)", "256-element blocks (default)"),
                        modern=_modern(name))
    if type_id in AMBIGUOUS_CANDIDATES:
        modern_name = _gguf_name(type_id)
        return GGMLType(type_id, f"AMBIGUOUS_{type_id}", None, 1, "ambiguous",
                        candidates=AMBIGUOUS_CANDIDATES[type_id], modern=_modern(modern_name))
    if type_id == Q2_0_ID:
        return GGMLType(Q2_0_ID, f"AMBIGUOUS_{Q2_0_ID}", None, 64, "q2_0",
                        candidates=tuple(f"Q2_0 {k} {e}/{b}" for k, (e, b) in Q2_0_LAYOUTS.items()))
    if type_id in FORK_TYPES:
        name, block = FORK_TYPES[type_id]
        return GGMLType(type_id, name, block, block[0], "known")
    name = _gguf_name(type_id)
    if name is None:
        return GGMLType(type_id, f"UNKNOWN_{type_id}", None, 1, "unknown")
    block = _block(name)
    return GGMLType(type_id, name, block, block[0], "known")


def byte_length(block: tuple[int, int], elements: int) -> int:
    """Bytes of ``elements`` values stored in ``(block elements, block bytes)`` blocks (exact ints)."""
    per, size = block
    return elements // per * size


@dataclass(frozen=True)
class Q2_0Resolution:
    """Outcome of :func:`resolve_q2_0`: the layout key (or ``None``) and why."""

    layout: str | None
    block: tuple[int, int] | None
    reason: str


def resolve_q2_0(ne0: int, elements: int, data_range: int, alignment: int) -> Q2_0Resolution:
    """Resolve type id 42 from byte lengths (docs/gguf-conventions.md: "resolved from the tensor's byte
    length, never assumed").

    ``data_range`` is the distance from the tensor's start to the next tensor's start (or the end of the
    file). A layout is *possible* when the first dimension holds whole blocks and its length fits the
    range; it is a *tight* fit when the rest of the range is shorter than one alignment unit (llama.cpp
    pads every tensor to the alignment). One possible layout, or exactly one tight fit, resolves the id;
    otherwise it stays ambiguous. No possible layout at all is returned as ``layout=None`` with
    ``reason="no_fit"`` so the parser can reject the file.
    """
    possible = {}
    for key, block in Q2_0_LAYOUTS.items():
        if ne0 % block[0] == 0:
            length = byte_length(block, elements)
            if length <= data_range:
                possible[key] = length
    if not possible:
        return Q2_0Resolution(None, None, "no_fit")
    if len(possible) == 1:
        (key,) = possible
        return Q2_0Resolution(key, Q2_0_LAYOUTS[key], "only_layout_fitting_range")
    tight = [k for k, n in possible.items() if data_range - n < alignment]
    if len(tight) == 1:
        return Q2_0Resolution(tight[0], Q2_0_LAYOUTS[tight[0]], "only_tight_fit_of_range")
    return Q2_0Resolution(None, None, "range_fits_both_layouts" if tight else "range_fits_neither_tightly")
