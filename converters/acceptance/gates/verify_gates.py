"""The seven gates of ``convert verify``, registered in :mod:`converters.acceptance.registry`
(docs/acceptance.md §Gate registry). Each reads the run's context, ``VerifyRun`` of
:mod:`converters.acceptance.gates.verify` (the artifact, the opened source, what an earlier gate computed),
records its checks and evidence, and returns its findings; ``verify()`` runs them in order.

A gate that needs the artifact is skipped when it cannot be opened; one that needs the source is skipped
without it (``VERIFY_SKIPPED_NO_SOURCE``) — never passed. Values (4) and resources (6) still compare what needs
no source (borrowed objects with their template, resources with their recorded sha256) and are skipped after.
"""

from __future__ import annotations

import json

from converters.acceptance.gates import borrowed as lent
from converters.acceptance.gates.codes import finding
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
from converters.acceptance.gates.structure import relative_name
from converters.acceptance.gates.values import bound_targets, check_parameters
from converters.acceptance.registry import gate, guarded
from converters.errors import ConverterError

TEXT_BINDING_CODES = ("NINFER_BINDING_MISSING", "NINFER_BINDING_SHAPE")


@gate("verify", "1", "structure", summary="every container rule (ninfer_core.validate) and the filesystem checks")
def structure(run, g):
    st = run.structure
    g.check(*st.checks)
    return st.container_issues


@gate("verify", "2", "coverage", needs=("artifact",),
      summary="every logical parameter of the text model and of each declared component bound in its logical "
              "shape with its use's input, no unconsumed object; text.proposal's head and token map")
def coverage(run, g):
    art, found = run.artifact, []
    g.check("bindings_present", "binding_shapes", "uses", "objects_consumed", "proposal_token_ids")
    if run.model is not None:
        expected = expected_from_bound(run.model.bound)
        record = proposal_record(art)
        if record is not None:
            try:
                expected.update(expected_proposal(run.config, record))
            except ConverterError as exc:
                found.append(finding("NINFER_CONFIG_INVALID", f"components.text.config: {exc.message}",
                                     path="$.components.text.config"))
        unchecked: dict[str, str] = {}
        g.evidence["parameters_from"] = "source mappings" + (" and text.proposal" if record else "")
        if run.lent_components:  # not in the source: their mapping files, as without a source
            want = _lent_expectation(art, run.lent_components, run.template)
            expected.update(want.expected)
            unchecked.update(want.unchecked)
            g.evidence["parameters_from"] += " (borrowed " + ", ".join(sorted(run.lent_components)) + ": " + \
                ", ".join(f"{c}: {want.sources.get(c, 'unchecked')}" for c in sorted(run.lent_components)) + ")"
    else:
        want = expected_from_artifact(art)
        expected, unchecked = want.expected, want.unchecked
        found += want.issues
        g.evidence["parameters_from"] = want.sources
    run.expected = expected
    only = run.only_layer
    found += guarded(g, found, lambda: check_coverage(art, expected, unchecked=unchecked, only_layer=only), [])
    id_findings, run.token_ids = guarded(g, found, lambda: check_token_ids(art, run.config), ([], None))
    found += id_findings
    per_component: dict[str, int] = {}
    for e in expected.values():
        key = "proposal" if e.name.startswith("proposal/") else e.component
        per_component[key] = per_component.get(key, 0) + 1
    g.evidence.update(parameters=len(expected), by_component=per_component, bindings=len(art.bindings),
                      objects=len(art.objects))
    return found


@gate("verify", "3", "codec_validity",
      summary="every object's encoding and bytes (codes, multipliers, padding) and the use auxiliaries "
              "(Hadamard signs, input columns, activation divisors)")
def codec_validity(run, g):
    found = list(run.structure.codec_issues)
    g.check("encodings", "codec_values")
    if run.artifact is None:
        g.skip(run.unopened)
        return found
    shapes = {n: e.shape for n, e in run.expected.items()}
    aux, counts = guarded(g, found, lambda: check_auxiliaries(run.artifact, shapes), ([], {}))
    g.check("auxiliaries")
    g.evidence["auxiliaries"] = counts
    return found + aux


@gate("verify", "4", "values", needs=("artifact",),
      summary="each parameter of every component against the source after the mapped transforms: exact where "
              "provenance says exact, within the format's tolerance where requantized; borrowed tensors against "
              "their template")
