"""``convert validate`` for ``.ninfer`` artifacts: static acceptance, one ``validation.json`` (docs/acceptance.md).

``validate_ninfer(path, *, context=None, batch=None) -> Report`` (schema ``ninfer-artifact-validation/v1``,
``converters.acceptance.report``), from the artifact alone. Its six gates are registered here
(:mod:`converters.acceptance.registry`, ids ``validate.<title>``, labels A–F):

- **A, filesystem** — the entry readable and regular; every declared part present, of its declared
  length, with this artifact's id; no symlink out of the directory; undeclared files named after the artifact
  reported (:mod:`converters.acceptance.gates.structure`).
- **B, schema** — the directory's schema rules; every object's encoding interpretable; each component's
  config complete enough for its architecture.
- **C, cross-reference** — references and ranges; binding coverage of every component (every required
  parameter bound in its logical shape, uses with the contract's inputs, no unconsumed object;
  :mod:`converters.acceptance.gates.coverage`): text against the text contract, MTP / vision / DFlash / DFlash2 against
  their mapping files read with their configs (:mod:`converters.acceptance.gates.required`), ``text.proposal``'s head
  and token map (:mod:`converters.acceptance.gates.proposal`).
- **D, capacity** — parameter bytes by component and format; KV-cache and gated-delta-net state bytes
  for ``context``/``batch`` (:mod:`converters.acceptance.gates.capacity`).
- **E, supply chain** — source identity and hash, converter, recipe, per-object transforms; missing →
  ``BLOCKED_REPRODUCIBILITY``; resources against their recorded sha256 (:mod:`converters.acceptance.gates.supply`).
- **F, pre-run** — codec validity of every object's bytes and the use auxiliaries
  (:mod:`converters.acceptance.gates.prerun`); then the hand-off: values, order and golden numerics need the source
  (``convert verify --source``).

The container checks run once (gate A) and each finding is filed under its code's letter (B, C and F take
the schema, reference and codec findings of that one pass). Gates D–F need the opened artifact and stay
``not_run`` without it. Codes: :mod:`converters.acceptance.gates.codes`, documented in
``docs/validation-codes.md``. ``--sanitized`` output drops absolute paths
(``converters.acceptance.report.sanitize``); ``package.path`` is the only absolute path written.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from converters.acceptance.gates.capacity import kv_cache, parameter_bytes
from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.coverage import check_coverage
from converters.acceptance.gates.prerun import check_auxiliaries
from converters.acceptance.gates.proposal import check_token_ids
from converters.acceptance.gates.required import expected_from_artifact
from converters.acceptance.gates.structure import ArtifactGateContext
from converters.acceptance.gates.supply import check_supply_chain
from converters.acceptance.registry import gate, guarded, new_report, run_gates
from converters.acceptance.report import SCHEMA_NINFER, Report
from converters.errors import ConverterError

GATE_A_CHECKS = ["entry_readable", "framing", "parts_present_and_sized", "part_identity", "symlinks", "unknown_files"]
GATE_B_CHECKS = ["directory_schema", "object_encodings", "text_config"]
GATE_C_CHECKS = ["references", "object_ranges", "binding_coverage", "uses", "objects_consumed", "proposal_token_ids"]


class ValidateRun(ArtifactGateContext):
    """What validate's gates share: the structure result and open artifact, its text config, the parameters
    its components require (from the text contract and the components' mapping files)."""

    files_by_code = True

    def __init__(self, report: Report, path: Path, context: int | None, batch: int | None):
        super().__init__(report, path)
        self.context, self.batch = context, batch

    def has(self, need: str) -> bool:
        return {"artifact": self.artifact is not None}[need]

    @cached_property
    def config(self) -> dict:
        text = self.artifact.components.get("text")
        return dict(text.config) if text is not None else {}

    @cached_property
    def expectation(self):
        return expected_from_artifact(self.artifact)


@gate("validate", "A", "filesystem",
      summary="the entry readable and regular; every declared part present, of its length, with this artifact's "
              "id; no symlink out of the directory; undeclared files named after the artifact")
def filesystem(run, g):
    g.check(*GATE_A_CHECKS)
    return run.structure.issues


@gate("validate", "B", "schema",
      summary="the directory's schema rules; every object's encoding interpretable; each component's config "
              "complete enough for its architecture")
def schema(run, g):
    g.check(*GATE_B_CHECKS[:2])
    if run.artifact is None:
        return []
    g.check("text_config")
    return run.expectation.issues


@gate("validate", "C", "cross_reference",
      summary="references and ranges; every component's required parameters bound in their logical shapes with "
              "their uses' inputs; no unconsumed object; text.proposal's token map")
def cross_reference(run, g):
    g.check(*GATE_C_CHECKS[:2])
    art = run.artifact
    if art is None:
        return []
    g.check(*GATE_C_CHECKS[2:])
    want = run.expectation
    found = check_coverage(art, want.expected, unchecked=want.unchecked, only_layer=_only_layer(art))
    found += guarded(g, found, lambda: check_token_ids(art, run.config)[0], [])
    return found


@gate("validate", "D", "capacity", needs=("artifact",),
      summary="parameter bytes by component and format; KV-cache and gated-delta-net state bytes for the service "
              "context and batch")
def capacity(run, g):
    art = run.artifact
    memory = run.report.section("memory")
    memory["parameter_bytes"] = parameter_bytes(art)
    memory["payload_bytes"] = art.payload_bytes
    has_text = art.components.get("text") is not None
    figures, found = kv_cache(run.config, context=run.context, batch=run.batch) if has_text else ({}, [])
    memory.update(figures)
    g.check("parameter_bytes", "kv_cache")
    return found


@gate("validate", "E", "supply_chain", needs=("artifact",),
      summary="source identity and hash, converter, recipe, per-object transforms (missing: "
              "BLOCKED_REPRODUCIBILITY); resources against their recorded sha256")
def supply_chain(run, g):
    found = []
    section, issues, checks = guarded(g, found, lambda: check_supply_chain(run.artifact), ({}, [], []))
    run.report.section("supply_chain").update(section)
    g.check(*checks)
    return found + issues


@gate("validate", "F", "pre_run", needs=("artifact",),
      summary="codec validity of every object's bytes and the use auxiliaries; then the hand-off to "
              "convert verify --source")
def pre_run(run, g):
    g.check("codec_values")
    found = []
    shapes = {n: e.shape for n, e in run.expectation.expected.items()}
    issues, counts = guarded(g, found, lambda: check_auxiliaries(run.artifact, shapes), ([], {}))
    g.check("auxiliaries")
    run.report.section("pre_run")["auxiliaries"] = counts
    return found + issues + [finding("NINFER_RUNTIME_RUN_REQUIRED", "static acceptance done; run convert verify "
                                     "OUT.ninfer --source SRC (values, order probes, golden numerics) before "
                                     "calling it accepted")]


def _only_layer(art) -> int | None:
    only = art.provenance.get("only_layer")
    return only if isinstance(only, int) else None


def validate_ninfer(path: str | os.PathLike, *, context: int | None = None, batch: int | None = None) -> Report:
    """The static acceptance report of the artifact whose entry file is ``path``."""
    path = Path(path)
    for value, flag in ((context, "--context"), (batch, "--batch")):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConverterError(f"{flag} must be a positive integer, got {value!r}", rule="validate_options")
    report = new_report("validate", SCHEMA_NINFER, {"name": path.name, "path": str(path.resolve())})
    run = ValidateRun(report, path, context, batch)
    try:
        if run.artifact is not None:
            _describe(report, run.artifact)
        return run_gates("validate", run)
    finally:
        run.structure.close()


def _describe(report: Report, art) -> None:
    """The package's identity and files, and each component's headline config (the ``components`` section)."""
    report.package.update(artifact_id=art.artifact_id, payload_bytes=art.payload_bytes,
                          files=[{"name": Path(f.location).name if f.location else report.package["name"],
                                  "bytes": f.file_bytes} for f in art.files])
    comps = report.section("components")
    for cid, comp in art.components.items():
        cfg = comp.config
        comps[cid] = {k: cfg[k] for k in ("architectures", "model_type", "num_hidden_layers", "hidden_size",
                                           "vocab_size") if k in cfg}
        if comp.target is not None:
            comps[cid]["target"] = comp.target
        comps[cid]["resources"] = sorted(comp.resources)
