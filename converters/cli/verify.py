"""``convert verify OUT.ninfer [--source SRC] [--mmproj FILE] [--drafter DIR ...] [--sweep] [--layers 0,3] [--json]``:
acceptance after writing.

Seven gates (:mod:`converters.acceptance.gates.verify`): structure, coverage, codec validity, values, order probes,
resources, golden numerics. Exit 0 when no gate fails (``pass``, or ``incomplete`` when gates were skipped
for want of ``--source``: printed as such, never as a pass), 1 when any gate fails. Components converted
from inputs of their own are compared with the same inputs, spelled as for ``convert gguf2ninfer``:
``--mmproj`` (the vision tower of a GGUF model) and ``--drafter`` (DFlash / DFlash2, repeatable). Objects
borrowed from a template (``--template`` conversions) are compared with the template: the one ``--template``
names, else the sha256 or template path provenance records (:mod:`converters.acceptance.gates.borrowed`).

Examples::

    convert verify out/model.ninfer --source model.gguf            # sampled layers
    convert verify out/model.ninfer --source ./hf-dir --sweep      # every layer
    convert verify out/model.ninfer --layers 0,3 --source model.gguf --json
    convert verify out/v.ninfer --source q35.gguf --mmproj mmproj.gguf --drafter ./Qwen3.5-DFlash2 --sweep
    convert verify out/bonsai.ninfer --source bonsai.gguf --template tpl.ninfer --sweep
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from converters.acceptance import record
from converters.acceptance.accept import golden_line, golden_summary
from converters.cli.output import command, console, emit_json, err_console, gate_progress, table
from converters.errors import ConverterError

#: what ``--source`` may be (:mod:`converters.sources.kind`): what the conversion commands read.
SOURCE_KINDS = ("gguf", "safetensors", "hf")
STYLE = {"pass": "green", "pass_with_warnings": "yellow", "fail": "bold red", "skipped": "yellow"}


def parse_layers(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated layer numbers, got {text!r}", param_hint="--layers") from None
    if not out or any(i < 0 for i in out):
        raise typer.BadParameter("expected one or more non-negative layer numbers", param_hint="--layers")
    return out


def print_report(r) -> None:
    rows = []
    for g in r.gates:
        status = g.status if g.skipped is None or g.status == "fail" else f"skipped: {g.skipped}"
        worst = next((i for i in g.issues if i.severity == "ERROR"), g.issues[0] if g.issues else None)
        evidence = "" if worst is None else f"{worst.code}: {worst.evidence}"
        more = len(g.issues) - 1
        if more > 0 and worst is not None:
            evidence += f" (+{more} more)"
        rows.append([g.number, g.title, f"[{STYLE.get(g.status, 'white')}]{status}[/]", evidence])
    console.print(table(f"verify {r.artifact}" + (f" against {r.source}" if r.source else " (no source)"),
                        ["gate", "name", "status", "evidence"], rows))
    g4, g7 = r.gate(4).evidence, r.gate(7).evidence
    if g4:
        console.print(f"values: layers {g4['layers']} ({g4['layers_bound']} bound), {g4['parameters']} parameters, "
                      f"{g4['exact']} exact, worst cosine {g4['worst_cosine']}")
        if "library_rule" in g4:  # a prequantized source (docs/acceptance.md §Prequantized sources)
            lr = g4["library_rule"]
            console.print(f"  {lr['parameters']} kept from a prequantized source: within {lr['max_ulp']} ulp of the "
                          f"library's {'/'.join(lr['dtypes'])} values")
        for cid, c in g4.get("components", {}).items():
            layers = f"layers {c['layers']}, " if "layers" in c else ""
            console.print(f"  {cid}: {layers}{c['parameters']} parameters" + (f" ({c['note']})" if "note" in c else ""))
    if "tokens" in g7:
        console.print(f"golden ({g7['covers']}): {len(g7['tokens'])} tokens, {g7['precision_class']} class, "
                      f"max abs error {g7['max_abs_error']:.4g}; {golden_line(golden_summary(g7))}")
    color = {"pass": "bold green", "incomplete": "bold yellow", "fail": "bold red"}[r.result]
    partial = next((f.detail for f in r.gate(4).findings if f.code == "VERIFY_SWEEP_PARTIAL"), None)
    count = f" (--sweep: {partial['layers_bound']}/{partial['layers']} text layers bound)" if partial else ""
    console.print(f"[{color}]VERIFY: {r.result.upper()}{count}[/]")


@command("verify")
def verify_cmd(
    artifact: Path = typer.Argument(..., help="Entry file of the artifact to accept.", show_default=False),
    source: Path = typer.Option(None, "--source", help="The GGUF file or HF directory it was converted from."),
    mmproj: Path = typer.Option(None, "--mmproj", help="The mmproj GGUF its vision tower was converted from."),
    tokenizer_dir: Path = typer.Option(None, "--tokenizer-dir", help="The tokenizer directory it was converted "
                                       "with (gguf2ninfer --tokenizer-dir)."),
    drafter: list[Path] = typer.Option(None, "--drafter", help="A DFlash / DFlash2 drafter directory it was "
                                       "converted with; repeatable."),
    template: Path = typer.Option(None, "--template", help="The template its borrowed objects were copied from "
                                  "(default: the path provenance records)."),
    sweep: bool = typer.Option(False, "--sweep", help="Compare every layer (default: a sample of layers)."),
    layers: str = typer.Option(None, "--layers", help="Compare these layers, e.g. 0,3."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Acceptance of a written artifact: seven gates, values and order compared with the source."""
    from converters.acceptance.gates.verify import verify
    from converters.sources.fileio import lexists
    from converters.sources.kind import require_kind

    chosen = parse_layers(layers)
    if sweep and chosen is not None:
        raise typer.BadParameter("--sweep and --layers exclude each other", param_hint="--layers")
    if not lexists(artifact):
        raise ConverterError("artifact does not exist", file=str(artifact), rule="verify_target")
    if os.path.exists(artifact):  # a damaged artifact goes on: the gates report what is wrong with it
        require_kind(artifact, ("ninfer",), command="verify", rule="verify_target", pass_unrecognised=True)
    if source is not None:
        require_kind(source, SOURCE_KINDS, command="verify --source")
    inputs = {"mmproj": mmproj, "drafter": list(drafter or []) or None, "tokenizer_dir": tokenizer_dir}
    if source is None and any(inputs.values()):
        raise typer.BadParameter("--mmproj / --drafter / --tokenizer-dir are compared with --source: give the main "
                                 "source too",
                                 param_hint="--source")
    if template is not None and not template.exists():
        raise ConverterError("template does not exist", file=str(template), rule="verify_template")
    with gate_progress(disable=json_out) as bar:
        report = verify(artifact, source, inputs=inputs, sweep=sweep, layers=chosen, template=template, progress=bar)
    rec, note = _record(artifact, source, inputs, template, sweep, report)
    if json_out:
        emit_json({**report.to_json(), "acceptance_record": rec})
    else:
        print_report(report)
        if note:
            err_console.print(note, highlight=False, soft_wrap=True)
        console.print(record.describe(artifact, rec), highlight=False, markup=False, soft_wrap=True)
    if report.result == "fail":
        raise typer.Exit(1)


def _record(artifact: Path, source, inputs: dict, template, sweep: bool, report) -> tuple[dict, str | None]:
    """The acceptance record beside the artifact (docs/acceptance.md §Acceptance record): with ``--source``
    this run is an acceptance and replaces it; without, it is read. Returns the record as readers see it and
    a note when it could not be written (a read-only directory: the verdict stands, the record does not)."""
    from converters.acceptance.accept import artifact_id_of
    from converters.sources.atomic_write import OutputWriteError

    aid = artifact_id_of(artifact)
    if source is not None and aid is not None:
        finish = record.finish_command(artifact, source, inputs={k: v for k, v in inputs.items() if v},
                                       template=template, sweep=sweep)
        try:
            record.write(artifact, record.make(aid, artifact, state="judged", by="convert verify", finish=finish,
                                               report=report))
        except OutputWriteError as exc:
            return record.read(artifact, aid), f"acceptance record not written: {exc}"
    return record.read(artifact, aid), None
