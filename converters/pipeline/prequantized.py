"""Planning the tensors of a prequantized source (docs/prequantized.md; docs/recipes.md §Prequantized sources).

A source that declares a quantization (compressed-tensors, ModelOpt, Qwen block FP8) shows each quantized
module as one virtual tensor whose ``source.quantized(name)`` is a ``QuantizedWeight``
(:mod:`converters.sources.prequantized`). Such a tensor is *kept* — a ``transcode`` piece whose bytes are
``qw.transcode(fmt, r0, r1)``: codes and scales copied, the value relation of its library convention stated —
when the format is one of ``qw.exact_targets()``, no value transform changes it and its input columns stay in
place (a moved column would split its scale groups). Rows may be selected and permuted at will — each row's
codes and scales move with it (``qw.gather``; docs/prequantized.md §Row gathers) — as long as, for a format
with row tiles (nvfp4's 128-row scale tiles), the piece is whole tiles and starts on one. Otherwise it is
requantized from the library's own dequantization (``encode``; error measured as for any source).

nvfp4 keeps the source's weight divisor: a parent of several kept members needs one divisor per member
unless they share one (:func:`reconcile_divisors`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from converters.mapping.recipes import EXACT
from converters.pipeline.planned import Piece
from ninfer_core import codecs
from ninfer_core.errors import EncodingError

#: what provenance keeps of ``QuantizedWeight.describe()`` as the object's ``source_quantization``
SCHEME_FIELDS = ("kind", "convention", "group", "symmetric", "library_dtype", "weight_divisor", "activation_divisor")


def quantized_weight(sources: dict, source) -> object | None:
    """The ``QuantizedWeight`` behind bound source ``source`` (None for an ordinary tensor or a stack)."""
    if source is None or len(source.tensors) > 1 or source.transposed:  # stacked or transposed: not its codes
        return None
    read = getattr(sources[source.input], "quantized", None)
    return read(source.tensor) if read is not None else None


def float_widening(fmt: str) -> bool:
    """Whether ``fmt`` stores plain floats of 16 bits or more (bf16, fp32): exact, but not the source's codes."""
    return codecs.codec_traits(fmt).bits_per_weight >= 16


def why_not_kept(qw, chain, fmt: str, row_start: int = 0) -> str | None:
    """Why the tensor of ``qw`` read through ``chain`` cannot be transcoded into ``fmt`` as a piece starting at
    row ``row_start`` of its object, or None when it can. A row map (split, per-head selection, permutation)
    is no obstacle: the rows are gathered with their scales; only the destination's row tiles count."""
    targets = qw.exact_targets()
    if fmt not in targets:
        return f"{qw.kind} has no exact path into {fmt} (its exact targets: {', '.join(targets) or 'none'})"
    if chain.values:
        return f"value transforms {', '.join(chain.steps)} change its {qw.kind} values"
    if chain.columns is not None:
        return f"the mapping moves its input columns, which would split its {qw.kind} scale groups"
    tile = codecs.codec_traits(fmt).row_tile
    if tile > 1 and chain.n_rows % tile:
        return (f"the mapping selects {chain.n_rows} of its {chain.source_rows} rows, not whole {fmt} {tile}-row "
                "scale tiles")
    if tile > 1 and row_start % tile:
        return f"it starts at row {row_start} of its object, inside one of {fmt}'s {tile}-row scale tiles"
    return None


def record(qw, fmt: str | None) -> dict:
    """Provenance of a piece read from ``qw``: its scheme, the value relation and (kept) the measured ``max_ulp``
    between the artifact's decode rule and the library's dequantization."""
    described = qw.describe()
    scheme = {k: described.get(k) for k in SCHEME_FIELDS}
    library = described.get("value_relation") or f"{qw.convention}'s dequantization"
    if fmt is None:
        return {"source_quantization": scheme,
                "value_relation": f"requantized from the library's values ({library}); error measured"}
    return {"source_quantization": scheme, "value_relation": f"{stored_relation(qw, fmt)}; library: {library}",
            "max_ulp": int(qw.max_ulp(fmt))}


