"""Resources (container §9.1): bytes identical to the source's, and to the sha256 provenance records.

With a source, the text frontend is rebuilt exactly as the converter does (``converters.sources.frontend``: copied
byte-for-byte from an HF directory, or rebuilt from GGUF tokenizer metadata) and compared with the
artifact's ``text`` resources, and each component's resources as its resolver reads them from the source
and its inputs (a vision tower's processor config: copied from the HF directory, or rebuilt from the
mmproj's ``clip.vision.*`` keys) with that component's (``verify`` gate 6); a resource borrowed from a template
is compared with the template instead (:mod:`converters.acceptance.gates.borrowed`), not with the source. Without one, each resource is still hashed and compared with its
``provenance.objects[id].sha256`` (``validate`` Gate E, and ``verify`` gate 6's partial check).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping

from converters.acceptance.gates.codes import finding
from converters.acceptance.report import Finding


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


def check_recorded_hashes(art) -> tuple[list[Finding], int]:
    """Resources whose bytes differ from their recorded sha256; and how many had a recorded hash."""
    issues, checked = [], 0
    for cid, role, oid in resource_table(art):
        want = recorded_sha256(art, oid, role)
        if want is None:
            continue
        checked += 1
        got = hashlib.sha256(art.resource(oid)).hexdigest()
        if got != want:
            issues.append(finding("NINFER_SUPPLY_RESOURCE_HASH", f"{cid} resource {role} ({oid}): sha256 {got[:16]}…, "
                                f"provenance records {want[:16]}… (changed after conversion)", path=oid,
                                detail={"sha256": got, "recorded": want}))
    return issues, checked


def check_against_source(art, model, components: Mapping | None = None,
                         borrowed: Collection[str] = ()) -> tuple[list[Finding], list[dict]]:
    """The text frontend the opened ``model`` provides (:meth:`converters.model.engine.Model.frontend`: the
    source's, or its ``--tokenizer-dir``'s; :data:`~converters.sources.frontend.TEXT_ROLES`) against the artifact's
    ``text`` resources, and each selected component's resources (``components``: component id →
    :class:`converters.model.components.Component`, as resolved from the source and its inputs) against that
    component's table; rows for the report. Resource objects in ``borrowed`` (copied from a template) are
    left to :func:`converters.acceptance.gates.borrowed.check_borrowed`."""
    from converters.sources.frontend import TEXT_ROLES

    fr = model.frontend()
    wanted = [("text", role, fr.files[role], (fr.provenance.get(role) or {}).get("origin", ""))
              for role in TEXT_ROLES if role in fr.files]
    for cid, comp in (components or {}).items():
        wanted += [(cid, role, data, (prov or {}).get("origin", "copied")) for role, data, prov in comp.resources]
    issues, rows = [], []
    for cid, role, data, origin in wanted:
        table = art.components[cid].resources if cid in art.components else {}
        oid = table.get(role)
        if oid in borrowed:
            continue
        if oid is None:
            issues.append(finding("VERIFY_RESOURCE_MISSING", f"{cid} resource {role} ({origin} from the source) is not "
                                f"in components.{cid}.resources", path=f"$.components.{cid}.resources"))
            rows.append({"component": cid, "role": role, "status": "missing"})
            continue
        got = art.resource(oid)
        same = got == data
        rows.append({"component": cid, "role": role, "object": oid, "origin": origin, "bytes": len(got),
                     "status": "identical" if same else "differs"})
        if not same:
            first = next((i for i, (x, y) in enumerate(zip(got, data, strict=False)) if x != y), min(len(got), len(data)))
            issues.append(finding("VERIFY_RESOURCE_MISMATCH", f"{cid} resource {role} ({oid}) differs from the one the "
                                f"source gives ({origin}): {len(got)} vs {len(data)} bytes, first difference at byte "
                                f"{first}", path=oid, detail={"sha256": hashlib.sha256(got).hexdigest(),
                                                              "source_sha256": hashlib.sha256(data).hexdigest()}))
    return issues, rows
