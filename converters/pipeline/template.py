"""Template artifacts as skeletons: each template object is produced from the source or borrowed
byte-for-byte (docs/ternary.md §1, §3, §6).

With ``--template TPL.ninfer`` the template's directory is the skeleton of the output: its objects, in
its order. An object the plan produces under the same id takes the template object's place (its format
may differ — a ternary source produces t2 where the template holds q4 — its logical shape may not). An
object the template has and the plan does not is

- *borrowed* (copied byte-for-byte, with its bindings, uses and component) when it lies outside what the
  selected mappings produce — other components (``vision/…``, ``mtp/…``), a proposal head, resources;
- *unmappable* when it lies inside it (``text/layers/N/…`` of a layer the model has, or a name the
  mappings produce as a global): the template was made with another grouping (e.g. an nvfp4 fused
  ``attention/query_key_gate_value`` against a ``groupwise-int`` plan), and the run stops before
  anything is written, naming the first such object.

Objects the plan produces that the template lacks are appended after the template's objects
(docs/ternary.md §4: the two Hadamard sign objects). With ``--only-layer`` nothing is borrowed: the result is
the minimal artifact of that layer.

An architecture may name prefixes it borrows even though it could produce them (``TEMPLATE_BORROWS``:
Ternary Bonsai takes ``frontend/*`` from the template, docs/ternary.md §3 — the original tokenizer files rather
than ones rebuilt from GGUF metadata). A borrowed use that binds the same parts as a produced parameter
whose use carries ``hadamard_signs`` gets the same signs: the template's MTP head reading the text head
must rotate its input like the text head does (container §8).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from converters.errors import ConversionError
from converters.model.architectures import module as architecture_module
from converters.pipeline.planned import Plan


@dataclass
class BorrowedObject:
    """A template object copied byte-for-byte into the output."""

    id: str
    record: object  # the template's TensorObject / ResourceObject
    template: object  # the open template Artifact
    kind: str
    exactness = "bit-exact"
    layer = None

    @property
    def bytes(self) -> int:
        return self.record.bytes

    @property
    def shape(self):
        return getattr(self.record, "shape", None)

    @property
    def format(self):
        return getattr(self.record, "format", None)

    @property
    def layout(self):
        return getattr(self.record, "layout", None)

    @property
    def divisors(self):
        return getattr(self.record, "divisors", 1)


def prefix(object_id: str) -> str:
    """The top-level prefix objects are counted by (docs/ternary.md §6: ``name.split("/")[0]``)."""
    return object_id.split("/")[0]


def owned(plan: Plan, object_id: str) -> bool:
    """Whether ``object_id`` lies in the namespace the plan's mappings produce."""
    n_layers = len(plan.bound.layer_kinds)
    for comp in {p.component for p in plan.bound.parameters}:
        m = re.match(rf"^{re.escape(comp)}/layers/(\d+)/", object_id)
        if m and int(m.group(1)) < n_layers:
            return True
    return object_id in {p.name for p in plan.bound.parameters}


def apply_template(plan: Plan, template) -> list:
    """The output object list: the template's order with produced objects in place, then the plan's
    own additions. Updates ``plan.bindings``/``uses``/``components`` with what is borrowed."""
    produced = {o.id: o for o in plan.objects}
    out, borrowed = [], []
    if plan.only_layer is not None:
        return list(plan.objects)
    prefer = tuple(getattr(architecture_module(plan.bound.architecture), "TEMPLATE_BORROWS", ()))
    for rec in template.objects:
        if rec.id in produced and rec.id.startswith(prefer) and rec.kind == produced[rec.id].kind:
            del produced[rec.id]  # the architecture takes this one from the template (TEMPLATE_BORROWS)
            b = BorrowedObject(rec.id, rec, template, rec.kind)
            out.append(b)
            borrowed.append(b)
        elif rec.id in produced:
            obj = produced.pop(rec.id)
            tshape = getattr(rec, "shape", None)
            if rec.kind != obj.kind or (tshape is not None and tuple(tshape) != tuple(obj.shape)):
                raise ConversionError(
                    f"template object {rec.id} is a {rec.kind} {list(tshape or [])}, but the source produces a "
                    f"{obj.kind} {list(getattr(obj, 'shape', []) or [])}: the template is of another model",
                    file=str(template.path), json_path=template.object_json_path(rec.id), rule="template_shape")
            out.append(obj)
        elif owned(plan, rec.id):
            raise ConversionError(
                f"template object {rec.id} is unmapped: the {plan.bound.architecture} mapping with recipe "
                f"{plan.recipe.name} does not produce it (a template made with another recipe or grouping?); "
                "nothing was written", file=str(template.path), json_path=template.object_json_path(rec.id),
                rule="template_unmapped")
        else:
            b = BorrowedObject(rec.id, rec, template, rec.kind)
            out.append(b)
            borrowed.append(b)
    out.extend(produced.values())
    _borrow_directory(plan, template, {o.id for o in out})
    return out


def _key(binding) -> str:
    return json.dumps(binding if isinstance(binding, dict) else binding.to_json(), sort_keys=True)


def _refs(binding) -> set[str]:
    if binding.object is not None:
        return {binding.object}
    return {p.object for p in binding.parts or ()}


def _borrow_directory(plan: Plan, template, present: set[str]) -> None:
    for name, b in template.bindings.items():
        if name not in plan.bindings and _refs(b) <= present:
            plan.bindings[name] = b.to_json()
    have = {(u["parameter"], u["input"]) for u in plan.uses}
    signs = {}  # binding (canonical JSON) of a produced parameter → its use's hadamard_signs
    for u in plan.uses:
        aux = u.get("auxiliaries", {})
        if "hadamard_signs" in aux and u["parameter"] in plan.bindings:
            signs[_key(plan.bindings[u["parameter"]])] = aux["hadamard_signs"]
    for u in template.uses:
        if (u.parameter, u.input) in have or u.parameter not in plan.bindings:
            continue
        if all(_refs(a) <= present for a in u.auxiliaries.values()):
            use = u.to_json()
            rotated = signs.get(_key(plan.bindings[u.parameter]))
            if rotated is not None:
                use.setdefault("auxiliaries", {})["hadamard_signs"] = rotated
            plan.uses.append(use)
    for cid, comp in template.components.items():
        if cid in plan.components:
            continue
        if set(comp.resources.values()) <= present and (comp.target is None or comp.target in plan.components
                                                         or comp.target in template.components):
            plan.components[cid] = comp.to_json()
