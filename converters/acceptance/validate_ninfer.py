"""``convert validate`` for ``.ninfer`` artifacts: static acceptance, docs/calbin.md §9–§12, one ``validation.json``.

``validate_ninfer(path, *, context=None, batch=None) -> Report`` (schema ``ninfer-artifact-validation/v1``,
``converters.acceptance.report``), from the artifact alone:

- **Gate A, filesystem** — the entry readable and regular; every declared part present, of its declared
  length, with this artifact's id; no symlink out of the directory; undeclared files named after the artifact
  reported (:mod:`converters.acceptance.gates.structure`).
- **Gate B, schema** — the directory's schema rules; every object's encoding interpretable; each component's
  config complete enough for its architecture.
- **Gate C, cross-reference** — references and ranges; binding coverage of every component (every required
  parameter bound in its logical shape, uses with the contract's inputs, no unconsumed object;
  :mod:`converters.acceptance.gates.coverage`): text against the text contract, MTP / vision / DFlash / DFlash2 against
  their mapping files read with their configs (:mod:`converters.acceptance.gates.required`), ``text.proposal``'s head
  and token map (:mod:`converters.acceptance.gates.proposal`).
- **Gate D, capacity** — parameter bytes by component and format; KV-cache and gated-delta-net state bytes
  for ``context``/``batch`` (:mod:`converters.acceptance.gates.capacity`).
- **Gate E, supply chain** — source identity and hash, converter, recipe, per-object transforms; missing →
  ``BLOCKED_REPRODUCIBILITY``; resources against their recorded sha256 (:mod:`converters.acceptance.gates.supply`).
- **Gate F, pre-run** — codec validity of every object's bytes and the use auxiliaries
  (:mod:`converters.acceptance.gates.prerun`); then the hand-off: values, order and golden numerics need the source
  (``convert verify --source``).

Codes: :mod:`converters.acceptance.gates.codes`, documented in ``docs/validation-codes.md``. ``--sanitized`` output
drops absolute paths (``converters.acceptance.report.sanitize``); ``package.path`` is the only absolute path written.
"""

from __future__ import annotations

import os
from pathlib import Path

from converters.acceptance.gates.capacity import kv_cache, parameter_bytes
from converters.acceptance.gates.codes import VALIDATE_CODES, Issue
from converters.acceptance.gates.coverage import check_coverage
from converters.acceptance.gates.prerun import check_auxiliaries
from converters.acceptance.gates.proposal import check_token_ids
from converters.acceptance.gates.required import expected_from_artifact
from converters.acceptance.gates.structure import check_structure
from converters.acceptance.gates.supply import check_supply_chain
from converters.acceptance.report import SCHEMA_NINFER, Report
from converters.errors import ConverterError
from ninfer_core.errors import NinferError

GATE_A_CHECKS = ["entry_readable", "framing", "parts_present_and_sized", "part_identity", "symlinks", "unknown_files"]
GATE_B_CHECKS = ["directory_schema", "object_encodings", "text_config"]
GATE_C_CHECKS = ["references", "object_ranges", "binding_coverage", "uses", "objects_consumed", "proposal_token_ids"]


def _add(report: Report, issues: list[Issue]) -> None:
    for i in issues:
        report.add(VALIDATE_CODES.finding(i.code, i.evidence, path=i.path, file=i.file, detail=i.detail))


def _guarded(report: Report, gate: str, run, default):
    """``run()``, or ``default`` with a ``NINFER_READ_FAILED`` finding when reading the artifact fails (a damaged
    part is Gate A's finding; the gates after it say what they could not read instead of stopping)."""
    try:
        return run()
    except NinferError as exc:
        _add(report, [Issue("NINFER_READ_FAILED", f"Gate {gate} could not complete: {exc.message} [rule {exc.rule}]")])
        return default


def validate_ninfer(path: str | os.PathLike, *, context: int | None = None, batch: int | None = None) -> Report:
    """The static acceptance report of the artifact whose entry file is ``path``."""
    path = Path(path)
    for value, flag in ((context, "--context"), (batch, "--batch")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConverterError(f"{flag} must be a positive integer, got {value!r}", rule="validate_options")
    report = Report(SCHEMA_NINFER, {"name": path.name, "path": str(path.resolve())})
    st = check_structure(path)
    for gate, checks in (("A", GATE_A_CHECKS), ("B", GATE_B_CHECKS[:2]), ("C", GATE_C_CHECKS[:2])):
        for c in checks:
            report.gate(gate).check(c)
    _add(report, st.issues)
    if st.artifact is not None:
        report.gate("F").check("codec_values")
    art = st.artifact
    if art is None:
        return report
    try:
        _with_artifact(report, art, context, batch)
    finally:
        st.close()
    return report


def _with_artifact(report: Report, art, context, batch) -> None:
    report.package.update(artifact_id=art.artifact_id, payload_bytes=art.payload_bytes,
                          files=[{"name": Path(f.location).name if f.location else report.package["name"],
                                  "bytes": f.file_bytes} for f in art.files])
    text = art.components.get("text")
    config = dict(text.config) if text is not None else {}
    comps = report.section("components")
    for cid, comp in art.components.items():
        cfg = comp.config
        comps[cid] = {k: cfg[k] for k in ("architectures", "model_type", "num_hidden_layers", "hidden_size",
                                           "vocab_size") if k in cfg}
        if comp.target is not None:
            comps[cid]["target"] = comp.target
        comps[cid]["resources"] = sorted(comp.resources)
    # Gate B/C: every component's parameter list, text.proposal's token map
    report.gate("B").check("text_config")
    want = expected_from_artifact(art)
    _add(report, want.issues)
    shapes = {n: e.shape for n, e in want.expected.items()}
    for c in GATE_C_CHECKS[2:]:
        report.gate("C").check(c)
    only_layer = art.provenance.get("only_layer")
    _add(report, check_coverage(art, want.expected, unchecked=want.unchecked,
                                only_layer=only_layer if isinstance(only_layer, int) else None))
    _add(report, _guarded(report, "C", lambda: check_token_ids(art, config)[0], []))
    # Gate D
    memory = report.section("memory")
    memory["parameter_bytes"] = parameter_bytes(art)
    memory["payload_bytes"] = art.payload_bytes
    figures, issues = kv_cache(config, context=context, batch=batch) if text is not None else ({}, [])
    memory.update(figures)
    report.gate("D").check("parameter_bytes")
    report.gate("D").check("kv_cache")
    _add(report, issues)
    # Gate E
    section, issues, checks = _guarded(report, "E", lambda: check_supply_chain(art), ({}, [], []))
    report.section("supply_chain").update(section)
    for c in checks:
        report.gate("E").check(c)
    _add(report, issues)
    # Gate F
    issues, counts = _guarded(report, "F", lambda: check_auxiliaries(art, shapes), ([], {}))
    report.gate("F").check("auxiliaries")
    report.section("pre_run")["auxiliaries"] = counts
    _add(report, issues)
    _add(report, [Issue("NINFER_RUNTIME_RUN_REQUIRED", "static acceptance done; run convert verify OUT.ninfer "
                        "--source SRC (values, order probes, golden numerics) before calling it accepted")])
