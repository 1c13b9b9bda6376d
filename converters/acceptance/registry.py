"""The gate registry: every acceptance gate of ``convert check``, ``verify`` and ``validate`` in one naming scheme
(docs/acceptance.md §Gate registry).

A gate is a function ``run(ctx, gate) -> findings`` registered with :func:`gate`: its id (``verify.values``,
``validate.filesystem``, ``check.geometry``: the command, then what it checks), its label in the command's
output (verify's and check's numbers, validate's letters A–F), its title, what it needs (``artifact``,
``source``, …: a need the run's context cannot meet skips the gate before it runs) and a one-line summary.
It records the checks it ran, its evidence and any skip reason on ``gate`` (the report's
:class:`~converters.acceptance.report.Gate`) and returns its findings. A command is the loop
:func:`run_gates`: the registered gates of its kind, in label order, each timed, its findings filed in the
report, and a :class:`~converters.acceptance.progress.GateProgress` attached to the context told of each gate's
start, steps and end. The modules that define a kind's gates register them when imported:
:mod:`converters.acceptance.check` (check), :mod:`converters.acceptance.gates.verify_gates` (verify) and
:mod:`converters.acceptance.validate_ninfer` (validate).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from converters.acceptance.gates.codes import finding
from converters.acceptance.progress import GateProgress
from converters.acceptance.report import Finding, Gate, Report
from converters.errors import ConverterError
from ninfer_core.errors import NinferError

KINDS = ("check", "verify", "validate")


@dataclass(frozen=True)
class GateSpec:
    """One registered gate (see the module docstring)."""

    id: str
    kind: str
    label: str
    title: str
    needs: tuple[str, ...]
    summary: str
    run: Callable[..., Iterable[Finding]]


_GATES: dict[str, GateSpec] = {}


def gate(kind: str, label: str, title: str, *, needs: tuple[str, ...] = (), summary: str):
    """Register the decorated ``run(ctx, gate) -> findings`` as the gate ``<kind>.<title>``."""
    if kind not in KINDS:
        raise ConverterError(f"unknown gate kind {kind!r} (expected one of {', '.join(KINDS)})", rule="gate_kind")

    def register(run: Callable[..., Iterable[Finding]]):
        spec = GateSpec(f"{kind}.{title}", kind, label, title, tuple(needs), summary, run)
        clash = [s.id for s in _GATES.values() if s.id != spec.id and s.kind == kind and s.label == label]
        if clash:
            raise ConverterError(f"gate {spec.id}: label {label} is taken by {clash[0]}", rule="gate_label")
        _GATES[spec.id] = spec
        return run

    return register


def gates_of(kind: str) -> tuple[GateSpec, ...]:
    """The registered gates of ``kind`` in label order (1, 2, …; A, B, …)."""
    return tuple(sorted((s for s in _GATES.values() if s.kind == kind), key=lambda s: (len(s.label), s.label)))


def new_report(kind: str, schema: str, package: dict | None = None) -> Report:
    """An empty report whose gates are ``kind``'s registered gates."""
    return Report(schema, package, gates=[(s.label, s.title, s.id) for s in gates_of(kind)])


class GateContext:
    """What one command's run of its gates shares: the report, the inputs, what earlier gates computed.

    A kind's context says which needs it meets (:meth:`has`) and what a gate that lacks one reports
    (:meth:`unmet`); ``files_by_code`` is True where findings are filed under their code's gate (validate's
    letters) instead of under the gate that reported them (verify, check)."""

    files_by_code = False
    progress: GateProgress | None = None  # told when each gate starts and ends, and of its steps (progress.py)

    def __init__(self, report: Report):
        self.report = report

    def step(self, done: int, total: int) -> None:
        """The running gate has done ``done`` of ``total`` units of its work (shown when a bar is attached)."""
        if self.progress is not None:
            self.progress.step(done, total)

    def has(self, need: str) -> bool:
        raise NotImplementedError

    def unmet(self, gate: Gate, need: str) -> list[Finding]:
        """Nothing: a gate that could not run stays ``not_run``."""
        return []


def run_gates(kind: str, ctx: GateContext) -> Report:
    """Run ``kind``'s registered gates in order on ``ctx`` and return its report."""
    for spec in gates_of(kind):
        target = ctx.report.gate(spec.label)
        if ctx.progress is not None:
            ctx.progress.start(kind, spec.label, spec.title)
        t0 = time.perf_counter()
        need = next((n for n in spec.needs if not ctx.has(n)), None)
        found = ctx.unmet(target, need) if need is not None else spec.run(ctx, target)
        ctx.report.extend(found, None if ctx.files_by_code else target.name)
        target.seconds += time.perf_counter() - t0
        if ctx.progress is not None:
            ctx.progress.finish(spec.label, target.status, target.seconds)
    return ctx.report


def guarded(gate: Gate, found: list[Finding], run: Callable, default):
    """``run()``, or ``default`` with a ``NINFER_READ_FAILED`` finding in ``found`` when reading the artifact
    fails: a damaged part is the structure gate's finding; the gates after it report what they could not
    read instead of stopping."""
    try:
        return run()
    except NinferError as exc:
        found.append(finding("NINFER_READ_FAILED", f"gate {gate.name} ({gate.title}) could not complete: "
                             f"{exc.message} [rule {exc.rule}]"))
        return default


__all__ = ["KINDS", "GateContext", "GateSpec", "gate", "gates_of", "guarded", "new_report", "run_gates"]
