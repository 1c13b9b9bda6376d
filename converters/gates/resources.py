"""Resources (container §9.1): bytes identical to the source's, and to the sha256 provenance records.

With a source, the text frontend is rebuilt exactly as the converter does (``converters.frontend``: copied
byte-for-byte from an HF directory, or rebuilt from GGUF tokenizer metadata) and compared with the
artifact's resources (``verify`` gate 6). Without one, each resource is still hashed and compared with its
``provenance.objects[id].sha256`` (``validate`` Gate E, and ``verify`` gate 6's partial check).
"""

from __future__ import annotations

import hashlib

from converters.gates.codes import Issue


def resource_table(art) -> list[tuple[str, str, str]]:
    """``(component, role, object id)`` of every resource a component names."""
    return [(cid, role, oid) for cid, comp in art.components.items() for role, oid in comp.resources.items()]


def recorded_sha256(art, object_id: str, role: str) -> str | None:
    prov = art.provenance
    objects = prov.get("objects") if isinstance(prov.get("objects"), dict) else {}
    entry = objects.get(object_id)
    if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    front = prov.get("frontend") if isinstance(prov.get("frontend"), dict) else {}
    entry = front.get(role)
    if isinstance(entry, dict) and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    return None


def check_recorded_hashes(art) -> tuple[list[Issue], int]:
    """Resources whose bytes differ from their recorded sha256; and how many had a recorded hash."""
    issues, checked = [], 0
    for cid, role, oid in resource_table(art):
        want = recorded_sha256(art, oid, role)
        if want is None:
            continue
        checked += 1
        got = hashlib.sha256(art.resource(oid)).hexdigest()
        if got != want:
            issues.append(Issue("NINFER_SUPPLY_RESOURCE_HASH", f"{cid} resource {role} ({oid}): sha256 {got[:16]}…, "
                                f"provenance records {want[:16]}… (changed after conversion)", path=oid,
                                detail={"sha256": got, "recorded": want}))
    return issues, checked


def check_against_source(art, source) -> tuple[list[Issue], list[dict]]:
    """The resources the source's frontend provides (text, and the processor files it finds) against the
    artifact's, looked up by role in every component's table; rows for the report."""
    from converters.frontend import frontend_resources

    fr = frontend_resources(source)
    table: dict[str, str] = {}
    for cid in sorted(art.components, key=lambda c: c != "text"):  # text first; processor files sit elsewhere
        for role, oid in art.components[cid].resources.items():
            table.setdefault(role, oid)
    issues, rows = [], []
    for role, data in fr.files.items():
        oid = table.get(role)
        origin = (fr.provenance.get(role) or {}).get("origin", "")
        if oid is None:
            issues.append(Issue("VERIFY_RESOURCE_MISSING", f"resource {role} ({origin} from the source) is in no "
                                "component's resource table", path="$.components"))
            rows.append({"role": role, "status": "missing"})
            continue
        got = art.resource(oid)
        same = got == data
        rows.append({"role": role, "object": oid, "origin": origin, "bytes": len(got),
                     "status": "identical" if same else "differs"})
        if not same:
            first = next((i for i, (x, y) in enumerate(zip(got, data, strict=False)) if x != y), min(len(got), len(data)))
            issues.append(Issue("VERIFY_RESOURCE_MISMATCH", f"resource {role} ({oid}) differs from the one the "
                                f"source gives ({origin}): {len(got)} vs {len(data)} bytes, first difference at byte "
                                f"{first}", path=oid, detail={"sha256": hashlib.sha256(got).hexdigest(),
                                                              "source_sha256": hashlib.sha256(data).hexdigest()}))
    return issues, rows
