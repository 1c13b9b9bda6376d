"""Build-then-accept: a written artifact is not yet an accepted one (docs/cli.md §Build then accept).

``convert gguf2ninfer`` / ``st2ninfer`` run the verify gates (:func:`converters.acceptance.gates.verify.verify`)
on what they wrote, against the same source, inputs and template, and end with one verdict line.
:func:`accept_written` is that step; :class:`Acceptance` says what it found: the verdict, and for every
failed gate its first failing parameter and where its threshold is documented. A failed acceptance
leaves the artifact in place (it is complete and valid as a container; its values are not accepted). With
``record_by`` the acceptance record beside the artifact (:mod:`converters.acceptance.record`) says so:
``accepting`` before the gates run, then the verdict, or ``interrupted`` / ``error`` when they are stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

#: where each verify gate's threshold is written down, with why it is set there.
THRESHOLD_DOCS = {4: "docs/thresholds.md §Tolerance", 5: "docs/thresholds.md §Tolerance",
                  7: "docs/thresholds.md §Golden"}
GATE_DOC = "docs/acceptance.md §verify gates"


@dataclass
class Acceptance:
    """The verify report of a just-written artifact, and how it was run."""

    output: Path
    source: Path
    report: object  # converters.acceptance.gates.verify.VerifyReport
    sweep: bool
    finish: str = ""  # the convert verify command that repeats this acceptance (record.finish_command)
    record: dict | None = None  # the acceptance record written beside the artifact, if one was
    seconds: float = 0.0  # wall time of the whole acceptance

    @property
    def verdict(self) -> str:
        """``pass``, ``incomplete`` (a gate was skipped) or ``fail`` (docs/cli.md §JSON contract)."""
        return self.report.result

    def failures(self) -> list[dict]:
        """One entry per failed gate: its number and title, the code and parameter of its first error, the
        evidence, and the page documenting its threshold."""
        out = []
        for g in self.report.gates:
            if g.status != "fail":
                continue
            first = next((f for f in g.issues if f.severity == "ERROR"), g.issues[0] if g.issues else None)
            out.append({"gate": g.number, "title": g.title, "code": None if first is None else first.code,
                        "parameter": None if first is None else first.path,
                        "evidence": None if first is None else first.evidence,
                        "threshold": THRESHOLD_DOCS.get(g.number, GATE_DOC)})
        return out

    def next_step(self) -> str:
        """What to do after a failed acceptance."""
        sweep = "" if self.sweep else " --sweep"
        return (f"the artifact is kept at {self.output} but is NOT accepted; see the full report with convert verify "
                f"{self.output} --source {self.source}{sweep}, then convert again with more bits for the named "
                "parameter (--tensor-type PATTERN=FORMAT, or --recipe bf16 / exact)")

    def lines(self) -> list[str]:
        """The verdict line, then one line per failed gate and the next step (docs/cli.md §Build then accept)."""
        layers = "every layer" if self.sweep else "sampled layers (--verify-sweep: every layer)"
        golden = self.report.gate(7).evidence
        if golden.get("truncated"):  # a truncated reference forward (docs/acceptance.md §Golden at scale)
            layers += f"; golden forward through {golden['layers_run']}"
        head = f"ACCEPT: {self.verdict.upper()} (convert verify, {len(self.report.gates)} gates, {layers})"
        if self.verdict == "fail":  # what is on disk, last (docs/cli.md §Build then accept)
            head += f": {self.output} written, NOT accepted; full report: {self.finish}{'' if self.sweep else ' --sweep'}"
        if self.verdict == "incomplete":
            skipped = [f"gate {g.number} {g.title}: {g.skipped}" for g in self.report.gates if g.skipped]
            head += "; skipped " + "; ".join(skipped)
        out = [head]
        for f in self.failures():
            where = f" parameter {f['parameter']}:" if f["parameter"] else ""
            out.append(f"FAIL gate {f['gate']} ({f['title']}):{where} {f['code']}: {f['evidence']} "
                       f"(threshold: {f['threshold']})")
        if self.verdict == "fail":
            out.append(f"next: {self.next_step()}")
        return out

    def to_json(self) -> dict:
        """The ``acceptance`` block of the conversion document."""
        golden = self.report.gate(7).evidence
        return {"verdict": self.verdict, "sweep": self.sweep, "failures": self.failures(),
                "gates": [{"gate": g.number, "title": g.title, "status": g.status, "seconds": round(g.seconds, 3)}
                          for g in self.report.gates], "seconds": round(self.seconds, 3),
                **({"golden_layers": golden["layers_run"], "golden_truncated": golden["truncated"]}
                   if "layers_run" in golden else {}),
                **({"golden": golden_summary(golden)} if "structure" in golden else {}),
                **({"next": self.next_step()} if self.verdict == "fail" else {}),
                **({"record": self.record["record"], "accepted": self.record["accepted"]} if self.record else {})}


def golden_summary(evidence: dict) -> dict:
    """Gate 7's two answers in brief (docs/acceptance.md §Golden: two questions): the structure's cosine and
    top-1, the cost's against its budget, and the layer where the cost is largest."""
    s = evidence["structure"]
    worst = min(evidence.get("per_layer") or [], key=lambda r: r["cosine"], default=None)
    return {"structure": {k: s[k] for k in ("cosine", "top1_agreement", "second_forward")},
            "cost": {"cosine": evidence["cosine"], "top1_agreement": evidence["top1_agreement"],
                     "budget": evidence["thresholds"], "budget_from": evidence["budget_from"], "worst_layer": worst}}


