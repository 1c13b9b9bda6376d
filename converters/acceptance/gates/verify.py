"""``convert verify``: acceptance of a written artifact, seven gates with pass/fail and evidence (issue 7).

Seed 003 §1/§5: a written artifact is not an accepted artifact, and a check that only counts bytes passes on
wrongly ordered rows. The gates, in order:

1. **structure** — every container rule (``ninfer_core.validate``) and the filesystem checks;
2. **coverage** — every logical parameter of the text model and of every component the artifact declares
   (MTP, vision, DFlash, DFlash2) bound in its logical shape with its use, no unconsumed object (from the
   source's mappings; without a source, the text contract and the components' mapping files,
   :mod:`converters.acceptance.gates.required`); ``text.proposal``'s head and token map (:mod:`converters.acceptance.gates.proposal`);
3. **codec validity** — every object's encoding and bytes (codes, multipliers, padding) and the use
   auxiliaries (Hadamard signs, input columns, activation divisors; :mod:`converters.acceptance.gates.prerun`);
4. **values** — each parameter of every component against the source after the mapped transforms: exact
   where provenance says exact, within the format's tolerance where requantized
   (:mod:`converters.acceptance.gates.values`); the proposal head against the text head's rows at its token ids;
5. **order probes** — per-row and per-head comparison with the source (:mod:`converters.acceptance.gates.values`);
6. **resources** — the text frontend and each component's resources (a vision processor config) identical
   to the source's, and to the sha256 provenance records;
7. **golden numerics** — reference forward of the text model on source and artifact, logits compared
   (:mod:`converters.acceptance.gates.numerics`). Text only: the components have no reference forward here; gates 2–6
   cover them.

Gates 4–7 need the source; without ``source`` they are ``skipped`` with the reason "no source" — never
``pass`` — and the result is ``incomplete``. Components read from inputs of their own come with ``inputs``
(``{"mmproj": path, "drafter": [paths]}``, as for the conversion; :func:`converters.model.engine.open_model`).
Gates 4–5 sample layers (the first layer of each kind and the last, per component) unless ``sweep``;
explicit ``layers`` choose the text layers (components keep their sample); gate 7 always runs the whole text
model on a few tokens. A gate that could not run because an earlier one failed (no artifact to read) is
``skipped`` with that reason.

Objects borrowed from a template (``--template`` conversions, provenance ``borrowed_from``) are compared with
the template, not the source (:mod:`converters.acceptance.gates.borrowed`): tensors in gate 4, resources in gate 6, each
"borrowed, identical to template" or ``VERIFY_BORROWED_MISMATCH``. The source is not asked for a component
whose own objects are all borrowed (a vision tower lent to a GGUF build), nor for a parameter whose bound
objects all are; such a component's bindings are checked against its mapping file (as without a source).
``template`` (an explicit template path) takes precedence over what provenance records.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from converters.acceptance.gates import borrowed as lent
from converters.acceptance.gates.codes import Issue
from converters.acceptance.gates.contract import (
    expected_from_bound,
    expected_proposal,
    head_geometry,
    layer_of,
    text_spec,
)
from converters.acceptance.gates.coverage import check_coverage
from converters.acceptance.gates.numerics import check_golden
from converters.acceptance.gates.prerun import check_auxiliaries
from converters.acceptance.gates.proposal import check_token_ids, proposal_record, proposal_targets
from converters.acceptance.gates.required import TEXT_GEOMETRY, expected_from_artifact, required_parameters
from converters.acceptance.gates.resources import check_against_source, check_recorded_hashes
from converters.acceptance.gates.structure import check_structure, relative_name
from converters.acceptance.gates.values import bound_targets, check_parameters
from converters.errors import ConverterError
from ninfer_core.errors import NinferError

SCHEMA = "ninfer-artifact-verify/v1"
GATES = ((1, "structure"), (2, "coverage"), (3, "codec_validity"), (4, "values"), (5, "order_probes"),
         (6, "resources"), (7, "golden_numerics"))
NO_SOURCE = "no source"


@dataclass
class GateResult:
    number: int
    name: str
    issues: list[Issue] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    skipped: str | None = None
    evidence: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def status(self) -> str:
        worst = max((_rank(i.severity) for i in self.issues), default=0)
        if worst == 3:
            return "fail"
        if self.skipped is not None:
            return "skipped"
        return "pass_with_warnings" if worst >= 1 else "pass"

    def to_dict(self) -> dict:
        out = {"gate": self.number, "name": self.name, "status": self.status}
        if self.skipped is not None:
            out["reason"] = f"skipped: {self.skipped}"
        out["checks"] = list(self.checks)
        out["findings"] = [i.to_dict() for i in self.issues]
        if self.evidence:
            out["evidence"] = self.evidence
        out["seconds"] = round(self.seconds, 3)
        return out


def _rank(severity: str) -> int:
    return {"ERROR": 3, "BLOCKED_REPRODUCIBILITY": 2, "INFO": 0}.get(severity, 1)


@dataclass
class VerifyReport:
    artifact: str
    source: str | None
    layers: list[int] | None
    sweep: bool
    gates: list[GateResult]
    inputs: dict = field(default_factory=dict)

    @property
    def result(self) -> str:
        statuses = [g.status for g in self.gates]
        if "fail" in statuses:
            return "fail"
        if "skipped" in statuses:
            return "incomplete"
        return "pass"

    @property
    def ok(self) -> bool:
        return self.result != "fail"

    def gate(self, number: int) -> GateResult:
        return self.gates[number - 1]

    def codes(self, number: int | None = None) -> set[str]:
        gates = self.gates if number is None else [self.gate(number)]
        return {i.code for g in gates for i in g.issues}

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "artifact": self.artifact, "source": self.source, "inputs": self.inputs,
                "layers": "all" if self.sweep else self.layers, "gates": [g.to_dict() for g in self.gates],
                "result": self.result}


def sample_layers(layer_kinds: list[str]) -> list[int]:
    """The first layer of each kind and the last layer (seed 003: layer 0 is GDN, layer 3 attention)."""
    first = {}
    for i, kind in enumerate(layer_kinds):
        first.setdefault(kind, i)
    return sorted({*first.values(), len(layer_kinds) - 1}) if layer_kinds else []


def _components(art) -> tuple[str, ...]:
    ident = art.metadata.get("identity")
    comps = ident.get("components") if isinstance(ident, dict) else None
    if isinstance(comps, list) and comps and all(isinstance(c, str) for c in comps):
        return tuple(comps)
    return tuple(c for c in art.components if c == "text") or ("text",)


def _input_names(inputs: dict | None) -> dict:
    out = {}
    for name, value in (inputs or {}).items():
        if value is None or value == []:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        out[name] = [str(getattr(v, "path", v)) for v in values]
    return out


def verify(path, source=None, *, inputs: dict | None = None, sweep: bool = False,
           layers: Iterable[int] | None = None, template=None) -> VerifyReport:
    """Run the seven gates on the artifact whose entry is ``path``, comparing with ``source`` when given
    (a GGUF file, an HF directory, or an open Source) and the components' own ``inputs``; borrowed objects
    with ``template`` when given, else with what provenance records."""
    path = Path(path)
    gates = {n: GateResult(n, name) for n, name in GATES}
    layer_list = sorted(set(layers)) if layers is not None else None
    report = VerifyReport(str(path), None if source is None else str(getattr(source, "path", source)),
                          layer_list, sweep, list(gates.values()), _input_names(inputs))
    t0 = time.perf_counter()
    st = check_structure(path)
    gates[1].issues, gates[1].checks = st.container_issues, list(st.checks)
    gates[3].issues, gates[3].checks = st.codec_issues, ["encodings", "codec_values"]
    gates[1].seconds = gates[3].seconds = time.perf_counter() - t0
    art = st.artifact
    if art is None:
        for n in (2, 3, 4, 5, 6, 7):
            gates[n].skipped = f"the artifact cannot be opened ({st.open_error})"
        return report
    try:
        _gates_with_artifact(art, source, inputs, gates, report, sweep, layer_list, template)
    finally:
        st.close()
    return report


def _gates_with_artifact(art, source, inputs, gates, report, sweep, layer_list, template) -> None:
    text = art.components.get("text")
    config = dict(text.config) if text is not None else {}
    only_layer = art.provenance.get("only_layer")
    borrowed = lent.borrowed_entries(art)
    lent_components = lent.borrowed_components(art, borrowed)
    model = None
    if source is not None:
        from converters.model.engine import open_model

        model = open_model(source, components=[c for c in _components(art) if c not in lent_components],
                           inputs=inputs)
    try:
        t0 = time.perf_counter()
        g2 = gates[2]
        g2.checks = ["bindings_present", "binding_shapes", "uses", "objects_consumed", "proposal_token_ids"]
        if model is not None:
            expected = expected_from_bound(model.bound)
            record = proposal_record(art)
            if record is not None:
                try:
                    expected.update(expected_proposal(config, record))
                except ConverterError as exc:
                    g2.issues.append(Issue("NINFER_CONFIG_INVALID", f"components.text.config: {exc.message}",
                                           path="$.components.text.config"))
            unchecked: dict[str, str] = {}
            g2.evidence["parameters_from"] = "source mappings" + (" and text.proposal" if record else "")
            if lent_components:  # not in the source: their mapping files, as without a source
                want = _lent_expectation(art, lent_components, template)
                expected.update(want.expected)
                unchecked.update(want.unchecked)
                g2.evidence["parameters_from"] += " (borrowed " + ", ".join(sorted(lent_components)) + \
                    ": " + ", ".join(f"{c}: {want.sources.get(c, 'unchecked')}" for c in sorted(lent_components)) + ")"
        else:
            want = expected_from_artifact(art)
            expected, unchecked = want.expected, want.unchecked
            g2.issues += want.issues
            g2.evidence["parameters_from"] = want.sources
        g2.issues += _guarded(g2, lambda: check_coverage(art, expected, unchecked=unchecked,
                                                         only_layer=only_layer if isinstance(only_layer, int) else None), [])
        id_issues, token_ids = _guarded(g2, lambda: check_token_ids(art, config), ([], None))
        g2.issues += id_issues
        per_component: dict[str, int] = {}
        for e in expected.values():
            key = "proposal" if e.name.startswith("proposal/") else e.component
            per_component[key] = per_component.get(key, 0) + 1
        g2.evidence.update(parameters=len(expected), by_component=per_component, bindings=len(art.bindings),
                           objects=len(art.objects))
        g2.seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        aux_issues, counts = _guarded(gates[3], lambda: check_auxiliaries(art, {n: e.shape for n, e in expected.items()}),
                                      ([], {}))
        gates[3].issues += aux_issues
        gates[3].checks.append("auxiliaries")
        gates[3].evidence["auxiliaries"] = counts
        gates[3].seconds += time.perf_counter() - t0
        lent_issues, lent_rows = _guarded(gates[4], lambda: lent.check_borrowed(art, template), ([], []))
        _report_borrowed(gates, lent_issues, lent_rows, lent_components)
        if model is None:
            for n in (4, 5, 7):
                gates[n].skipped = NO_SOURCE
                gates[n].issues.append(Issue("VERIFY_SKIPPED_NO_SOURCE", f"gate {n} ({gates[n].name}) compares "
                                             "with the source: pass --source (the GGUF file or HF directory the "
                                             "artifact was converted from)"))
            t0 = time.perf_counter()
            issues, n_hashed = _guarded(gates[6], lambda: check_recorded_hashes(art), ([], 0))
            gates[6].issues += issues
            gates[6].checks = ["recorded_sha256", *gates[6].checks]
            gates[6].skipped = f"{NO_SOURCE} ({n_hashed} resource(s) match the sha256 provenance records)"
            gates[6].seconds = time.perf_counter() - t0
            return
        _source_gates(art, model, config, gates, report, sweep, layer_list, token_ids, set(borrowed))
    finally:
        if model is not None and not hasattr(source, "tensors"):
            model.close()


def _chosen_layers(model, sweep, layer_list) -> dict[str, list[int]]:
    """Component → the layers gates 4–5 compare: all with ``sweep``; the text layers ``layer_list`` when
    given; else the first layer of each kind and the last (:func:`sample_layers`), per component."""
    n_layers = len(model.bound.layer_kinds)
    if sweep:
        text = list(range(n_layers))
    elif layer_list is not None:
        bad = [i for i in layer_list if not 0 <= i < n_layers]
        if bad:
            raise ConverterError(f"--layers {bad[0]}: the model has layers 0..{n_layers - 1}", rule="verify_layers")
        text = layer_list
    else:
        text = sample_layers(list(model.bound.layer_kinds))
    out = {"text": text}
    for cid, rec in model.component_records.items():
        kinds = list(rec.args.layer_kinds())
        out[cid] = list(range(len(kinds))) if sweep else sample_layers(kinds)
    return out


def _lent_expectation(art, components: set[str], template):
    """The borrowed components' parameters from their mapping files (:func:`expected_from_artifact`); one whose
    geometry is the text config's (MTP) and that the produced text config does not give is read with the
    template's text config, which the borrowed objects were made for."""
    want = expected_from_artifact(art)
    want.expected = {n: e for n, e in want.expected.items() if e.component in components}
    want.unchecked = {c: why for c, why in want.unchecked.items() if c in components}
    retry = [c for c in want.unchecked if c in TEXT_GEOMETRY]
    tpl_config = lent.template_text_config(art, template) if retry else None
    for cid in retry if tpl_config is not None else ():
        try:
            want.expected.update(required_parameters(cid, art.components[cid].config, tpl_config))
        except ConverterError:
            continue
        want.sources[cid] = "its mapping, with the template's text config (its geometry)"
        del want.unchecked[cid]
    return want


