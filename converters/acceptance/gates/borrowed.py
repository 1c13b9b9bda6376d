"""Objects borrowed from a template (docs/ternary.md §3, §6): identical to the template's bytes, not to the source.

An artifact built with ``--template TPL`` holds objects copied byte-for-byte from the template (vision, MTP,
the frontend; provenance ``objects[id].borrowed_from``). The source never had them (a GGUF has no vision
tower) or had other ones (tokenizer files rebuilt from GGUF metadata), so ``verify`` does not compare them
with the source: each borrowed object's bytes must equal the template object's (``verify`` gates 4 and 6,
``VERIFY_BORROWED_MISMATCH``). What they are compared with, first available first:

1. the template given explicitly (``convert verify --template TPL``);
2. the ``sha256`` provenance records for the object;
3. the template at the path provenance records (``borrowed_from``).

None of these → ``VERIFY_BORROWED_UNCHECKED``. Bytes are read in :data:`CHUNK` pieces from both sides.

A non-text component whose own objects (those no other component's binding also names) are all borrowed is
*borrowed*: the source is not asked for it (:func:`borrowed_components`), and neither is a parameter whose
every bound object is borrowed (:func:`parameter_borrowed`). Shared bindings (the MTP head bound to the text
head) stay checked with the component that produced the object.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from converters.acceptance.gates.codes import finding
from converters.acceptance.report import Finding
from ninfer_core.errors import NinferError

CHUNK = 64 * 1024 * 1024
IDENTICAL = "borrowed, identical to template"


def borrowed_entries(art) -> dict[str, dict]:
    """Object id → its provenance entry, for every object provenance calls borrowed."""
    objects = art.provenance.get("objects") if isinstance(art.provenance, dict) else None
    if not isinstance(objects, dict):
        return {}
    return {oid: e for oid, e in objects.items() if isinstance(e, dict) and "borrowed_from" in e}


def binding_objects(binding) -> set[str]:
    if binding.object is not None:
        return {binding.object}
    return {p.object for p in binding.parts or ()}


def parameter_borrowed(art, name: str, borrowed) -> bool:
    """Whether every object ``name``'s binding names is borrowed."""
    b = art.bindings.get(name)
    refs = binding_objects(b) if b is not None else set()
    return bool(refs) and refs <= set(borrowed)


def borrowed_components(art, borrowed) -> set[str]:
    """Non-text components whose own objects (named by their bindings and resources, not by another
    component's) are all borrowed."""
    own: dict[str, set[str]] = {}
    for name, b in art.bindings.items():
        own.setdefault(name.split("/", 1)[0], set()).update(binding_objects(b))
    for cid, comp in art.components.items():
        own.setdefault(cid, set()).update(comp.resources.values())
    out = set()
    for cid in art.components:
        if cid == "text":
            continue
        others = set().union(*(refs for c, refs in own.items() if c != cid))
        private = own.get(cid, set()) - others
        if private and private <= set(borrowed):
            out.add(cid)
    return out


class _Templates:
    """Open templates, by path; closed together."""

    def __init__(self, explicit):
        self.explicit = None if explicit is None else Path(explicit)
        self.open: dict[Path, object] = {}
        self.errors: dict[Path, str] = {}

    def get(self, path: Path):
        from ninfer_core import open_artifact

        if path not in self.open and path not in self.errors:
            try:
                self.open[path] = open_artifact(path)
            except (NinferError, OSError) as exc:
                self.errors[path] = getattr(exc, "message", None) or str(exc)
        return self.open.get(path)

    def close(self) -> None:
        for t in self.open.values():
            t.close()


def _chunks(art, offset: int, size: int):
    for off in range(0, size, CHUNK):
        view = art.read_range(offset + off, min(CHUNK, size - off))
        data = bytes(view)
        view.release()
        yield data


def _sha256(art, rec) -> str:
    h = hashlib.sha256()
    for data in _chunks(art, rec.offset, rec.bytes):
        h.update(data)
    return h.hexdigest()


