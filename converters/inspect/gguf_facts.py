"""Evidence facts of a GGUF header: format details, metadata rows, tensor rows, limitations, chat template.

Tensor rows keep directory order and GGUF's fastest-first dims (docs/inspect.md §Facts and queries).
Limitations follow that page for the historical type-id ambiguities (see :mod:`converters.sources.gguf_types`):
they name the affected rows, the candidates, and what stays unknown (byte lengths and the totals they
feed). Facts only: nothing here reads tensor data.
"""

from __future__ import annotations

from gguf.constants import GGUFValueType

from converters.inspect.values import dims_json, gguf_value_json
from converters.sources.gguf_header import SPEC_ALIGNMENT_MULTIPLE, GGUFHeader, TensorInfo
from converters.sources.gguf_split import prefix_of
from converters.sources.gguf_values import BOOL_NOT_CANONICAL, NOT_UTF8

CHAT_TEMPLATE = "tokenizer.chat_template"
CHAT_TEMPLATE_PREFIX = "tokenizer.chat_template."
CHAT_TEMPLATE_NAMES = "tokenizer.chat_templates"


def metadata_rows(hdr: GGUFHeader) -> list[dict]:
    """One row per key; a value ggml loads but that is not canonical (docs/inspect.md §Non-canonical
    metadata values) carries ``limitations``: per code, the count and the first occurrence."""
    rows = []
    for e in hdr.metadata:
        row = {"index": e.index, "key": e.key, "type": GGUFValueType(e.vtype).name}
        if e.vtype == GGUFValueType.ARRAY:
            row.update(gguf_value_json(e.value, e.vtype))
        else:
            row["value"] = gguf_value_json(e.value, e.vtype)
        if e.notes.found:
            row["limitations"] = [dict(rec, first=dict(rec["first"])) for rec in e.notes.found.values()]
        rows.append(row)
    return rows


VALUE_MESSAGES = {
    NOT_UTF8: "string value(s) not valid UTF-8: kept as exact bytes (bytes_hex), as ggml reads strings",
    BOOL_NOT_CANONICAL: "BOOL byte(s) other than 0/1: reported true, as ggml reads them (non-zero)",
}


def header_limitations(hdr: GGUFHeader) -> list[dict]:
    """File-level limitations of the header: non-canonical metadata values (naming the rows), an
    alignment below the spec's multiple of 8, tensor bytes declared in a metadata-only file."""
    out = []
    for code, message in VALUE_MESSAGES.items():
        rows = [e.index for e in hdr.metadata if code in e.notes.found]
        if rows:
            out.append({"code": code, "type": None, "type_id": None, "candidates": [], "tensors": [],
                        "metadata": rows, "message": message})
    if hdr.alignment % SPEC_ALIGNMENT_MULTIPLE:
        out.append({"code": "alignment_below_spec", "type": None, "type_id": None, "candidates": [], "tensors": [],
                    "message": f"general.alignment {hdr.alignment} is a power of two ggml accepts but not the "
                    f"multiple of {SPEC_ALIGNMENT_MULTIPLE} the GGUF spec asks for"})
    if not hdr.data_present:
        out.append({"code": "tensor_data_absent", "type": None, "type_id": None, "candidates": [],
                    "tensors": [t.index for t in hdr.tensors if t.elements],
                    "message": "metadata-only file (ggml only_meta): it ends at the data offset, so the declared "
                    "tensor bytes are not in it; offsets and lengths are declarations only"})
    return out


def _limitation(t: TensorInfo) -> tuple[str, str, tuple] | None:
    """(code, message, candidates) for a row whose storage the declaration leaves open."""
    g = t.gtype
    if t.elements == 0 and g.status != "unknown":
        return None
    if g.status == "layout_ambiguous" and g.type_id == 9:
        return ("q8_1_layout_unknown", "Q8_1 has two published layouts (40 or 36 bytes per 32 elements) under "
                "the same GGUF v3 / quantization version 2; byte length unknown", g.candidates)
    if g.status == "layout_ambiguous":
        return ("k_quant_block_unknown", f"{g.name}: K-quant blocks were 64 elements under b1500 LLAMA_QKK_64 "
                "and 256 by default, undistinguished by the file; only the 64-element row multiple is "
                "enforced; byte length unknown", g.candidates)
    if g.status == "ambiguous":
        return ("type_id_ambiguous", f"type id {g.type_id} had several published meanings before ggml PR 6050 "
                "pinned the ids; byte length unknown", g.candidates)
    if g.status == "q2_0" and t.block is None:
        return ("q2_0_layout_unresolved", "type id 42 (Q2_0) is PrismML legacy 128/34 or official 64/18; the "
                f"tensor's data range does not decide it ({t.q2_0_reason})", g.candidates)
    if g.status == "unknown":
        return ("unknown_type_id", f"type id {g.type_id} is not a known GGML type; byte length unknown", ())
    return None