def golden_line(summary: dict) -> str:
    """One line of :func:`golden_summary` for people."""
    s, c = summary["structure"], summary["cost"]
    worst = f", worst layer {c['worst_layer']['layer']} ({c['worst_layer']['cosine']:.6f})" if c["worst_layer"] else ""
    return (f"structure cosine {s['cosine']:.6f}, top-1 {s['top1_agreement']:.3f}"
            f"{'' if s['second_forward'] else ' (every value reads back: one computation)'}; cost cosine "
            f"{c['cosine']:.6f}, top-1 {c['top1_agreement']:.3f} against {c['budget']['cosine']:.9g} / "
            f"{c['budget']['top1_agreement']:g} ({c['budget_from']}){worst}")


def accept_written(output, source, *, inputs: dict | None = None, template=None, sweep: bool = False,
                   record_by: str | None = None, progress=None) -> Acceptance:
    """Run the verify gates on the artifact just written at ``output`` against ``source`` (and the
    components' ``inputs`` and the ``template``, as the conversion read them); every layer with ``sweep``;
    ``progress`` as for :func:`~converters.acceptance.gates.verify.verify`.

    With ``record_by`` (the command, e.g. ``convert gguf2ninfer``) the acceptance record beside ``output``
    is written before the gates run and replaced with their verdict; an interrupt (``KeyboardInterrupt``,
    SIGTERM included: :func:`converters.cli.output.interrupts`) or an error stops them with the record saying
    so, and is raised again."""
    from converters.acceptance import record
    from converters.acceptance.gates.verify import verify

    inputs = {k: v for k, v in (inputs or {}).items() if v}
    finish = record.finish_command(output, source, inputs=inputs, template=template, sweep=sweep)
    aid = artifact_id_of(output) if record_by is not None else None

    def note(state: str, **kw) -> dict | None:
        if aid is None:
            return None
        doc = record.make(aid, output, state=state, by=record_by, finish=finish, **kw)
        record.write(output, doc)
        return {**doc, "record": record.record_path(output).name}

    note("accepting")
    started = time.perf_counter()
    try:
        report = verify(output, source, inputs=inputs or None, sweep=sweep, template=template, progress=progress)
    except KeyboardInterrupt as exc:
        note("interrupted", reason=getattr(exc, "signal_name", None) or "Ctrl-C")
        raise
    except Exception as exc:
        note("error", reason=str(exc))
        raise
    seconds = time.perf_counter() - started
    return Acceptance(Path(output), Path(source), report, sweep, finish, note("judged", report=report), seconds)


def artifact_id_of(output) -> str | None:
    """The ID of the artifact at ``output`` (its directory only), or None when it cannot be opened."""
    from ninfer_core import open_artifact
    from ninfer_core.errors import NinferError

    try:
        with open_artifact(output) as art:
            return art.artifact_id
    except (NinferError, OSError):
        return None
