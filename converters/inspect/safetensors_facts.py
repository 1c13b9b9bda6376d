"""Evidence facts of safetensors files and sharded HF directories.

Rows use name order (docs/inspect.md §Facts and queries) with JSON-order shapes as decimal strings; unknown dtypes keep their
declared range with ``storage_validation: "unknown"`` and a limitation. A sharded directory lists every
shard's header and the index ↔ shard agreement (checked by :mod:`converters.sources.hf`), and the index's
``total_size`` compared with the declared tensor bytes.
"""

from __future__ import annotations

from converters.inspect.values import dims_json
from converters.sources.hf import HFCheckpoint
from converters.sources.safetensors import STHeader

JSON_ORDER = "json_order"


def _rows(tensors, *, data_start: dict, file_of: dict | None = None) -> list[dict]:
    rows = []
    for i, t in enumerate(sorted(tensors, key=lambda t: t.name)):
        start = data_start[t.name]
        row = {
            "index": i, "name": t.name, "type": t.dtype, "type_id": None, "shape": dims_json(t.shape),
            "data_offsets": [t.begin, t.end], "file_offset": start + t.begin, "byte_length": t.end - t.begin,
            "storage_validation": t.storage_validation, "parameter_count": t.elements,
        }
        if file_of is not None:
            row["file"] = file_of[t.name]
        rows.append(row)
    return rows


def _limitations(rows: list[dict]) -> list[dict]:
    out: dict[str, dict] = {}
    for r in rows:
        if r["storage_validation"] == "unknown":
            out.setdefault(r["type"], {
                "code": "unknown_dtype", "type": r["type"], "type_id": None,
                "message": f"dtype {r['type']!r} is not known: its declared range is kept, shape-to-storage "
                           "validation is unavailable", "candidates": [], "tensors": []})["tensors"].append(r["index"])
    return list(out.values())


def _metadata_rows(meta: dict[str, str]) -> list[dict]:
    return [{"index": i, "key": k, "type": "STRING", "value": v} for i, (k, v) in enumerate(meta.items())]


def safetensors_facts(hdr: STHeader) -> dict:
    rows = _rows(hdr.tensors, data_start={t.name: hdr.data_start for t in hdr.tensors})
    return {
        "format": "safetensors",
        "details": {"header_json_bytes": hdr.json_length, "data_start": hdr.data_start,
                    "data_bytes": hdr.file_size - hdr.data_start, "tensor_count": len(hdr.tensors),
                    "metadata_count": len(hdr.metadata), "shape_order": JSON_ORDER, "row_order": "name"},
        "metadata": _metadata_rows(hdr.metadata),
        "tensors": rows,
        "limitations": _limitations(rows),
        "chat_template": {"present": False, "default": False, "named": [], "listed_without_content": [],
                          "source": None, "note": "a single safetensors file carries no tokenizer files"},
        "retained_bytes": hdr.retained_bytes,
    }


def hf_chat_template(ckpt: HFCheckpoint) -> dict:
    """Template content in ``chat_template.jinja``, ``chat_template.json`` or ``tokenizer_config.json``."""
    default, named, sources = False, [], []
    if "chat_template.jinja" in ckpt.resource_files:
        default = True
        sources.append("chat_template.jinja")
    for fname in ("chat_template.json", "tokenizer_config.json"):
        if fname not in ckpt.resource_files:
            continue
        value = ckpt.read_side_json(fname)
        tpl = value.get("chat_template") if isinstance(value, dict) else None
        if isinstance(tpl, str) and tpl:
            default = True
            sources.append(f"{fname}:chat_template")
        elif isinstance(tpl, list):
            for item in tpl:
                if isinstance(item, dict) and isinstance(item.get("template"), str) and item.get("name"):
                    if item["name"] == "default":
                        default = True
                    else:
                        named.append(str(item["name"]))
            sources.append(f"{fname}:chat_template")
    return {"present": bool(default or named), "default": default, "named": sorted(set(named)),
            "listed_without_content": [], "source": sources or None}


def _quantization(ckpt: HFCheckpoint) -> dict:
    """``quantization`` (convention, schemes, formats, ignored modules, quantized modules per kind) and its
    one-line ``quantized`` summary."""
    q = ckpt.quantization.describe()
    kinds: dict[str, int] = {}
    for qw in ckpt.quantized_weights.values():
        kinds[qw.kind] = kinds.get(qw.kind, 0) + 1
    q["modules"] = dict(sorted(kinds.items()))
    line = (f"{q['convention']} {', '.join(q['formats'])}: "
            + ", ".join(f"{k} x{n}" for k, n in q["modules"].items())
            + (f"; ignored: {', '.join(q['ignore'])}" if q["ignore"] else ""))
    return {"quantization": q, "quantized": line}


def hf_facts(ckpt: HFCheckpoint) -> dict:
    all_tensors, data_start, file_of, shards, retained = [], {}, {}, [], 0
    for name, src in ckpt.shards.items():
        h = src.header
        for t in h.tensors:
            all_tensors.append(t)
            data_start[t.name] = h.data_start
            file_of[t.name] = name
        retained += h.retained_bytes
        shards.append({"file": name, "header_json_bytes": h.json_length, "data_start": h.data_start,
                       "size": h.file_size, "tensor_count": len(h.tensors), "metadata": dict(h.metadata)})
    rows = _rows(all_tensors, data_start=data_start, file_of=file_of)
    declared = sum(r["byte_length"] for r in rows)
    index = None
    if ckpt.index is not None:
        index = {"file": "model.safetensors.index.json", "weight_map_entries": len(ckpt.index["weight_map"]),
                 "shards_agree": True, "total_size": ckpt.index_total_size,
                 "total_size_matches": None if ckpt.index_total_size is None
                 else ckpt.index_total_size == declared}
    limitations = _limitations(rows)
    if index is not None and index["total_size_matches"] is False:
        limitations.append({"code": "index_total_size_mismatch", "type": None, "type_id": None, "candidates": [],
                            "tensors": [], "message": f"index metadata.total_size {ckpt.index_total_size} differs "
                            f"from the {declared} tensor bytes the shards declare"})
    details = {"shards": shards, "index": index, "config_present": ckpt.config is not None,
               "model_type": (ckpt.config or {}).get("model_type"),
               "architectures": (ckpt.config or {}).get("architectures"),
               "resource_files": sorted(ckpt.resource_files), "tensor_count": len(rows),
               "declared_tensor_bytes": declared, "shape_order": JSON_ORDER, "row_order": "name"}
    if ckpt.quantization is not None:  # a prequantized checkpoint (docs/prequantized.md §Detection)
        details.update(_quantization(ckpt))
    return {
        "format": "safetensors-sharded" if ckpt.index is not None else "safetensors-directory",
        "details": details,
        "metadata": _metadata_rows(ckpt.metadata),
        "tensors": rows,
        "limitations": limitations,
        "chat_template": hf_chat_template(ckpt),
        "retained_bytes": retained,
    }