def _report_borrowed(gates, issues: list[Issue], rows: list[dict], components: set[str]) -> None:
    """Borrowed tensors in gate 4's findings and evidence, borrowed resources in gate 6's."""
    for n, kind in ((4, "tensor"), (6, "resource")):
        mine = [r for r in rows if r["kind"] == kind]
        ids = {r["object"] for r in mine}
        gates[n].issues += [i for i in issues if i.path in ids]
        if mine:
            gates[n].checks.append("borrowed_identical_to_template")
            gates[n].evidence["borrowed"] = {**lent.summary(mine), "per_object": mine}
            if n == 4 and components:
                gates[n].evidence["borrowed"]["components"] = sorted(components)


def _source_gates(art, model, config, gates, report, sweep, layer_list, token_ids, borrowed=frozenset()) -> None:
    t0 = time.perf_counter()
    g4, g5 = gates[4], gates[5]
    g4.issues += _source_identity(art, model)
    chosen = _chosen_layers(model, sweep, layer_list)
    report.layers = chosen["text"]
    params = [p for p in model.bound.parameters if (p.layer is None or p.layer in chosen.get(p.component, ()))
              and not lent.parameter_borrowed(art, p.name, borrowed)]
    try:
        spec = text_spec(config)
    except ConverterError:
        spec = None
    geometries = {c: head_geometry(c, spec, getattr(model.component_records.get(c), "args", None))
                  for c in ("text", *model.component_records)}
    extra, proposal_note = proposal_targets(art, model, token_ids)
    res = check_parameters(art, bound_targets(model, params) + extra, geometries)
    g4.issues += res.values
    g5.issues += res.order
    g4.checks = ["exact_equality", "format_tolerance", *g4.checks]
    g5.checks = ["row_values", "row_norms", "head_slices"]
    checked = [c.to_dict() for c in res.checked]
    n_layers = len(model.bound.layer_kinds)
    layers_bound = sorted({layer_of(p.name) for p in model.bound.parameters
                           if p.component == "text" and p.name in art.bindings} - {None})
    components = {}
    for cid in model.component_records:
        names = {p.name for p in params if p.component == cid}
        components[cid] = {"layers": chosen[cid], "parameters": sum(c["name"] in names for c in checked)}
    if proposal_record(art) is not None:
        components["proposal"] = {"parameters": sum(c["name"].startswith("proposal/") for c in checked),
                                  **({"note": proposal_note} if proposal_note else {})}
    g4.evidence = {**g4.evidence, "layers": chosen["text"], "layers_bound": f"{len(layers_bound)} of {n_layers}",
                   "parameters": len(checked),
                   "exact": sum(c["exactness"] in ("bit-exact", "value-exact") for c in checked),
                   "worst_cosine": min((c["cosine"] for c in checked), default=None),
                   **({"components": components} if components else {}), "per_parameter": checked}
    g5.evidence = {"parameters": len(checked),
                   "worst_row_rel": max((c["worst_row_rel"] or 0 for c in checked), default=None)}
    g4.seconds = g5.seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    issues, n_hashed = _guarded(gates[6], lambda: check_recorded_hashes(art), ([], 0))
    src_issues, rows = _guarded(gates[6], lambda: check_against_source(art, model.source, model.component_records,
                                                                       borrowed=borrowed), ([], []))
    gates[6].issues += issues + src_issues
    gates[6].checks = ["recorded_sha256", "source_resources", "component_resources", *gates[6].checks]
    gates[6].evidence = {**gates[6].evidence, "resources": rows, "recorded_hashes_checked": n_hashed}
    gates[6].seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    g7 = gates[7]
    if any(i.code in ("NINFER_BINDING_MISSING", "NINFER_BINDING_SHAPE") and _is_text(i.path) for i in gates[2].issues) or \
            any(i.code == "VERIFY_PARAMETER_UNREADABLE" and _is_text(i.path) for i in g4.issues):
        g7.skipped = "text bindings missing or unreadable (gates 2/4); the forward pass needs every text parameter"
    else:
        g7.issues, g7.evidence = _guarded(g7, lambda: check_golden(art, model, config), ([], {}))
        g7.checks = ["forward_source", "forward_artifact", "top1", "cosine", "max_abs_error"]
        if any(i.code == "VERIFY_GOLDEN_UNAVAILABLE" for i in g7.issues):
            g7.skipped = g7.issues[0].evidence
    others = [c for c in art.components if c != "text"] + (["proposal"] if proposal_record(art) else [])
    g7.evidence["covers"] = "text" + (f" only (no reference forward for {', '.join(others)}: gates 2-6 check "
                                      "them)" if others else "")
    g7.seconds = time.perf_counter() - t0


