"""Evidence facts of a ``.ninfer`` artifact (single file or entry + continuation parts), read through
``ninfer_core.open_artifact`` (container spec §3–§11).

The entry header and JSON directory are read once here (exactly ``[0, 32 + json_bytes)``, for the header
digest and the 100,000,000-byte cap / 32 MiB budget checks) and then by ``ninfer_core``, which applies every
directory rule; its typed errors become ``file_format_rejected`` source errors keeping their rule, JSON path
and section. Reported: header, files (each part's on-disk state: a missing or foreign part is recorded,
not fatal — §11.1 fails only the reads that need it), components, objects (format, layout, shape, bytes,
offset, encoded-size check, the files each spans), binding coverage, uses, resources, metadata, provenance,
and the acceptance record beside the entry (``acceptance``: docs/acceptance.md §Acceptance record).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from converters.acceptance.record import read as read_record
from converters.errors import SourceError, SourceFormatError
from converters.inspect.run import InspectedFile, finish
from converters.inspect.values import dims_json
from converters.sources.fileio import OpenFile, symlink_leaving
from converters.sources.limits import HEADER_CAP, ROW_COST, RetainedBudget, limit_error
from ninfer_core import open_artifact
from ninfer_core.container.encoding import check_object_encoding
from ninfer_core.errors import EncodingError, NinferError, ReadError

ENTRY_MAGIC = b"NINFER\x00\x03"
HEADER_BYTES = 32
UNKNOWN_ENCODING_RULES = {"unknown_format", "unknown_layout", "unknown_encoding"}
PART_STATES = {"part_missing": "missing", "part_unreadable": "unreadable", "part_length": "wrong_length",
               "part_magic": "bad_magic", "part_artifact_id": "foreign_artifact", "part_index": "wrong_part_index",
               "io_error": "unreadable", "short_read": "wrong_length"}


def _wrap(exc: NinferError, path) -> SourceError:
    """A ninfer_core error as a typed source error (rule, JSON path and section kept)."""
    if isinstance(exc, ReadError) and exc.rule == "io_error":
        from converters.sources.fileio import SourceIOError

        return SourceIOError(exc.message, file=exc.file or str(path), rule=exc.rule, section=exc.section,
                             diagnostics={"path": exc.file or str(path), "reason": exc.message})
    return SourceFormatError(exc.message, file=exc.file or str(path), json_path=exc.json_path,
                             section=exc.section, rule=exc.rule)


def _read_header(f: OpenFile) -> tuple[bytes, int]:
    if f.size < HEADER_BYTES:
        raise SourceFormatError(f"file has {f.size} bytes, fewer than the 32-byte entry header", file=str(f.path),
                                rule="entry_too_short", section="§3.1")
    head = f.pread(HEADER_BYTES, 0)
    if head[:8] != ENTRY_MAGIC:
        raise SourceFormatError(f"bad entry magic {head[:8].hex(' ')}", file=str(f.path), rule="entry_magic",
                                section="§3.1")
    json_bytes = int.from_bytes(head[8:16], "little")
    if HEADER_BYTES + json_bytes > HEADER_CAP:
        raise limit_error(f"json_bytes = {json_bytes}: the header exceeds the {HEADER_CAP}-byte cap",
                          file=str(f.path), rule="header_cap", json_path="json_bytes")
    if HEADER_BYTES + json_bytes > f.size:
        raise SourceFormatError(f"json_bytes = {json_bytes} runs past the end of the {f.size}-byte file",
                                file=str(f.path), rule="json_bytes_range", section="§3.1")
    return head + f.pread(json_bytes, HEADER_BYTES), json_bytes


def _spans(obj, files) -> list[dict]:
    out = []
    a, b = obj.offset, obj.offset + obj.bytes
    for fe in files:
        lo, hi = max(a, fe.payload_offset), min(b, fe.payload_end)
        if lo < hi:
            start = fe.payload_start + (lo - fe.payload_offset)
            out.append({"file": fe.index, "payload_range": [lo, hi], "file_range": [start, start + hi - lo]})
    return out


def _union(ranges: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for lo, hi in sorted(ranges):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def _binding_json(b) -> dict:
    if b.object is not None:
        return {"object": b.object}
    return {"parts": [{"object": p.object, "range": list(p.range)} for p in b.parts]}


def _binding_ranges(b, index) -> list[tuple[str, int, int]]:
    if b.object is not None:
        obj = index.get(b.object)
        n = 1
        for d in getattr(obj, "shape", None) or ():
            n *= d
        return [(b.object, 0, n)]
    return [(p.object, p.range[0], p.range[1]) for p in b.parts]


def _objects(art, path) -> tuple[list[dict], list[dict], dict]:
    rows, unknown = [], []
    for i, obj in enumerate(art.objects):
        validation = "consistent"
        try:
            check_object_encoding(obj, json_path=art.object_json_path(obj.id), file=str(path))
        except EncodingError as exc:
            if exc.rule not in UNKNOWN_ENCODING_RULES:
                raise _wrap(exc, path) from None
            validation = "unknown"
            unknown.append(i)
        spans = _spans(obj, art.files)
        tensor = obj.kind == "tensor"
        n = 1
        for d in obj.shape or ():
            n *= d
        row = {"index": i, "name": obj.id, "kind": obj.kind, "type": obj.format if tensor else "resource",
               "type_id": None, "layout": obj.layout if tensor else obj.encoding,
               "shape": dims_json(obj.shape) if tensor else None, "offset": obj.offset,
               "file_offset": spans[0]["file_range"][0] if spans else None, "byte_length": obj.bytes,
               "storage_validation": validation, "parameter_count": n if tensor else 0,
               "files": spans, "spans_files": len(spans)}
        if tensor and obj.divisors != 1:
            row["divisors"] = obj.divisors
        rows.append(row)
    limitations = []
    if unknown:
        limitations.append({"code": "unknown_encoding", "type": None, "type_id": None, "candidates": [],
                            "tensors": unknown, "message": "format/layout/encoding unknown to this reader: the "
                            "encoded size cannot be checked (reported when the object is interpreted, §11.1)"})
    return rows, limitations, {obj.id: obj for obj in art.objects}


def _coverage(art, rows: list[dict], index: dict) -> tuple[list[dict], dict]:
    bound: dict[str, list[tuple[int, int]]] = {}
    refs: dict[str, set] = {}
    bindings = []
    for i, (name, b) in enumerate(art.bindings.items()):
        rs = _binding_ranges(b, index)
        bindings.append({"index": i, "name": name, **_binding_json(b), "elements": sum(e - s for _, s, e in rs)})
        for oid, s, e in rs:
            bound.setdefault(oid, []).append((s, e))
            refs.setdefault(oid, set()).add(name)
    for u in art.uses:
        for role, b in u.auxiliaries.items():
            for oid, s, e in _binding_ranges(b, index):
                bound.setdefault(oid, []).append((s, e))
                refs.setdefault(oid, set()).add(f"{u.parameter}@{u.input}:{role}")
    resource_ids = {oid for c in art.components.values() for oid in c.resources.values()}
    partial, unbound, total, covered = [], [], 0, 0
    for row in rows:
        if row["kind"] != "tensor":
            row["referenced_by"] = 1 if row["name"] in resource_ids else 0
            continue
        n = int(row["parameter_count"])
        got = _union(bound.get(row["name"], []))
        row["bound_elements"], row["referenced_by"] = got, len(refs.get(row["name"], ()))
        total, covered = total + n, covered + got
        if got == 0:
            unbound.append(row["name"])
        elif got < n:
            partial.append({"object": row["name"], "bound_elements": got, "elements": n})
    unused_resources = sorted(r["name"] for r in rows if r["kind"] == "resource" and r["name"] not in resource_ids)
    return bindings, {"tensor_elements": total, "bound_elements": covered,
                      "fully_bound": len([r for r in rows if r["kind"] == "tensor"]) - len(partial) - len(unbound),
                      "partially_bound": partial, "unbound_objects": unbound,
                      "unreferenced_resources": unused_resources,
                      "basis": "union of binding and use-auxiliary element ranges per object"}


def _part_files(art, problems: dict, opened: list) -> tuple[list[dict], list[InspectedFile]]:
    rows, inspected = [], []
    for fe in art.files:
        loc = Path(fe.location) if fe.location is not None else art.path
        err = problems.get(fe.index)
        row = {"index": fe.index, "path": fe.path, "location": str(loc), "payload_bytes": fe.payload_bytes,
               "payload_range": [fe.payload_offset, fe.payload_end], "payload_start": fe.payload_start,
               "expected_file_bytes": fe.file_bytes, "state": "ok" if err is None else PART_STATES.get(err.rule, "bad"),
               "size": None, "error": None if err is None else {"rule": err.rule, "message": err.message}}
        rows.append(row)
        if fe.index == 0 or not loc.is_file():
            continue
        try:
            f = OpenFile(loc)
        except SourceError:
            continue
        opened.append(f)
        row["size"] = f.size
        head = f.pread(min(HEADER_BYTES, f.size), 0) if f.size else b""
        h = hashlib.sha256(head)
        inspected.append(InspectedFile(loc.name, f"part-{fe.index:04d}", loc, f.size, f.identity, len(head),
                                       h.hexdigest(), len(head), [[0, len(head)]] if head else [], f=f, hasher=h))
    return rows, inspected


def _symlinks_leaving(parts: list[dict], entry: Path) -> list[dict]:
    """A warning per file of the set that is a symlink leaving the artifact's directory (validate makes it
    the error ``NINFER_SYMLINK_ESCAPE``; docs/validation-codes.md)."""
    out = []
    for p in parts:
        target = symlink_leaving(p["location"], entry.parent)
        if target is not None and target.exists():
            out.append({"code": "part_symlink_outside", "type": None, "type_id": None, "candidates": [], "tensors": [],
                        "message": f"files[{p['index']}] {p['path']!r} is a symlink to {target}, outside the "
                                   "artifact's directory (the set does not move as a whole, §2.1)"})
    return out


def _chat_template(art) -> dict:
    roles = [(cid, role) for cid, c in art.components.items() for role in c.resources]
    tpl = [f"{cid}:{role}" for cid, role in roles if "chat_template" in role]
    tok_cfg = [f"{cid}:{role}" for cid, role in roles if role == "tokenizer_config.json"]
    present = True if tpl else (None if tok_cfg else False)
    return {"present": present, "default": bool(tpl), "named": [], "listed_without_content": [],
            "source": tpl or None, "undetermined": [] if tpl else tok_cfg,
            "note": "resource content is not read in an inspection; a tokenizer_config.json resource may "
                    "embed a template" if present is None else None}


def _json_type(v) -> str:
    """The JSON type of a metadata value (mappings of any class are objects, sequences arrays)."""
    from collections.abc import Mapping

    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    return "number"


def ninfer_facts(art, path, budget: RetainedBudget, json_bytes: int, parts: list[dict]) -> dict:
    rows, limitations, index = _objects(art, path)
    bindings, coverage = _coverage(art, rows, index)
    bad_parts = [p for p in parts if p["state"] != "ok"]
    for p in bad_parts:
        hit = [r["index"] for r in rows if any(s["file"] == p["index"] for s in r["files"])]
        limitations.append({"code": "part_unavailable", "type": None, "type_id": None, "candidates": [],
                            "tensors": hit, "message": f"files[{p['index']}] {p['path']!r} is {p['state']}: "
                            f"reads of the {len(hit)} object(s) it holds would fail (§11.1)"})
    limitations += _symlinks_leaving(parts, Path(path))
    components = [{"id": cid, "config": dict(c.config), "target": c.target, "resources": dict(c.resources),
                   "proposal": c.proposal.to_json() if c.proposal is not None else None}
                  for cid, c in art.components.items()]
    resources = [{"component": cid, "role": role, "object": oid, "bytes": index[oid].bytes}
                 for cid, c in art.components.items() for role, oid in c.resources.items()]
    uses = [{"index": i, "parameter": u.parameter, "input": u.input, "activation_policy": u.activation_policy,
             "auxiliaries": {k: _binding_json(b) for k, b in u.auxiliaries.items()}} for i, u in enumerate(art.uses)]
    metadata = [{"index": i, "key": k, "type": _json_type(v), "value": v} for i, (k, v) in enumerate(art.metadata.items())]
    return {
        "format": "ninfer",
        "details": {"artifact_id": art.artifact_id, "container_version": 3, "json_bytes": json_bytes,
                    "entry_payload_start": art.entry_payload_start, "payload_bytes": art.payload_bytes,
                    "file_count": len(art.files), "components": sorted(art.components),
                    "object_count": len(rows), "binding_count": len(bindings), "use_count": len(uses),
                    "shape_order": "c_order", "row_order": "directory"},
        "metadata": metadata,
        "tensors": rows,
        "limitations": limitations,
        "chat_template": _chat_template(art),
        "retained_bytes": budget.used,
        "digest_incomplete": bool(bad_parts),
        "unknowns": [f"contents of files[{p['index']}] ({p['state']})" for p in bad_parts],
        "extra": {"acceptance": read_record(path, art.artifact_id), "files": parts, "components": components, "bindings": bindings, "binding_coverage": coverage,
                  "uses": uses, "resources": resources, "provenance": dict(art.provenance)},
    }


def inspect_ninfer(path: Path, *, hash_mode: str, progress=None, buffer_bytes: int) -> dict:
    entry = OpenFile(path)
    opened = [entry]
    try:
        header, json_bytes = _read_header(entry)
        budget = RetainedBudget(str(path))
        budget.charge(header.count(b"{") * ROW_COST + json_bytes, "ninfer directory rows")
        hasher = hashlib.sha256(header)
        try:
            art = open_artifact(path)
        except NinferError as exc:
            raise _wrap(exc, path) from None
        try:
            problems = {int(e.json_path.rsplit("[", 1)[1].rstrip("]")): e for e in art.check_files()
                        if e.json_path}
            parts, part_files = _part_files(art, problems, opened)
            facts = ninfer_facts(art, path, budget, json_bytes, parts)
        except NinferError as exc:
            raise _wrap(exc, path) from None
        finally:
            art.close()
        facts["extra"]["files"][0]["size"] = entry.size
        files = [InspectedFile(path.name, "entry", path, entry.size, entry.identity, len(header),
                               hasher.hexdigest(), len(header), [[0, len(header)]], f=entry, hasher=hasher)]
        files += part_files
        return finish(path, facts, files, hash_mode=hash_mode, single=len(art.files) == 1, progress=progress,
                      buffer_bytes=buffer_bytes)
    finally:
        for f in opened:
            f.close()