def stored_relation(qw, fmt: str) -> str:
    """How the stored object keeps the source (docs/prequantized.md §Value relations)."""
    if fmt == "nvfp4":
        divisor = ("divisor = 1 / weight_scale_2 (ModelOpt multiplies by weight_scale_2)" if qw.convention == "modelopt"
                   else f"divisor = the global scale ({qw.convention} divides by it)")
        return f"nvfp4: E2M1 codes and E4M3 block scales copied (scales into the 128x4 tiles), {divisor}"
    if float_widening(fmt):
        return f"{fmt}: the library's values widened"
    return f"{fmt}: {qw.kind} codes and scales copied"


def kept_piece(p, qw, fmt: str, row_start: int) -> Piece:
    """The transcode piece of ``p`` into ``fmt`` (``fmt`` in ``qw.exact_targets()``)."""
    label = qw.exact_targets()[fmt].replace("_", "-")
    return Piece(p.name, row_start, p.shape[0], p.source, qw.kind, "transcode", label, quantization=record(qw, fmt))


def requantized_piece(p, qw, row_start: int, hadamard: int | None = None) -> Piece:
    """``p`` re-encoded from the library's dequantization (the source's float values)."""
    return Piece(p.name, row_start, p.shape[0], p.source, qw.kind, "encode", "requantized", hadamard,
                 quantization=record(qw, None))


def first_kept(p, qw, *, widen: bool) -> str | None:
    """The first of ``qw.exact_targets()`` (their preference order) that ``p``'s shape and chain allow;
    ``widen``: float widenings (fp32) count too (``format: exact``), else only quantized forms."""
    for fmt in qw.exact_targets():
        if not widen and float_widening(fmt):
            continue
        if why_not_kept(qw, p.source.chain, fmt) is not None:
            continue
        try:
            codecs.validate_combination(fmt, codecs.FORMATS[fmt].layout, p.shape, 1)
        except EncodingError:
            continue
        return fmt
    return None


def reconcile_divisors(sources: dict, oid: str, fmt: str, divisors: int, pieces: list[Piece],
                       notes: list[str]) -> tuple[int, list[Piece]]:
    """The divisors of a whole-object format (nvfp4) parent whose pieces include kept ones: each kept member
    carries its source divisor, so a parent of several members needs ``divisors = members`` unless they share
    one divisor. Members of unequal rows with different divisors cannot be one parent: they are requantized
    (noted). A parent of one divisor that mixes kept and requantized members is requantized too."""
    kept = [pc for pc in pieces if pc.method == "transcode"]
    if not kept or len(pieces) == 1 or divisors == len(pieces):
        return divisors, pieces
    values = {np.float32(quantized_weight(sources, pc.source).weight_divisor).tobytes() for pc in kept}
    if len(kept) == len(pieces) and len(values) == 1:
        return divisors, pieces
    rows = {pc.rows for pc in pieces}
    if len(rows) == 1 and codecs.codec_traits(fmt).divisors_per_member:
        notes.append(f"{oid}: its members keep their own source divisors: divisors = {len(pieces)} (one per member)")
        return len(pieces), pieces
    why = ("its members have different source divisors and unequal rows" if len(kept) == len(pieces)
           else "it mixes kept and requantized members under one divisor")
    notes.append(f"{oid}: {why}, so one {fmt} parent cannot keep them: every member requantized")
    return divisors, [dataclasses.replace(pc, method="encode", exactness="requantized",
                                          quantization=requantized_record(pc)) for pc in pieces]


def requantized_record(pc: Piece) -> dict | None:
    if pc.quantization is None:
        return None
    scheme = pc.quantization["source_quantization"]
    return {"source_quantization": scheme,
            "value_relation": f"requantized from the library's values ({scheme['convention']} {scheme['kind']}); "
                              "error measured"}


