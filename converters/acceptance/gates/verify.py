"""``convert verify``: acceptance of a written artifact, seven gates with pass/fail and evidence (docs/acceptance.md).

A written artifact is not an accepted artifact, and a check that only counts bytes passes on wrongly ordered
rows. The gates (:mod:`converters.acceptance.gates.verify_gates`, registered in
:mod:`converters.acceptance.registry`), in order:

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
explicit ``layers`` choose the text layers (components keep their sample); gate 7 runs the text model on a few
tokens, every layer up to ``numerics.FULL_FORWARD_ELEMENTS`` text parameters or with ``sweep``, else a stated
subset (docs/acceptance.md §Golden at scale). A gate that could not run because an earlier one failed (no artifact to read) is
``skipped`` with that reason.

Objects borrowed from a template (``--template`` conversions, provenance ``borrowed_from``) are compared with
the template, not the source (:mod:`converters.acceptance.gates.borrowed`): tensors in gate 4, resources in gate 6, each
"borrowed, identical to template" or ``VERIFY_BORROWED_MISMATCH``. The source is not asked for a component
whose own objects are all borrowed (a vision tower lent to a GGUF build), nor for a parameter whose bound
objects all are; such a component's bindings are checked against its mapping file (as without a source).
``template`` (an explicit template path) takes precedence over what provenance records.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

from converters.acceptance.gates import borrowed as lent
from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.structure import ArtifactGateContext
from converters.acceptance.gates.verify_gates import compare_parameters
from converters.acceptance.registry import gates_of, run_gates
from converters.acceptance.report import SCHEMA_VERIFY, Gate, Report
from converters.errors import ConverterError

SCHEMA = SCHEMA_VERIFY
#: ``(number, name)`` of each verify gate, in order (from the registry)
GATES = tuple((int(s.label), s.title) for s in gates_of("verify"))
NO_SOURCE = "no source"


class VerifyReport(Report):
    """The one acceptance report (:class:`~converters.acceptance.report.Report`) plus what verify compared: the
    ``artifact``, the ``source``, the components' ``inputs`` and the text ``layers`` gates 4–5 compared
    (``"all"`` in the JSON with ``sweep``), emitted as the document's leading fields."""

    def __init__(self, artifact: str, source: str | None, layers: list[int] | None, sweep: bool,
                 inputs: dict | None = None):
        super().__init__(SCHEMA_VERIFY, gates=[(s.label, s.title, s.id) for s in gates_of("verify")])
        self.artifact, self.source, self.layers, self.sweep, self.inputs = artifact, source, layers, sweep, inputs or {}

    def to_json(self, sanitized: bool = False) -> dict:
        self.sections.update(artifact=self.artifact, source=self.source, inputs=self.inputs,
                             layers="all" if self.sweep else self.layers)
        return super().to_json(sanitized)