def tensor_rows(hdr: GGUFHeader) -> tuple[list[dict], list[dict]]:
    rows, limits = [], {}
    for t in hdr.tensors:
        row = {
            "index": t.index, "name": t.name, "type": t.type_name, "type_id": t.type_id,
            "shape": dims_json(t.dims), "n_dims": len(t.dims), "relative_offset": t.rel_offset,
            "file_offset": t.file_offset, "byte_length": t.byte_length,
            "storage_validation": t.storage_validation, "parameter_count": t.elements,
        }
        if t.block is not None:
            row["block"] = list(t.block)
        if t.gtype.status == "q2_0" and t.block is not None:
            row["resolution"] = {"from": "data_range", "reason": t.q2_0_reason, "data_range": t.data_range}
        rows.append(row)
        lim = _limitation(t)
        if lim is not None:
            code, message, candidates = lim
            entry = limits.setdefault((code, t.type_id), {
                "code": code, "type": t.type_name, "type_id": t.type_id, "message": message,
                "candidates": list(candidates), "tensors": []})
            entry["tensors"].append(t.index)
    return rows, list(limits.values())


def chat_template(hdr: GGUFHeader) -> dict:
    """Presence of template *content*; a names-only ``tokenizer.chat_templates`` list establishes none."""
    keys = {e.key: e for e in hdr.metadata}
    default = CHAT_TEMPLATE in keys and keys[CHAT_TEMPLATE].vtype == GGUFValueType.STRING
    named = sorted(k[len(CHAT_TEMPLATE_PREFIX):] for k, e in keys.items()
                   if k.startswith(CHAT_TEMPLATE_PREFIX) and e.vtype == GGUFValueType.STRING)
    listed = []
    if CHAT_TEMPLATE_NAMES in keys:
        v = keys[CHAT_TEMPLATE_NAMES].value
        listed = [n for n in getattr(v, "preview", []) if isinstance(n, str) and n not in named]
    return {"present": bool(default or named), "default": default, "named": named,
            "listed_without_content": listed, "source": "gguf_metadata"}


def _details(hdr: GGUFHeader) -> dict:
    return {"version": hdr.version, "byte_order": hdr.byte_order, "alignment": hdr.alignment,
            "alignment_source": hdr.alignment_source, "tensor_count": len(hdr.tensors),
            "metadata_count": len(hdr.metadata), "directory_end": hdr.header_length,
            "data_offset": hdr.data_offset, "shape_order": "fastest_first", "data_present": hdr.data_present}


def _meta_only_unknowns(present: bool) -> list[str]:
    return [] if present else [
        "tensor data: a metadata-only file holds none of the declared tensor bytes (ranges are declarations)"]


def gguf_facts(hdr: GGUFHeader) -> dict:
    tensors, limitations = tensor_rows(hdr)
    return {
        "format": "gguf",
        "details": _details(hdr),
        "metadata": metadata_rows(hdr),
        "tensors": tensors,
        "limitations": limitations + header_limitations(hdr),
        "unknowns": _meta_only_unknowns(hdr.data_present),
        "chat_template": chat_template(hdr),
        "retained_bytes": hdr.retained_bytes,
    }


def gguf_split_facts(src) -> dict:
    """The facts of a gguf-split set (``src``: :class:`~converters.sources.gguf.GGUFSplitSource`; docs/inspect.md
    §Split GGUF files): the first shard's metadata, tensor rows numbered across the set with their ``file``
    and ``shard``, per-shard details, and limitations carrying the ``file`` they come from."""
    rows, limitations, shards = [], [], []
    for k, (name, s) in enumerate(src.shards.items()):
        hdr, base = s.header, len(rows)
        shard_rows, shard_limits = tensor_rows(hdr)
        for r in shard_rows:
            r.update(index=base + r["index"], file=name, shard=k)
        for lim in shard_limits + header_limitations(hdr):
            limitations.append({**lim, "tensors": [base + i for i in lim["tensors"]], "file": name})
        rows += shard_rows
        detail = {"file": name, "split_no": k, **_details(hdr), "size": hdr.file_size, "first_tensor": base}
        if k:
            detail["metadata"] = metadata_rows(hdr)
        shards.append(detail)
    first = src.shards[src.path.name].header
    present = all(s.header.data_present for s in src.shards.values())
    prefix = prefix_of(src.path, src.split)
    return {
        "format": "gguf-split",
        "details": {
            "version": first.version, "byte_order": first.byte_order, "tensor_count": len(rows),
            "metadata_count": len(first.metadata), "shape_order": "fastest_first", "data_present": present,
            "split": {"count": src.split.count, "tensors_count": src.split.tensors, "prefix": prefix},
            "shards": shards,
        },
        "metadata": metadata_rows(first),
        "tensors": rows,
        "limitations": limitations,
        "unknowns": _meta_only_unknowns(present),
        "chat_template": chat_template(first),
        "retained_bytes": sum(s.header.retained_bytes for s in src.shards.values()),
    }