def values(run, g):
    found = []
    run.lent_findings, run.lent_rows = guarded(g, found, lambda: lent.check_borrowed(run.artifact, run.template),
                                               ([], []))
    found += _borrowed(g, run, "tensor")
    if run.model is None:
        return found + run.skip_no_source(g)
    found += _source_identity(run.artifact, run.model)
    found += _source_configs(run.artifact, run.model)
    res = run.parameter_check
    found += res.values
    g.checks[:0] = ["exact_equality", "format_tolerance"]
    checked, art, model = run.checked, run.artifact, run.model
    chosen = run.chosen
    run.report.layers = chosen["text"]
    n_layers = len(model.bound.layer_kinds)
    layers_bound = sorted({layer_of(p.name) for p in model.bound.parameters
                           if p.component == "text" and p.name in art.bindings} - {None})
    components = {}
    for cid in model.component_records:
        names = {p.name for p in run.compared if p.component == cid}
        components[cid] = {"layers": chosen[cid], "parameters": sum(c["name"] in names for c in checked)}
    if proposal_record(art) is not None:
        note = run.proposal_note
        components["proposal"] = {"parameters": sum(c["name"].startswith("proposal/") for c in checked),
                                  **({"note": note} if note else {})}
    if run.sweep and len(layers_bound) < n_layers:  # docs/acceptance.md §Minimal artifacts: a sweep of part fails
        found.append(finding("VERIFY_SWEEP_PARTIAL", f"--sweep compares every layer: the artifact binds "
                             f"{len(layers_bound)}/{n_layers} text layers ({_layer_list(layers_bound)}); it is not "
                             "a whole model", path="$.bindings", detail={"layers_bound": len(layers_bound),
                                                                         "layers": n_layers}))
    g.evidence.update({"layers": chosen["text"], "layers_bound": f"{len(layers_bound)} of {n_layers}",
                       "parameters": len(checked),
                       "exact": sum(c["exactness"] in ("bit-exact", "value-exact") for c in checked),
                       "worst_cosine": min((c["cosine"] for c in checked), default=None),
                       **_library_rules(checked),
                       **({"components": components} if components else {}), "per_parameter": checked})
    return found


def _layer_list(layers: list[int]) -> str:
    """``layer 3`` or ``layers 0, 3``; ``none`` when empty."""
    if not layers:
        return "none"
    return ("layer " if len(layers) == 1 else "layers ") + ", ".join(map(str, layers))


def _library_rules(checked: list[dict]) -> dict:
    """Parameters compared with a prequantized source's library rule (docs/acceptance.md §Prequantized sources)."""
    ruled = [c for c in checked if "max_ulp" in c]
    if not ruled:
        return {}
    return {"library_rule": {"parameters": len(ruled), "max_ulp": max(c["max_ulp"] for c in ruled),
                             "dtypes": sorted({c["library_dtype"] for c in ruled})}}


@gate("verify", "5", "order_probes", needs=("artifact", "source"),
      summary="per-row and per-head comparison with the source: permuted, tiled or foreign rows and heads")
def order_probes(run, g):
    g.check("row_values", "row_norms", "head_slices")
    checked = run.checked
    g.evidence.update(parameters=len(checked),
                      worst_row_rel=max((c["worst_row_rel"] or 0 for c in checked), default=None))
    return list(run.parameter_check.order)


@gate("verify", "6", "resources", needs=("artifact",),
      summary="the text frontend and each component's resources identical to the source's and to their sha256 "
              "provenance records; borrowed resources against their template")
def resources(run, g):
    found = _borrowed(g, run, "resource")
    hashed, n_hashed = guarded(g, found, lambda: check_recorded_hashes(run.artifact), ([], 0))
    if run.model is None:
        g.checks.insert(0, "recorded_sha256")
        g.skip(f"{run.NO_SOURCE} ({n_hashed} resource(s) match the sha256 provenance records)")
        return found + hashed
    from_source, rows = guarded(g, found, lambda: check_against_source(
        run.artifact, run.model, run.model.component_records, borrowed=set(run.borrowed)), ([], []))
    g.checks[:0] = ["recorded_sha256", "source_resources", "component_resources"]
    g.evidence.update(resources=rows, recorded_hashes_checked=n_hashed)
    return found + hashed + from_source


@gate("verify", "7", "golden_numerics", needs=("artifact", "source"),
      summary="reference forward of the text model on source and artifact, logits compared (top-1, cosine, "
              "maximum error against the precision class's thresholds)")