def object_record(pieces) -> dict:
    """The object-level provenance of its prequantized pieces: the schemes, the value relations and the
    largest ``max_ulp`` of the kept ones (empty when no piece reads a prequantized tensor)."""
    recs = [pc.quantization for pc in pieces if pc.quantization is not None]
    if not recs:
        return {}
    schemes = list({repr(r["source_quantization"]): r["source_quantization"] for r in recs}.values())
    relations = list(dict.fromkeys(r["value_relation"] for r in recs))
    out = {"source_quantization": schemes[0] if len(schemes) == 1 else schemes,
           "value_relation": relations[0] if len(relations) == 1 else relations}
    ulps = [r["max_ulp"] for r in recs if "max_ulp" in r]
    if ulps:
        out["max_ulp"] = max(ulps)
    return out


# -- the planner's hooks (converters/pipeline/plan.py's _Planner) ----------------------------------------------


def keeps_group(planner, spec, members: list) -> bool:
    """Under ``prequantized: keep`` a recipe group forms only when it keeps every prequantized member as it is
    (its format one of the member's exact targets); otherwise they are objects of their own."""
    if planner.recipe.prequantized != "keep":
        return True
    return all(why_not_kept(qw, p.source.chain, spec.format) is None for p in members
               if (qw := quantized_weight(planner.sources, p.source)) is not None)


def keep_piece(planner, p) -> tuple[str, Piece] | None:
    """``prequantized: keep``: ``p``'s own quantized form (its first exact target that is not a float widening),
    else the recipe's ``prequantized_fallback`` for its kind (or its role's format) requantized, noted; None
    when ``p`` is not prequantized."""
    qw = quantized_weight(planner.sources, p.source)
    if qw is None:
        return None
    fmt = first_kept(p, qw, widen=False)
    if fmt is not None:
        return fmt, kept_piece(p, qw, fmt, 0)
    fmt = planner.recipe.fallback_for(qw.kind) or planner.role(p).format
    if fmt == EXACT:
        return planner.exact_piece(p)
    why = why_unkept(p, qw)
    planner.notes.append(f"{p.name}: {qw.kind} has no quantized exact form for {list(p.shape)} (exact targets: "
                         f"{', '.join(qw.exact_targets()) or 'none'}{'; ' + why if why else ''}): requantized into {fmt}")
    return fmt, requantized_piece(p, qw, 0)


def why_unkept(p, qw) -> str | None:
    """Why ``p`` cannot keep its first quantized exact target: the chain's reason or the format's shape rule; or
    why the weight has no quantized exact target at all."""
    fmt = next((f for f in qw.exact_targets() if not float_widening(f)), None)
    if fmt is None:
        return qw.no_quantized_target()
    why = why_not_kept(qw, p.source.chain, fmt)
    if why is None:
        try:
            codecs.validate_combination(fmt, codecs.FORMATS[fmt].layout, p.shape, 1)
        except EncodingError as exc:
            why = exc.message
    return f"{fmt}: {why}" if why else None


def bind_input_scale(planner, p, use: dict, aux: dict) -> None:
    """``activation_input_divisor: source``: the use binds the source's static input scale (as v3's divisor,
    docs/prequantized.md) and allows the activation width the source was calibrated for — AllowA4 for an
    NVFP4 source, AllowA8 for FP8; a parameter without one keeps the recipe's policy (the plan counts them)."""
    source = p.source if p.source is not None else planner.bound.parameter(p.tied_to).source
    qw = quantized_weight(planner.sources, source)
    value = qw.activation_divisor if qw is not None else None
    if value is None:
        planner.without_input_scale += 1
        return
    aux["activation_input_divisor"] = planner.divisor_binding(value, p.component,
                                                              "activation divisors (the source's static input scales)")
    use["activation_policy"] = "AllowA4" if "NVFP4" in qw.kind else "AllowA8"