def _first_difference(art, rec, tpl, trec) -> int | None:
    """The first differing byte of the two objects (None when equal)."""
    if rec.bytes != trec.bytes:
        return 0
    for off, (a, b) in enumerate(zip(_chunks(art, rec.offset, rec.bytes), _chunks(tpl, trec.offset, trec.bytes),
                                     strict=True)):
        if a != b:
            return off * CHUNK + next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return None


def check_borrowed(art, template=None) -> tuple[list[Finding], list[dict]]:
    """Every borrowed object against its template (see the module docstring); issues and one row per object."""
    templates = _Templates(template)
    issues, rows = [], []
    try:
        for oid, entry in borrowed_entries(art).items():
            rec = art.object(oid)
            row = {"object": oid, "kind": rec.kind, "bytes": rec.bytes}
            recorded = entry.get("sha256") if isinstance(entry.get("sha256"), str) else None
            path = templates.explicit or (Path(entry["borrowed_from"]) if isinstance(entry["borrowed_from"], str)
                                          else None)
            tpl = templates.get(path) if path is not None and (templates.explicit or recorded is None) else None
            if tpl is not None:
                row["against"] = str(path)
                trec = tpl.object(oid) if oid in {o.id for o in tpl.objects} else None
                if trec is None or trec.kind != rec.kind or getattr(trec, "format", None) != getattr(rec, "format", None):
                    what = "lacks it" if trec is None else f"holds a {trec.kind} {getattr(trec, 'format', '') or ''}"
                    issues.append(finding("VERIFY_BORROWED_MISMATCH", f"borrowed {oid}: the template {path.name} {what}",
                                        path=oid))
                    rows.append({**row, "status": "differs"})
                    continue
                first = _first_difference(art, rec, tpl, trec)
                if first is not None:
                    issues.append(finding("VERIFY_BORROWED_MISMATCH", f"borrowed {oid} differs from the template "
                                        f"{path.name}: {rec.bytes} vs {trec.bytes} bytes, first difference at byte "
                                        f"{first}", path=oid, detail={"first_difference": first}))
                rows.append({**row, "status": IDENTICAL if first is None else "differs"})
            elif recorded is not None:
                got = _sha256(art, rec)
                row["against"] = "provenance sha256"
                if got != recorded:
                    issues.append(finding("VERIFY_BORROWED_MISMATCH", f"borrowed {oid}: sha256 {got[:16]}…, provenance "
                                        f"records the template's {recorded[:16]}…", path=oid,
                                        detail={"sha256": got, "recorded": recorded}))
                rows.append({**row, "status": IDENTICAL if got == recorded else "differs"})
            else:
                why = templates.errors.get(path, "no template path recorded") if path is not None else \
                    "no template path recorded"
                issues.append(finding("VERIFY_BORROWED_UNCHECKED", f"borrowed {oid}: no sha256 recorded and the "
                                    f"template cannot be opened ({why}); pass --template TPL", path=oid))
                rows.append({**row, "status": "unchecked"})
    finally:
        templates.close()
    return issues, rows


def template_text_config(art, template=None) -> dict | None:
    """The text config of the template the borrowed objects came from (explicit, else the first path provenance
    records), or None when it cannot be opened. A borrowed MTP head's geometry is the template's text model's
    (``mtp_num_hidden_layers``), which the produced text config may not carry."""
    paths = [Path(template)] if template is not None else []
    paths += [Path(e["borrowed_from"]) for e in borrowed_entries(art).values() if isinstance(e["borrowed_from"], str)]
    templates = _Templates(None)
    try:
        tpl = templates.get(paths[0]) if paths else None
        text = tpl.components.get("text") if tpl is not None else None
        return dict(text.config) if text is not None else None
    finally:
        templates.close()


def summary(rows: list[dict]) -> dict:
    """Evidence: borrowed objects and bytes by prefix, and how many are identical to the template."""
    by_prefix = Counter(r["object"].split("/", 1)[0] for r in rows)
    return {"objects": len(rows), "bytes": sum(r["bytes"] for r in rows), "by_prefix": dict(sorted(by_prefix.items())),
            "identical": sum(r["status"] == IDENTICAL for r in rows)}


__all__ = ["IDENTICAL", "borrowed_components", "borrowed_entries", "check_borrowed", "parameter_borrowed", "summary",
           "template_text_config"]
