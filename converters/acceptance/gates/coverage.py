"""Binding coverage: every required logical parameter bound in its logical shape, with its use, and every
object consumed (container §4.2, §7, §8; docs/ternary.md §7: the runtime binder demands an exact two-way match —
a missing object is fatal, an extra one "was not consumed by the selected target").

``expected`` comes from the source's mapping (``verify --source``) or, without a source, from the text
contract and the other components' mapping files (:mod:`converters.acceptance.gates.contract`,
:mod:`converters.acceptance.gates.required`); ``text.proposal`` adds its own (§9.2). Components whose parameter list is
not known are listed in ``unchecked`` (with the reason): their bindings are not judged, but their objects
must still be consumed by something.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.contract import CONTRACT_OBJECTS, Expected, layer_of
from converters.acceptance.report import Finding
from ninfer_core import TensorObject
from ninfer_core.errors import NinferError


def binding_elements(art, binding) -> int | None:
    """Elements a binding holds (None when it names a missing or non-tensor object: reported as a reference)."""
    if binding.object is not None:
        obj = _object(art, binding.object)
        return obj.elements if isinstance(obj, TensorObject) else None
    return sum(p.elements for p in binding.parts or ())


def _object(art, object_id: str):
    try:
        return art.object(object_id)
    except NinferError:  # a missing reference is the reader's finding (NINFER_REFERENCE)
        return None


def in_layer(e: Expected, layer: int) -> bool:
    """Whether ``e`` is a parameter of text layer ``layer`` (the scope of a minimal artifact)."""
    return e.component == "text" and (e.layer if e.layer is not None else layer_of(e.name)) == layer


def consumed_objects(art) -> set[str]:
    """Objects referenced by a binding, a use auxiliary, a component's resource table, or by the contract."""
    used = set(CONTRACT_OBJECTS)
    for b in art.bindings.values():
        used.update(b.object_ids)
    for u in art.uses:
        for aux in u.auxiliaries.values():
            used.update(aux.object_ids)
    for comp in art.components.values():
        used.update(comp.resources.values())
    return used


def check_coverage(art, expected: Mapping[str, Expected], *, unchecked: Mapping[str, str] | Iterable[str] = (),
                   only_layer: int | None = None) -> list[Finding]:
    """Coverage issues of ``art`` against ``expected`` (see the module docstring); ``unchecked``: components
    (or component → reason) whose bindings are not judged. ``only_layer``: the artifact is a minimal one
    (provenance ``only_layer``, docs/acceptance.md §Minimal artifacts): only text layer ``only_layer``'s
    parameters are required; whatever else it binds is judged as in a whole artifact."""
    issues: list[Finding] = []
    reasons = dict(unchecked) if isinstance(unchecked, Mapping) else dict.fromkeys(unchecked, "")
    unchecked = set(reasons)
    minimal = f" (a minimal artifact of layer {only_layer} only)" if only_layer is not None else ""
    missing = [e for e in expected.values() if e.name not in art.bindings and not e.optional
               and (only_layer is None or in_layer(e, only_layer))]
    for e in missing:
        issues.append(finding("NINFER_BINDING_MISSING", f"{e.name} {list(e.shape)} is not bound{minimal}",
                            path=f"$.bindings.{e.name}"))
    uses: dict[str, list[str]] = {}
    for u in art.uses:
        uses.setdefault(u.parameter, []).append(u.input)
    for name, b in art.bindings.items():
        e = expected.get(name)
        if e is None:
            if name.split("/", 1)[0] not in unchecked:
                issues.append(finding("NINFER_BINDING_UNEXPECTED", f"{name} is bound, but no selected component's "
                                    "parameter list names it", path=f"$.bindings.{name}"))
            continue
        n = binding_elements(art, b)
        want = math.prod(e.shape)
        if n is not None and n != want:
            issues.append(finding("NINFER_BINDING_SHAPE", f"{name} holds {n} elements; its logical shape "
                                f"{list(e.shape)} needs {want}", path=f"$.bindings.{name}",
                                detail={"elements": n, "expected": want}))
        elif b.object is not None:
            obj = _object(art, b.object)
            if isinstance(obj, TensorObject) and tuple(obj.shape) != tuple(e.shape):
                issues.append(finding("NINFER_BINDING_SHAPE", f"{name} is bound to the whole object {b.object} of shape "
                                    f"{list(obj.shape)}; the logical shape is {list(e.shape)} (transposed or "
                                    "reshaped?)", path=f"$.bindings.{name}"))
        inputs = uses.get(name, [])
        if e.input is not None and e.input not in inputs:
            if inputs:
                issues.append(finding("NINFER_USE_INPUT", f"{name} is used with input {inputs[0]}; the contract's "
                                    f"input is {e.input}", path="$.uses"))
            else:
                issues.append(finding("NINFER_USE_MISSING", f"{name} has no use; the contract's input is {e.input}",
                                    path="$.uses"))
        elif e.input is None and inputs:
            issues.append(finding("NINFER_USE_INPUT", f"{name} has a use with input {inputs[0]}, but the contract "
                                "gives it no use position", path="$.uses"))
    used = consumed_objects(art)
    for obj in art.objects:
        if obj.id not in used:
            issues.append(finding("NINFER_OBJECT_UNCONSUMED", f"object {obj.id} ({obj.kind}, {obj.bytes} bytes) is "
                                "consumed by no binding, use auxiliary or resource table",
                                path=art.object_json_path(obj.id)))
    for comp in sorted(unchecked):
        if comp in art.components:
            why = reasons[comp] or "its parameter list is not known"
            issues.append(finding("NINFER_COVERAGE_UNCHECKED", f"component {comp}: {why}; its bindings were not "
                                "checked", path=f"$.components.{comp}"))
    return issues