def _is_text(path: str | None) -> bool:
    """Whether a coverage or values finding concerns a text parameter (the golden forward reads only those)."""
    name = (path or "").removeprefix("$.bindings.")
    return name.startswith("text/") or not name


def _guarded(gate: GateResult, run, default):
    """``run()``, or ``default`` with a ``NINFER_READ_FAILED`` issue on ``gate`` when reading fails (a damaged
    part is gate 1's finding; the gates after it report what they could not read instead of stopping)."""
    try:
        return run()
    except NinferError as exc:
        gate.issues.append(Issue("NINFER_READ_FAILED", f"gate {gate.number} ({gate.name}) could not complete: "
                                 f"{exc.message} [rule {exc.rule}]"))
        return default


def _source_identity(art, model) -> list[Issue]:
    """The given source must be the one provenance names (same header hash and size; path may differ)."""
    recorded = art.provenance.get("source")
    if not isinstance(recorded, dict):
        return []
    ident = model.source.identity()
    diffs = [k for k in ("header_sha256", "size") if k in recorded and k in ident and recorded[k] != ident[k]]
    if not diffs:
        return []
    return [Issue("VERIFY_SOURCE_MISMATCH", f"the source {relative_name(str(model.source.path), model.source.path.parent)} "
                  f"differs from the one provenance records ({', '.join(diffs)}): values are compared anyway",
                  detail={k: {"recorded": recorded[k], "given": ident[k]} for k in diffs})]


__all__ = ["GATES", "SCHEMA", "GateResult", "VerifyReport", "sample_layers", "verify"]
