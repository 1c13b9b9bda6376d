"""An interpretation, not evidence: a GGUF's tensor sizes under modern ggml (docs/inspect.md
§Interpretation under modern ggml).

The evidence of a K-quant or modern IQ GGUF leaves byte lengths ``unknown`` where the file cannot decide
them (K-quant blocks were 64 elements under b1500 ``LLAMA_QKK_64``; type ids had several meanings before
ggml PR 6050). Users still want to know how big their Q4_K_M tensors are, so this module reads the
evidence record and, beside it, states the sizes under the assumptions of every ggml since then — QK_K =
256 and the type ids as pinned by PR 6050 (the ``gguf`` package's ``GGML_QUANT_SIZES``) — and whether
those sizes tile the data section exactly: each tensor starting where the previous one ends, rounded up
to the alignment, and the last ending at the end of the file (padded or not). The evidence rows are never
changed; the record carries the interpretation in its own block, labelled ``"evidence": false``.
"""

from __future__ import annotations

LABEL = "interpretation, not evidence: sizes under modern ggml (QK_K = 256, type ids after ggml PR 6050)"
ASSUMPTIONS = ("QK_K = 256 (K-quant and IQ super-blocks of 256 elements)",
               "type ids as pinned by ggml PR 6050 (gguf-py GGMLQuantizationType)")


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def modern_size(type_id: int, dims: list[int]) -> tuple[int | None, str | None]:
    """(bytes, None) of a tensor of ``type_id`` and fastest-first ``dims`` under modern ggml, or (None, why)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        qtype = GGMLQuantizationType(type_id)
    except ValueError:
        return None, f"type id {type_id} is not a modern ggml type"
    block, type_size = GGML_QUANT_SIZES[qtype]
    if not dims or dims[0] % block:
        return None, f"{qtype.name}: rows of {dims[0] if dims else 0} elements are not whole {block}-element blocks"
    n = 1
    for d in dims:
        n *= d
    return n // block * type_size, None


def interpret(record: dict) -> dict | None:
    """The interpretation of GGUF evidence ``record`` (a complete ``inspect`` record), or None when the
    evidence already knows every byte length (nothing to interpret) or the record is not a GGUF's."""
    if record.get("format") != "gguf" or not record.get("tensors"):
        return None
    if all(t["byte_length"] is not None for t in record["tensors"]):
        return None
    details = record["details"]
    rows, by_type, unresolved = [], {}, []
    for t in record["tensors"]:
        if t["byte_length"] is not None:
            size, why = t["byte_length"], None
        else:
            size, why = modern_size(t["type_id"], [int(d) for d in t["shape"]])
            if size is None:
                unresolved.append({"tensor": t["name"], "reason": why})
                continue
            name = _type_name(t["type_id"])
            e = by_type.setdefault(name, {"type": name, "type_id": t["type_id"], "tensors": 0, "bytes": 0})
            e["tensors"] += 1
            e["bytes"] += size
        rows.append((t["relative_offset"], size, t["name"]))
    out = {"label": LABEL, "assumptions": list(ASSUMPTIONS), "interpreted_types": list(by_type.values()),
           "unresolved": unresolved, "total_bytes": None, "tiles_data_section": False, "first_mismatch": None}
    if unresolved:
        return out
    out["total_bytes"] = sum(size for _, size, _ in rows)
    out.update(_tiling(sorted(rows), details["alignment"], record["artifact"]["size"] - details["data_offset"]))
    return out


def interpretations(record: dict) -> dict | None:
    """The record's ``interpretations`` block, ``{"modern_ggml": {"evidence": false, ...}}``, or None when
    there is nothing to interpret (docs/inspect.md §Interpretation under modern ggml)."""
    it = interpret(record)
    return None if it is None else {"modern_ggml": {"evidence": False, **it}}


def _tiling(rows: list[tuple[int, int, str]], alignment: int, data_bytes: int) -> dict:
    """Whether tensors at ``rows`` (relative offset, size, name) tile a data section of ``data_bytes``."""
    at = end = 0
    for offset, size, name in rows:
        if size == 0:
            continue
        if offset != at:
            return {"tiles_data_section": False, "first_mismatch": {
                "tensor": name, "relative_offset": offset, "expected_offset": at}}
        at = _align(offset + size, alignment)
        end = offset + size
    if rows and at != data_bytes and end != data_bytes:
        return {"tiles_data_section": False, "first_mismatch": {
            "tensor": rows[-1][2], "data_section_bytes": data_bytes, "expected_end": at}}
    return {"tiles_data_section": True, "first_mismatch": None}


def _type_name(type_id: int) -> str:
    from gguf.constants import GGMLQuantizationType

    return GGMLQuantizationType(type_id).name