class VerifyRun(ArtifactGateContext):
    """What verify's gates share: the inputs, the structure result and open artifact, the opened source, and
    what earlier gates computed (gate 2's expected parameters and token ids, gate 4's borrowed objects)."""

    NO_SOURCE = NO_SOURCE

    def __init__(self, report: VerifyReport, path: Path, source, inputs, sweep: bool, layers, template):
        super().__init__(report, path)
        self.source, self.inputs, self.sweep, self.layers, self.template = source, inputs, sweep, layers, template
        self.expected: dict = {}
        self.token_ids = None
        self.lent_findings: list = []
        self.lent_rows: list[dict] = []
        self.proposal_note = None

    # -- what the gates need ----------------------------------------------------------------------
    def has(self, need: str) -> bool:
        return {"artifact": self.artifact is not None, "source": self.model is not None}[need]

    def unmet(self, gate: Gate, need: str) -> list:
        if need == "artifact":
            gate.skip(self.unopened)
            return []
        return self.skip_no_source(gate)

    def skip_no_source(self, gate: Gate) -> list:
        gate.skip(NO_SOURCE)
        return [finding("VERIFY_SKIPPED_NO_SOURCE", f"gate {gate.name} ({gate.title}) compares with the source: "
                        "pass --source (the GGUF file or HF directory the artifact was converted from)")]

    @property
    def unopened(self) -> str:
        return f"the artifact cannot be opened ({self.structure.open_error})"

    @cached_property
    def config(self) -> dict:
        text = self.artifact.components.get("text")
        return dict(text.config) if text is not None else {}

    @property
    def only_layer(self) -> int | None:
        only = self.artifact.provenance.get("only_layer")
        return only if isinstance(only, int) else None

    @cached_property
    def borrowed(self) -> dict:
        return lent.borrowed_entries(self.artifact)

    @cached_property
    def lent_components(self) -> set[str]:
        return lent.borrowed_components(self.artifact, self.borrowed)

    @cached_property
    def model(self):
        """The opened source (its components less those lent by a template), or None without one."""
        if self.source is None or self.artifact is None:
            return None
        from converters.model.engine import open_model

        return open_model(self.source, components=[c for c in _components(self.artifact)
                                                   if c not in self.lent_components], inputs=self.inputs)

    # -- gates 4-5's comparison -------------------------------------------------------------------
    @cached_property
    def chosen(self) -> dict[str, list[int]]:
        """Component → the layers gates 4–5 compare: all with ``sweep``; the text layers asked for when given;
        else the first layer of each kind and the last (:func:`sample_layers`), per component. A minimal
        artifact (provenance ``only_layer``) is compared on its one layer."""
        model = self.model
        n_layers = len(model.bound.layer_kinds)
        if self.only_layer is not None:
            text = [self.only_layer]
        elif self.sweep:
            text = list(range(n_layers))
        elif self.layers is not None:
            bad = [i for i in self.layers if not 0 <= i < n_layers]
            if bad:
                raise ConverterError(f"--layers {bad[0]}: the model has layers 0..{n_layers - 1}", rule="verify_layers")
            text = self.layers
        else:
            text = sample_layers(list(model.bound.layer_kinds))
        out = {"text": text}
        for cid, rec in model.component_records.items():
            kinds = list(rec.args.layer_kinds())
            out[cid] = list(range(len(kinds))) if self.sweep else sample_layers(kinds)
        return out

    @cached_property
    def compared(self) -> list:
        """The source parameters gates 4–5 compare: those of the chosen layers, less the borrowed."""
        chosen, borrowed = self.chosen, set(self.borrowed)
        return [p for p in self.model.bound.parameters if (p.layer is None or p.layer in chosen.get(p.component, ()))
                and not lent.parameter_borrowed(self.artifact, p.name, borrowed)]

    @cached_property
    def parameter_check(self):
        return compare_parameters(self)

    @cached_property
    def checked(self) -> list[dict]:
        return [c.to_dict() for c in self.parameter_check.checked]

    def close(self) -> None:
        if "model" in self.__dict__ and self.model is not None and not hasattr(self.source, "tensors"):
            self.model.close()
        if "structure" in self.__dict__:
            self.structure.close()


def sample_layers(layer_kinds: list[str]) -> list[int]:
    """The first layer of each kind and the last layer (a Qwen3.5 model: layer 0 is GDN, layer 3 attention)."""
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
           layers: Iterable[int] | None = None, template=None, progress=None) -> VerifyReport:
    """Run the seven gates on the artifact whose entry is ``path``, comparing with ``source`` when given
    (a GGUF file, an HF directory, or an open Source) and the components' own ``inputs``; borrowed objects
    with ``template`` when given, else with what provenance records. ``progress``: a
    :class:`~converters.acceptance.progress.GateProgress` told of each gate's start, steps and end."""
    path = Path(path)
    layer_list = sorted(set(layers)) if layers is not None else None
    report = VerifyReport(str(path), None if source is None else str(getattr(source, "path", source)),
                          layer_list, sweep, _input_names(inputs))
    run = VerifyRun(report, path, source, inputs, sweep, layer_list, template)
    run.progress = progress
    try:
        run_gates("verify", run)
    finally:
        run.close()
    return report


__all__ = ["GATES", "SCHEMA", "VerifyReport", "VerifyRun", "sample_layers", "verify"]
