"""Cross-record rules of the directory: object placement and every reference.

Container spec §5.3 (objects ordered by offset, one ID namespace, no overlap, inside the payload,
tensor offsets 256-aligned), §7.1 (a part names a tensor object and a range inside its logical
elements), §8 (a use names an existing binding, ``(parameter, input)`` unique, auxiliaries are
bindings), §4.2 (``target`` names a component, ``resources`` name resource objects). The §12.6 table
fixes the kinds: a repeated object ID is a directory (schema) error, overlapping ranges a range error,
a part beyond its parent's elements a reference error.
"""

from __future__ import annotations

from ninfer_core.container.framing import TENSOR_ALIGNMENT
from ninfer_core.container.jsontext import member_path
from ninfer_core.container.problems import Problems
from ninfer_core.container.records import Binding, Directory, PhysicalObject, TensorObject
from ninfer_core.errors import DirectoryReferenceError, RangeError, SchemaError


def check_directory(d: Directory, problems: Problems, invalid_object_ids: set[str] = frozenset(),
                    positions: list[int] | None = None) -> dict:
    """Report every cross-record violation of ``d``; return the object index ``id -> record``.

    ``invalid_object_ids`` are IDs of object records that failed their field table (already reported):
    references to them are not reported again. ``positions[k]`` is the JSON index of ``d.objects[k]``
    (they differ when invalid records were left out).
    """
    index = _check_objects(d, problems, positions or list(range(len(d.objects))))
    known = set(index) | set(invalid_object_ids)
    for name, binding in d.bindings.items():
        _check_binding(binding, member_path("$.bindings", name), index, known, problems)
    seen_uses: dict[tuple[str, str], int] = {}
    for i, use in enumerate(d.uses):
        p = f"$.uses[{i}]"
        if use.parameter not in d.bindings:
            problems.add(DirectoryReferenceError, f"use parameter {use.parameter!r} is not a binding",
                         json_path=f"{p}.parameter", section="§8", rule="reference_missing")
        key = (use.parameter, use.input)
        if key in seen_uses:
            problems.add(SchemaError, f"(parameter, input) = {key} repeats uses[{seen_uses[key]}]",
                         json_path=p, section="§8", rule="use_duplicate")
        else:
            seen_uses[key] = i
        for role, binding in use.auxiliaries.items():
            _check_binding(binding, member_path(f"{p}.auxiliaries", role), index, known, problems)
    for cid, comp in d.components.items():
        p = member_path("$.components", cid)
        if comp.target is not None and comp.target not in d.components:
            problems.add(DirectoryReferenceError, f"target {comp.target!r} is not a component",
                         json_path=f"{p}.target", section="§4.2", rule="reference_missing")
        for role, rid in comp.resources.items():
            rp = member_path(f"{p}.resources", role)
            obj = index.get(rid)
            if obj is None:
                if rid not in known:
                    problems.add(DirectoryReferenceError, f"resource {rid!r} is not an object", json_path=rp,
                                 section="§9.1", rule="reference_missing")
            elif obj.kind != "resource":
                problems.add(DirectoryReferenceError, f"{rid!r} is a {obj.kind} object, not a resource",
                             json_path=rp, section="§9.1", rule="reference_kind")
    return index


def _check_objects(d: Directory, problems: Problems, positions: list[int]) -> dict[str, PhysicalObject]:
    index: dict[str, PhysicalObject] = {}
    payload = d.payload_bytes if d.files else None
    for i, obj in enumerate(d.objects):
        p = f"$.objects[{positions[i]}]"
        if obj.id in index:
            problems.add(SchemaError, f"object ID {obj.id!r} occurs twice", json_path=f"{p}.id", section="§5.3",
                         rule="object_id_duplicate")
        else:
            index[obj.id] = obj
        if isinstance(obj, TensorObject) and obj.offset % TENSOR_ALIGNMENT:
            problems.add(RangeError, f"tensor offset {obj.offset} is not a multiple of {TENSOR_ALIGNMENT}",
                         json_path=f"{p}.offset", section="§5.3", rule="object_alignment")
        if payload is not None and obj.end > payload:
            problems.add(RangeError, f"object [{obj.offset}, {obj.end}) extends past the logical payload of "
                         f"{payload} bytes", json_path=p, section="§5.3", rule="object_out_of_payload")
        if i and obj.offset < d.objects[i - 1].offset:
            problems.add(RangeError, f"object offset {obj.offset} is below the previous object's "
                         f"{d.objects[i - 1].offset}; objects are ordered by offset",
                         json_path=f"{p}.offset", section="§5.3", rule="object_order")
    ordered = sorted(range(len(d.objects)), key=lambda k: (d.objects[k].offset, k))
    reach = None  # (index, end) of the object reaching furthest so far
    for k in ordered:
        obj = d.objects[k]
        if reach is not None and obj.offset < reach[1]:
            other = d.objects[reach[0]]
            problems.add(RangeError, f"object {obj.id!r} [{obj.offset}, {obj.end}) overlaps {other.id!r} "
                         f"[{other.offset}, {other.end}); sharing is expressed by referencing one object",
                         json_path=f"$.objects[{positions[k]}]", section="§5.3", rule="object_overlap")
        if reach is None or obj.end > reach[1]:
            reach = (k, obj.end)
    return index


def _check_binding(binding: Binding, p: str, index: dict, known: set[str], problems: Problems) -> None:
    """A binding's objects exist and are tensors; part ranges lie inside the parent's elements (§7.1)."""
    targets = [(binding.object, f"{p}.object", None)] if binding.object is not None else [
        (part.object, f"{p}.parts[{i}]", part) for i, part in enumerate(binding.parts or ())]
    for oid, path, part in targets:
        obj = index.get(oid)
        if obj is None:
            if oid not in known:
                problems.add(DirectoryReferenceError, f"object {oid!r} does not exist",
                             json_path=path if part is None else f"{path}.object", section="§7.1",
                             rule="reference_missing")
            continue
        if obj.kind != "tensor":
            problems.add(DirectoryReferenceError, f"{oid!r} is a {obj.kind} object; bindings reference tensors",
                         json_path=path if part is None else f"{path}.object", section="§7.1",
                         rule="reference_kind")
            continue
        if part is not None and part.end > obj.elements:
            problems.add(DirectoryReferenceError,
                         f"part range [{part.begin}, {part.end}) exceeds the {obj.elements} logical elements of "
                         f"{oid!r} (shape {list(obj.shape)})", json_path=f"{path}.range", section="§7.1",
                         rule="part_range")
