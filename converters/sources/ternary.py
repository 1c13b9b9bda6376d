"""Ternary and binary GGML sources (Ternary Bonsai, docs/ternary.md): the types as data, their geometry in the v3
integer formats, where each block keeps its multiplier, and the proof that a transcode kept every code and
multiplier.

Types (docs/gguf-conventions.md "Ternary and binary GGML types"; block geometry and the byte offset of
``d`` from :mod:`ninfer_core.codecs.ggml_types`, the one GGML type table, which holds the fork ids as data):

========== ====== ================ ========================= ==========================================
type       ids    elements / bytes multiplier ``d``          codes
========== ====== ================ ========================= ==========================================
TQ1_0      34     256 / 54         fp16, bytes 52..53 (last) trits 0..2 → −1..1
TQ2_0      35     256 / 66         fp16, bytes 64..65 (last) 2-bit q → q − 1 (q = 3 is not ternary)
Q1_0       41     128 / 18         fp16, bytes 0..1 (first)  bits → ±1
Q2_0_G64   42     64 / 18          fp16, bytes 0..1 (first)  2-bit q → q − 1
Q2_0_G128  42     128 / 34         fp16, bytes 0..1 (first)  2-bit q → q − 1
PQ2_0      142    128 / 34         fp16, bytes 0..1 (first)  2-bit q → q − 1
PTQ1_0     143    128 / 28         fp16, bytes 26..27 (last) trits 0..2 → −1..1
========== ====== ================ ========================= ==========================================

Id 42 stands for both Q2_0 block sizes; a tensor's byte length decides (``codecs.resolve_ggml_type``).

- :func:`geometry` — docs/ternary.md §5 CHECK 1 for one ``(type, n, k)``: blocks per row, target groups per row,
  source bytes, payload bytes and the padding between them (zero for every Bonsai shape: "no format
  overhead").
- :func:`scale_columns` — the byte columns of a block holding ``d`` (docs/ternary.md §5: CHECK 2's probe is
  format-aware: PTQ1_0 keeps ``d`` last, PQ2_0 first; a hard-coded ``34 / slice(0, 2)`` reads PTQ1_0 wrong).
- :func:`compare_codes` — the codes and multipliers of a transcoded ``t2_g128_fp16`` / ``q2_g64_fp16``
  object against the source blocks', element by element (storage-layouts §1 read back with
  :mod:`ninfer_core.codecs.bitpack`, not with the transcoder), which is how provenance proves a ternary
  object exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ninfer_core import codecs
from ninfer_core.codecs import bitpack, ggml_blocks
from ninfer_core.codecs.ggml_types import BY_NAME

FP16_SIGN = 0x8000


@dataclass(frozen=True)
class TernaryType:
    """One ternary/binary GGML block type: geometry (from the codecs' type table) and where ``d`` sits."""

    name: str
    type_id: int
    block: int
    block_bytes: int
    scale_offset: int
    codes: str  # "ternary" (trits), "two_bit" (q − 1, q = 3 allowed by the type), "binary" (±1)

    @property
    def scale_slice(self) -> slice:
        return slice(self.scale_offset, self.scale_offset + 2)


def _t(name: str, codes: str) -> TernaryType:
    g = BY_NAME[name]
    return TernaryType(name, g.type_id, g.block_size, g.type_size, g.multipliers[0], codes)


#: The table (data): type name → :class:`TernaryType`; geometry and the place of ``d`` from the GGML type table.
TYPES: dict[str, TernaryType] = {t.name: t for t in (
    _t("TQ1_0", "ternary"), _t("TQ2_0", "two_bit"), _t("Q1_0", "binary"),
    _t("Q2_0_G64", "two_bit"), _t("Q2_0_G128", "two_bit"), _t("PQ2_0", "two_bit"),
    _t("PTQ1_0", "ternary"),
)}
#: v3 formats a ternary source converts into exactly (storage-layouts §6).
TARGETS = ("t2_g128_fp16", "q2_g64_fp16")


#: the recipes that pack a ternary source (docs/ternary.md), the one chosen by content, and the kind of
#: template they pack onto (docs/ternary.md §1: its grouping is theirs)
RECIPES = ("ternary", "ternary-q2")
RECIPE = "ternary"
TEMPLATE_KIND = "groupwise-int"


def is_ternary(type_name: str | None) -> bool:
    return type_name in TYPES


def ternary_tensors(source) -> list[str]:
    """The tensors of ``source`` stored in a ternary or binary GGML type, found by content: each tensor's
    type id resolved with its byte length (``Q2_0``'s two block sizes included), whatever the file's name
    or metadata say."""
    from converters.errors import SourceError
    from converters.sources.rows import storage_of

    out = []
    for name, t in getattr(source, "tensors", {}).items():
        try:
            kind = storage_of(t).ggml_type
        except SourceError:  # a tensor whose storage cannot be resolved is judged where it is read, not here
            continue
        if is_ternary(kind):
            out.append(name)
    return out


def scale_columns(type_name: str) -> slice:
    """Byte columns of ``d`` in one block of ``type_name`` (``slice(26, 28)`` for PTQ1_0, ``slice(0, 2)`` for PQ2_0)."""
    return TYPES[type_name].scale_slice


def exact_targets(type_name: str) -> dict[str, str]:
    """The formats ``type_name`` transcodes into exactly, with ``bit_exact`` / ``value_exact``."""
    return {fmt: how for fmt, how in codecs.exact_targets(type_name).items() if fmt in TARGETS}


def geometry(type_name: str, n: int, k: int, fmt: str) -> dict:
    """CHECK 1 of docs/ternary.md §5 for ``n`` rows of ``k`` elements of ``type_name`` stored as ``fmt``."""
    t = TYPES[type_name]
    group = codecs.FORMATS[fmt].group
    src = n * (k // t.block) * t.block_bytes
    payload = codecs.encoded_size(fmt, codecs.FORMATS[fmt].layout, (n, k))
    return {"type": type_name, "n": n, "k": k, "format": fmt, "blocks_per_row": k // t.block,
            "groups_per_row": -(-k // group), "source_bytes": src, "payload_bytes": payload, "pad": payload - src}


# --- the proof ---------------------------------------------------------------------------------------------

def source_codes(type_name: str, raw: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, k // B * T)`` source bytes → (codes ``(rows, k)`` int8 as values ``−1..2``, FP16 words
    ``(rows, k // B)`` uint16)."""
    t = TYPES[type_name]
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(-1, t.block_bytes)
    if t.name == "Q1_0":
        d, bits = ggml_blocks.q1_0(blocks)
        codes = bits.astype(np.int8) * 2 - 1
    elif t.name == "TQ2_0":
        d, q = ggml_blocks.tq2_0(blocks)
        codes = q.astype(np.int8) - 1
    elif t.codes == "ternary":
        d, q = ggml_blocks.base3(blocks, t.name)
        codes = q.astype(np.int8) - 1
    else:
        d, q = ggml_blocks.q2_0(blocks, t.block)
        codes = q.astype(np.int8) - 1
    return codes.reshape(rows, k), d.reshape(rows, -1)


def target_codes(fmt: str, data, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A ``t2_g128_fp16`` / ``q2_g64_fp16`` object → (code values ``(N, K)`` int8, FP16 words ``(N, Kp/G)``),
    read from its planes (storage-layouts §1)."""
    n, k = shape
    codec = codecs.FORMATS[fmt]
    buf = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1)
    planes = {p.name: buf[p.offset:p.offset + p.size].reshape(n, -1) for p in codecs.planes(fmt, codec.layout, shape)}
    u = bitpack.unpack(np.ascontiguousarray(planes["low"]), 2)[:, :k].astype(np.int8)
    values = u - 1 if codec.offset_codes else np.where(u >= 2, u - 4, u).astype(np.int8)
    return values.astype(np.int8), np.ascontiguousarray(planes["scale"]).view("<u2")


def compare_codes(type_name: str, raw: np.ndarray, fmt: str, data, shape: tuple[int, int],
                  columns: np.ndarray | None = None) -> dict:
    """Compare a transcoded object (rows ``shape[0]``) with the source rows ``raw`` it came from.

    ``columns``: the mapping's input-column order (target column ``j`` is source column ``columns[j]``).
    Codes: the target's code of every element equals the source code, negated where the source block's
    ``d`` is negative (t2 writes non-negative multipliers: the sign moves into the codes, value-exact).
    Multipliers: every target group's FP16 word equals its source block's ``d`` word (``|d|`` for t2) —
    for a 64-element source block inside a 128-group, only blocks with a non-zero code are compared (an
    all-zero block's multiplier does not take part in any value). ``values_equal``: code × multiplier
    equal in float32 (a zero code times a negative ``d`` is −0.0 in the source and +0.0 in t2: equal values)."""
    n, k = shape
    t = TYPES[type_name]
    group = codecs.FORMATS[fmt].group
    src_codes, src_d = source_codes(type_name, raw, k)
    per_elem_block = np.arange(k) // t.block
    d_elem = src_d[:, per_elem_block]
    neg = (d_elem & FP16_SIGN) != 0
    want_codes = src_codes
    want_words = d_elem
    if fmt == "t2_g128_fp16":
        want_codes = np.where(neg, -src_codes, src_codes).astype(np.int8)
        want_words = d_elem & 0x7FFF
    block_nonzero = (src_codes.reshape(n, -1, t.block) != 0).any(axis=2)[:, per_elem_block]
    if columns is not None:
        want_codes, want_words = want_codes[:, columns], want_words[:, columns]
        block_nonzero = block_nonzero[:, columns]
    got_codes, got_scale = target_codes(fmt, data, shape)
    got_words = got_scale[:, np.arange(k) // group]
    weigh = block_nonzero if t.block < group else np.ones_like(block_nonzero)
    codes_equal = bool(np.array_equal(got_codes, want_codes))
    words_equal = bool(np.array_equal(got_words[weigh], want_words[weigh]))
    src_values = src_codes.astype(np.float32) * d_elem.view(np.float16).astype(np.float32)
    if columns is not None:
        src_values = src_values[:, columns]
    got_values = got_codes.astype(np.float32) * got_words.view(np.float16).astype(np.float32)
    return {"rows": n, "elements": n * k, "codes_equal": codes_equal, "multipliers_equal": words_equal,
            "values_equal": bool(np.array_equal(src_values, got_values)),
            "sign_folded_blocks": int(np.count_nonzero(src_d & FP16_SIGN)) if fmt == "t2_g128_fp16" else 0}


#: a piece whose source rows take at most this many bytes is compared whole; larger ones by their first and
#: last :data:`PROOF_ROWS` rows (the gates compare every value after writing: ``convert verify``)
PROOF_WHOLE_BYTES = 4 * 1024 * 1024
PROOF_ROWS = 64


def _proof_ranges(rows: int, row_bytes: int) -> list[tuple[int, int]]:
    if rows * row_bytes <= PROOF_WHOLE_BYTES or rows <= 2 * PROOF_ROWS:
        return [(0, rows)]
    return [(0, PROOF_ROWS), (rows - PROOF_ROWS, rows)]


def prove_objects(objects, producer) -> dict[str, list[dict]]:
    """For every planned object with ternary ``transcode`` pieces: produce the pieces' rows (sampled, see
    :data:`PROOF_WHOLE_BYTES`) exactly as the writer will and compare codes and multipliers with the
    source blocks (:func:`compare_codes`). Object id → one record per piece, for provenance. A mismatch is
    a converter fault: :class:`~converters.errors.ConversionError` before anything is written."""
    from converters.errors import ConversionError
    from converters.pipeline.planned import PlannedTensor
    from converters.sources.rows import open_rows

    out: dict[str, list[dict]] = {}
    for obj in objects:
        if not isinstance(obj, PlannedTensor) or obj.format not in TARGETS:
            continue
        for pc in obj.pieces:
            if pc.method != "transcode" or pc.source_type not in TYPES:
                continue
            rows = open_rows(producer.sources, pc.source)
            chain = pc.source.chain
            record = {"parameter": pc.parameter, "source": pc.source.tensor, "source_type": pc.source_type,
                      "rows": [], "elements": 0}
            ok = {"codes_equal": True, "multipliers_equal": True, "values_equal": True}
            folded = 0
            for a, b in _proof_ranges(pc.rows, rows.storage.row_bytes or 0):
                block = producer.transcode_block(obj, pc, rows, a, b)
                raw = np.ascontiguousarray(rows.raw(chain.row_ids(a, b)))
                r = compare_codes(pc.source_type, raw, obj.format, block.data, block.shape, chain.columns)
                record["rows"].append([a, b])
                record["elements"] += r["elements"]
                folded += r["sign_folded_blocks"]
                for k in ok:
                    ok[k] = ok[k] and r[k]
            record.update(ok, sign_folded_blocks=folded)
            if not all(ok.values()):
                bad = ", ".join(k for k, v in ok.items() if not v)
                raise ConversionError(f"{obj.id}: the transcode of {pc.source.tensor} ({pc.source_type}) into "
                                      f"{obj.format} does not keep the source's {bad} (rows {record['rows']}); "
                                      "nothing was written", rule="ternary_proof")
            out.setdefault(obj.id, []).append(record)
    return out