def golden_numerics(run, g):
    art, found = run.artifact, []
    earlier = run.report
    if run.only_layer is not None:
        g.skip(f"a minimal artifact of layer {run.only_layer} (provenance only_layer) has no embedding or output "
               "head: the reference forward is not defined; gates 2-6 judge that layer")
    elif any(f.code in TEXT_BINDING_CODES and _is_text(f.path) for f in earlier.gate(2).findings) or \
            any(f.code == "VERIFY_PARAMETER_UNREADABLE" and _is_text(f.path) for f in earlier.gate(4).findings):
        g.skip("text bindings missing or unreadable (gates 2/4); the forward pass needs every text parameter")
    else:
        golden, evidence = guarded(g, found, lambda: check_golden(art, run.model, run.config, sweep=run.sweep, progress=run.step), ([], {}))
        found += golden
        g.evidence.update(evidence)
        g.check("forward_source", "forward_artifact", "top1", "cosine", "max_abs_error")
        unavailable = next((f for f in golden if f.code == "VERIFY_GOLDEN_UNAVAILABLE"), None)
        if unavailable is not None:
            g.skip(unavailable.evidence)
    others = [c for c in art.components if c != "text"] + (["proposal"] if proposal_record(art) else [])
    g.evidence["covers"] = "text" + (f" only (no reference forward for {', '.join(others)}: gates 2-6 check "
                                     "them)" if others else "")
    return found


def _borrowed(g, run, kind: str) -> list:
    """The borrowed objects of ``kind`` (tensors in gate 4, resources in gate 6): their findings, the check, the
    evidence (with the borrowed components, in gate 4)."""
    mine = [r for r in run.lent_rows if r["kind"] == kind]
    ids = {r["object"] for r in mine}
    if mine:
        g.check("borrowed_identical_to_template")
        g.evidence["borrowed"] = {**lent.summary(mine), "per_object": mine}
        if kind == "tensor" and run.lent_components:
            g.evidence["borrowed"]["components"] = sorted(run.lent_components)
    return [f for f in run.lent_findings if f.path in ids]


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


def head_geometries(config, model) -> dict:
    """Each compared component's head geometry (gates 4-5), from the text config and the component's ``Args``."""
    try:
        spec = text_spec(config)
    except ConverterError:
        spec = None
    return {c: head_geometry(c, spec, getattr(model.component_records.get(c), "args", None))
            for c in ("text", *model.component_records)}


def compare_parameters(run):
    """Gates 4 and 5's one pass over the compared parameters (:func:`~converters.acceptance.gates.values.check_parameters`)."""
    extra, run.proposal_note = proposal_targets(run.artifact, run.model, run.token_ids)
    return check_parameters(run.artifact, bound_targets(run.model, run.compared) + extra,
                            head_geometries(run.config, run.model), progress=run.step)


def _is_text(path: str | None) -> bool:
    """Whether a coverage or values finding concerns a text parameter (the golden forward reads only those)."""
    name = (path or "").removeprefix("$.bindings.")
    return name.startswith("text/") or not name


def _source_configs(art, model) -> list:
    """Each component's config holds the source's value for every field the source gives (the geometry, the
    RoPE parameters, the deepstack wiring of docs/qwen3-vl.md §Deepstack contract)."""
    given = {"text": model.config} | {cid: c.config for cid, c in model.component_records.items()}
    found = []
    for cid, want in given.items():
        record = art.components.get(cid)
        if record is None:
            continue
        have = json.loads(json.dumps(record.config))
        diffs = {k: {"artifact": have.get(k), "source": v} for k, v in json.loads(json.dumps(want)).items()
                 if have.get(k) != v}
        if diffs:
            found.append(finding("VERIFY_CONFIG_MISMATCH", f"components.{cid}.config differs from the source's in "
                                 f"{', '.join(sorted(diffs))}", path=f"$.components.{cid}.config", detail=diffs))
    return found


def _source_identity(art, model) -> list:
    """The given source must be the one provenance names (same header hash and size; path may differ)."""
    recorded = art.provenance.get("source")
    if not isinstance(recorded, dict):
        return []
    ident = model.source.identity()
    diffs = [k for k in ("header_sha256", "size") if k in recorded and k in ident and recorded[k] != ident[k]]
    if not diffs:
        return []
    return [finding("VERIFY_SOURCE_MISMATCH", f"the source {relative_name(str(model.source.path), model.source.path.parent)} "
                    f"differs from the one provenance records ({', '.join(diffs)}): values are compared anyway",
                    detail={k: {"recorded": recorded[k], "given": ident[k]} for k in diffs})]
