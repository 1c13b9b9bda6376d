"""``convert gguf2ninfer`` and ``convert st2ninfer``: a GGUF file or an HF safetensors directory → ``.ninfer``.

The flags become one :class:`converters.pipeline.convert.ConvertOptions` (the parameters of
:func:`converters.pipeline.convert.convert`, same names) and one library call,
:func:`converters.scaleout.run.run_conversion`, runs it here or staged. The output is refused if it
exists and the recipe is validated before the input is read; ``--dry-run`` prints the plan and writes
nothing. Progress (stderr): the whole payload and each object in flight, with bytes/s. Result: a
summary table (total, produced, borrowed by prefix, objects, exactness counts) or, with ``--json``, one
JSON document.

Examples::

    convert gguf2ninfer model.gguf out/model.ninfer --recipe exact
    convert st2ninfer ./Qwen3.5-27B out/q.ninfer --recipe groupwise-int --max-file-bytes 4GiB
    convert gguf2ninfer bonsai.gguf out/b.ninfer --template tpl.ninfer --only-layer 3 --dry-run
    convert gguf2ninfer model.gguf out/r.ninfer --recipe exact --artifact-id-from-content --workers 4
    convert gguf2ninfer model.gguf /shared/m.ninfer --plan-only /shared/m.plan.json   # then encode, seal
    convert gguf2ninfer model.gguf /shared/m.ninfer --backend dask --scheduler tcp://head:8786
    convert st2ninfer ./Qwen3.5-VL out/t.ninfer --components text,vision,mtp
    convert gguf2ninfer q35.gguf out/v.ninfer --components text,vision,dflash2 --mmproj mmproj.gguf \
        --drafter ./Qwen3.5-DFlash2 --proposal indexed --proposal-counts counts.tsv --proposal-rows 32768

Components (container §4.2): ``--components`` lists what is converted (``text`` always; ``mtp``,
``vision``, ``dflash``, ``dflash2``); ``--mmproj`` gives the vision tower of a GGUF model, ``--drafter`` a
DFlash / DFlash2 drafter directory (repeatable; each is matched to its component by its config). A
selected component the inputs do not provide fails before anything is written, naming it.
``--proposal full|indexed`` adds ``text.proposal`` (§9.2); ``indexed`` takes the ``--proposal-rows`` most
frequent tokens of ``--proposal-counts`` (TSV ``token_id<TAB>count`` or JSON ``{"counts": {...}}``).

Reproducible output: ``--artifact-id HEX`` or ``--artifact-id-from-content`` (the ID is a digest of the
written content) give byte-identical files for the same inputs, whatever ``--workers``. Scale-out
(:mod:`converters.cli.scaleout`): ``--plan-only PLAN.json`` stages the files and stops (then ``convert
encode`` / ``convert seal``); ``--backend dask [--scheduler ADDR]`` runs every step with the encoding on
a Dask cluster. Both give the same bytes as the one-process conversion.
"""

from __future__ import annotations

import threading
from pathlib import Path

import typer

from converters.acceptance.accept import golden_line
from converters.cli.output import (
    byte_progress,
    command,
    console,
    emit_json,
    err_console,
    gate_progress,
    interrupt_document,
    interrupt_name,
    interrupt_reported,
    interrupts,
    report_error,
    table,
)

SOURCE_HELP = {"gguf": "GGUF file to convert (any shard of a gguf-split set reads the whole set; default: "
                       "$NINFER_TERNARY_GGUF, when only OUTPUT is given).",
               "hf": "HF checkpoint directory (config.json, safetensors, tokenizer)."}


def _components(text: str) -> tuple[str, ...]:
    comps = tuple(c.strip() for c in text.split(",") if c.strip())
    if not comps:
        raise typer.BadParameter("--components needs at least one component", param_hint="--components")
    return comps


def render_outcome(outcome, options, json_out: bool, acceptance=None, *, allow_requantize: bool = True) -> None:
    """What :func:`converters.scaleout.run.run_conversion` did: the summary (with ``--dry-run`` the plan
    first), or what ``--plan-only`` staged; the requantization warning unless ``allow_requantize``; then the
    acceptance's verdict (docs/cli.md §Build then accept)."""
    from converters.scaleout.run import StagedRun

    if isinstance(outcome, StagedRun) and outcome.staged is not None:
        print_staged(outcome.staged, json_out)
        return
    summary = outcome.summary if isinstance(outcome, StagedRun) else outcome.summary()
    if acceptance is not None:
        summary = {**summary, "verdict": acceptance.verdict, "acceptance": acceptance.to_json()}
        if "seconds" in summary:  # the whole command's work: writing and acceptance
            summary["total_seconds"] = round(summary["seconds"] + acceptance.seconds, 3)
    if json_out:
        emit_json({**summary, "objects_detail": outcome.object_rows()} if options.dry_run else summary)
        if not allow_requantize:
            warn_requantize(summary)
        return
    if isinstance(outcome, StagedRun):
        print_summary(summary)
        print_acceptance(acceptance)
        return
    if options.dry_run:
        rows = [[r["id"], r.get("format", r["kind"]), r.get("format_rule", ""), "×".join(map(str, r.get("shape", []))),
                 f"{r['bytes']:,}", r["exactness"], r["origin"], ",".join(r.get("method", []))]
                for r in outcome.object_rows()]
        console.print(table(f"plan: {Path(options.output).name} (nothing written)",
                            ["object", "format", "chosen by", "shape", "bytes", "exactness", "origin", "method"], rows))
    print_summary(summary)
    if not allow_requantize:
        warn_requantize(summary)
    print_acceptance(acceptance)


def warn_requantize(summary: dict) -> None:
    """One warning line on stderr when objects of a quantized source were requantized (docs/recipes.md
    §Requantizing a quantized source); ``--allow-requantize`` silences it, as llama-quantize's flag does."""
    from converters.cli.output import err_console

    r = summary.get("requantized_quantized_source")
    if not r:
        return
    err = (f"worst cosine {r['worst_cosine']:.6f} ({r['worst_object']})" if r["worst_cosine"] is not None
           else "error measured when written")
    err_console.print(f"warning: {r['objects']} objects of a quantized source ({', '.join(r['source_types'])}) "
                      f"are requantized, {err}; --allow-requantize silences this "
                      "(docs/recipes.md §Requantizing a quantized source)", style="yellow", highlight=False,
                      markup=False, soft_wrap=True)


def print_acceptance(acceptance) -> None:
    """The verdict line (and, on failure, each failed gate and what to do next), unless acceptance was skipped
    or ``NINFER_ACCEPT_QUIET`` is set (the exit status still says it)."""
    from converters.cli.ternary_env import accept_quiet

    if acceptance is None or accept_quiet():
        return
    color = {"pass": "bold green", "incomplete": "bold yellow", "fail": "bold red"}[acceptance.verdict]
    head, *rest = acceptance.lines()
    for line in rest:
        console.print(line, style="red" if line.startswith("FAIL") else None, highlight=False, markup=False,
                      soft_wrap=True)
    console.print(head, style=color, highlight=False, markup=False, soft_wrap=True)


def print_staged(info: dict, json_out: bool) -> None:
    """``--plan-only``: what was staged, and the next commands."""
    if json_out:
        emit_json(info, schema="ninfer-staged/v1")  # not the conversion's summary (docs/cli.md §JSON contract)
        return
    console.print(table(f"staged: {Path(info['output']).name} (nothing encoded yet)", ["", "value"],
                        [[k, f"{v:,}" if isinstance(v, int) else v] for k, v in info.items()]))
    console.print(f"next: convert encode {info['plan']} [--shard K/N] …, then convert seal {info['plan']}")


def _staging(artifact_id: str | None, from_content: bool, plan_only: Path | None, backend: str,
             scheduler: str | None, dry_run: bool) -> dict:
    """The reproducibility / scale-out flags, checked together (before any input is read), as
    :class:`~converters.pipeline.convert.ConvertOptions` fields."""
    if artifact_id is not None and from_content:
        raise typer.BadParameter("--artifact-id and --artifact-id-from-content exclude each other",
                                 param_hint="--artifact-id")
    if artifact_id is not None:
        from ninfer_core.container.writer import artifact_id_bytes

        artifact_id = artifact_id_bytes(artifact_id).hex()
    if backend not in ("local", "dask"):
        raise typer.BadParameter(f"--backend {backend!r}: choose local or dask", param_hint="--backend")
    if scheduler is not None and backend != "dask":
        raise typer.BadParameter("--scheduler needs --backend dask", param_hint="--scheduler")
    if dry_run and (plan_only is not None or backend != "local"):
        raise typer.BadParameter("--dry-run writes nothing; it excludes --plan-only and --backend dask",
                                 param_hint="--dry-run")
    if plan_only is not None and backend != "local":
        raise typer.BadParameter("--plan-only stops after planning; run convert encode on the backend you like",
                                 param_hint="--plan-only")
    return {"artifact_id": artifact_id, "artifact_id_from_content": from_content, "plan_only": plan_only,
            "backend": backend, "scheduler": scheduler}


class _Bars:
    """One bar for the whole payload and one per object in flight (bytes, bytes/s), thread-safe."""

    def __init__(self, progress) -> None:
        self.progress = progress
        self.lock = threading.Lock()
        self.sizes: dict[str, int] = {}
        self.tasks: dict[str, tuple[int, int]] = {}  # object id → (task, bytes so far)
        self.total = None
        self.started = False

    def plan(self, objects) -> None:
        """The objects are known: the bar starts now (so an argument or input error prints no bar line)."""
        self.sizes = {o.id: o.bytes for o in objects}
        self.progress.start()
        self.started = True
        self.total = self.progress.add_task("total", total=sum(self.sizes.values()))

    def stop(self) -> None:
        if self.started:  # a bar never started prints nothing (rich's stop writes a newline when not a terminal)
            self.progress.stop()

    def advance(self, object_id: str, n: int) -> None:
        with self.lock:
            task, done = self.tasks.get(object_id) or (self.progress.add_task(object_id, total=self.sizes[object_id]), 0)
            self.progress.advance(task, n)
            self.progress.advance(self.total, n)
            done += n
            if done >= self.sizes[object_id]:
                self.progress.remove_task(task)
                self.tasks.pop(object_id, None)
            else:
                self.tasks[object_id] = (task, done)


def print_summary(s: dict) -> None:
    rows = [["output", s["output"] + (" (dry run: not written)" if s["dry_run"] else "")],
            ["architecture / source", f"{s['architecture']} / {s['source_kind']}"], ["recipe", s["recipe"]],
            ["objects", s["objects"]], ["total bytes", f"{s['total_bytes']:,}"],
            ["produced", f"{s['produced']['objects']} objects, {s['produced']['bytes']:,} bytes"],
            ["borrowed", f"{s['borrowed']['objects']} objects, {s['borrowed']['bytes']:,} bytes"]]
    for what in ("produced", "borrowed"):
        for p, e in sorted(s[what].get("by_prefix", {}).items()):
            rows.append([f"  {what} {p}/", f"{e['objects']} objects, {e['bytes']:,} bytes"])
    for k in ("bit-exact", "value-exact", "requantized"):
        if k in s["exactness"]:
            rows.append([f"exactness {k}", s["exactness"][k]])
    if "prequantized" in s:  # objects read from a prequantized source (docs/prequantized.md)
        q = s["prequantized"]
        labels = ", ".join(f"{k} {v}" for k, v in q["exactness"].items())
        ulp = f", max {q['max_ulp']} ulp from the library's values" if q["max_ulp"] is not None else ""
        rows.append(["prequantized source", f"{q['objects']} objects ({', '.join(q['kinds'])}): {labels}{ulp}"])
    if "exactness_check" in s:  # ternary transcodes: codes and multipliers compared with the source blocks
        c = s["exactness_check"]
        rows.append(["ternary codes and multipliers", f"{'equal' if c['codes_and_multipliers_equal'] else 'DIFFER'} "
                     f"({c['pieces']} pieces of {c['objects']} objects, {c['elements']:,} elements compared)"])
    if "worst_cosine" in s:
        w = s["worst_cosine"]
        rows.append(["worst cosine", f"{w['cosine']:.6f} ({w['object']}, max abs {w['max_abs']:g})"])
    if s.get("only_layer") is not None:
        rows.append(["only layer", s["only_layer"]])
    if not s["dry_run"]:
        rows += [["artifact_id", s["artifact_id"]], ["files", len(s["files"])], ["seconds", f"{s['seconds']:,.3f}"]]
        if "total_seconds" in s:  # acceptance ran (docs/acceptance.md §Progress)
            if "golden" in s["acceptance"]:  # gate 7's two answers (docs/acceptance.md §Golden: two questions)
                rows.append(["golden numerics", golden_line(s["acceptance"]["golden"])])
            rows += [["acceptance seconds", f"{s['acceptance']['seconds']:,.3f}"],
                     ["total seconds", f"{s['total_seconds']:,.3f} (writing and acceptance)"]]
        if s.get("write_bytes_per_second"):  # the progress bar's figure: bytes written while writing
            rows.append(["throughput", f"{s['write_bytes_per_second'] / 1e6:,.1f} MB/s writing "
                         f"({s['write_seconds']:,.3f} s); {s['bytes_per_second'] / 1e6:,.1f} MB/s overall "
                         "(planning and measuring included)"])
    for note in s["notes"]:
        rows.append(["note", note])
    console.print(table("conversion summary", ["", "value"], rows))


def _options(kind: str):
    def cmd(
        source: Path = typer.Argument(... if kind != "gguf" else None, help=SOURCE_HELP[kind], show_default=False),
        output: Path = typer.Argument(... if kind != "gguf" else None, help="Entry file of the artifact to create "
                                      "(never overwritten).", show_default=False),
        template: Path = typer.Option(None, "--template", help="Template artifact: its directory is the skeleton; "
                                      "objects not produced from the source are borrowed byte-for-byte."),
        recipe: str = typer.Option(None, "--recipe", help="Recipe name (bf16, exact, fp8-row, groupwise-int, nvfp4, prequantized, ternary, "
                                   "ternary-q2) "
                                   "or path to a recipe file. Default: the template's, else groupwise-int."),
        max_file_bytes: str = typer.Option(None, "--max-file-bytes", help="Split so no file exceeds this size "
                                           "(e.g. 64000000, 2GiB); default one file."),
        only_layer: int = typer.Option(None, "--only-layer", help="Minimal artifact: layer L, its auxiliaries and "
                                       "the frontend resources."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
        components: str = typer.Option("text", "--components", help="Comma-separated components to convert: text "
                                       "plus any of mtp, vision, dflash, dflash2."),
        workers: int = typer.Option(None, "--workers", help="Worker threads (default: min(4, CPUs))."),
        mmproj: Path = typer.Option(None, "--mmproj", help="mmproj GGUF with the vision tower (component vision)."),
        tokenizer_dir: Path = typer.Option(None, "--tokenizer-dir", help="A GGUF model's original repository "
                                           "directory: its tokenizer.json, tokenizer_config.json and chat template "
                                           "are taken verbatim once their vocabulary and merges equal the GGUF's."),
        drafter: list[Path] = typer.Option(None, "--drafter", help="DFlash / DFlash2 drafter directory "
                                           "(components dflash, dflash2); repeatable."),
        proposal: str = typer.Option(None, "--proposal", help="Add text.proposal: full (the text head) or indexed "
                                     "(a frequency shortlist of the head's rows)."),
        proposal_counts: Path = typer.Option(None, "--proposal-counts", help="Token-count file of --proposal indexed "
                                             "(TSV token_id<TAB>count, or JSON {\"counts\": {id: count}})."),
        proposal_rows: int = typer.Option(None, "--proposal-rows", help="Rows of --proposal indexed (the most "
                                          "frequent tokens)."),
        artifact_id: str = typer.Option(None, "--artifact-id", help="artifact_id as 32 hex digits (reproducible "
                                        "output; default a random UUID)."),
        artifact_id_from_content: bool = typer.Option(False, "--artifact-id-from-content", help="Derive the "
                                                      "artifact_id from the written content (reproducible)."),
        plan_only: Path = typer.Option(None, "--plan-only", help="Scale-out: plan and stage the files, write this "
                                       "plan file, encode nothing (then convert encode / convert seal)."),
        backend: str = typer.Option("local", "--backend", help="local (threads of this process) or dask (encode on "
                                    "a Dask cluster; needs the scale extra)."),
        scheduler: str = typer.Option(None, "--scheduler", help="Dask scheduler address (default: a local cluster "
                                      "of --workers processes)."),
        tensor_type: list[str] = typer.Option(None, "--tensor-type", help="PATTERN=FORMAT: parameters whose logical "
                                              "name (text/layers/\\d+/mlp/down) or source tensor name matches the "
                                              "regular expression PATTERN are stored in FORMAT (or exact), on top of "
                                              "the recipe; repeatable, the first match wins."),
        output_tensor_type: str = typer.Option(None, "--output-tensor-type", help="FORMAT of the output head."),
        token_embedding_type: str = typer.Option(None, "--token-embedding-type", help="FORMAT of the token "
                                                 "embedding."),
        verify: bool = typer.Option(True, "--verify/--no-verify", help="Accept what was written: run the verify "
                                    "gates against the source and end with one verdict line (default on)."),
        verify_sweep: bool = typer.Option(False, "--verify-sweep", help="The acceptance compares every layer "
                                          "(default: a sample of layers)."),
        imatrix: Path = typer.Option(None, "--imatrix", help="llama.cpp importance matrix (GGUF .imatrix or legacy "
                                     ".dat): requantized objects minimise the importance-weighted error "
                                     "(docs/imatrix.md)."),
        report: Path = typer.Option(None, "--report", help="Also write the conversion report (one self-contained "
                                    "HTML file; docs/report.md) of what was written, with the verify verdict."),
        allow_requantize: bool = typer.Option(False, "--allow-requantize", help="Requantizing a quantized source "
                                              "(Q8_0 → 4 bits) prints one warning line; this flag silences it."),
    ) -> None:
        from converters.cli.repack import parse_byte_size
        from converters.cli.ternary_env import build_paths, default_template
        from converters.mapping.overrides import parse_overrides
        from converters.pipeline.convert import CONVERT_COMMAND, ConvertOptions
        from converters.pipeline.proposal import ProposalRequest
        from converters.scaleout.run import run_conversion

        if kind == "gguf":  # one argument: the output, the source from $NINFER_TERNARY_GGUF (README §Ternary packing)
            source, output = build_paths(source, output, "gguf2ninfer")
        request = ProposalRequest.parse(proposal, proposal_counts, proposal_rows)  # flags checked before reading
        limit = parse_byte_size(max_file_bytes)
        comps = _components(components)
        staging = _staging(artifact_id, artifact_id_from_content, plan_only, backend, scheduler, dry_run)
        overrides = parse_overrides(tensor_type, output_tensor_type, token_embedding_type)
        # $NINFER_TERNARY_TEMPLATE for a ternary recipe, named or chosen by content (docs/ternary.md §1)
        template = default_template(template, recipe=recipe, source=source)
        if report is not None:
            _check_report(report, dry_run, plan_only)
        if imatrix is not None and (plan_only is not None or backend != "local"):
            raise typer.BadParameter("importance weights are not carried by a staged conversion's plan file; "
                                     "convert in one process", param_hint="--imatrix")
        options = ConvertOptions(source, output, kind=kind, recipe=recipe, template=template, max_file_bytes=limit,
                                 only_layer=only_layer, dry_run=dry_run, components=comps, workers=workers,
                                 inputs={"mmproj": mmproj, "drafter": list(drafter or []) or None,
                                         "tokenizer_dir": tokenizer_dir}, proposal=request,
                                 format_overrides=overrides, imatrix=imatrix, **staging)
        if verify and verify_sweep and only_layer is not None:
            raise typer.BadParameter("--verify-sweep compares every layer and an --only-layer artifact holds one; "
                                     "it is accepted on its layer (docs/acceptance.md §Minimal artifacts)",
                                     param_hint="--verify-sweep")
        bars = _Bars(byte_progress(disable=json_out or dry_run or options.staged))
        with interrupts():  # SIGTERM as Ctrl-C: the writer aborts, the acceptance record says interrupted
            try:
                outcome = run_conversion(options, on_plan=bars.plan, progress=bars.advance,
                                         on_kept=lambda hint: console.print(f"[yellow]{hint}[/]", highlight=False))
            finally:
                bars.stop()
            acceptance, phase = None, "after writing"
            try:  # from here on the artifact is published: an interrupt says what is on disk
                if verify and not dry_run and plan_only is None:  # a minimal artifact: judged on its layer
                    phase = "during acceptance"
                    acceptance = _accept(options, template, verify_sweep, json_out,
                                         f"convert {CONVERT_COMMAND[kind]}")
                    phase = "after acceptance"
                render_outcome(outcome, options, json_out, acceptance, allow_requantize=allow_requantize)
                if report is not None:
                    from converters.report import write_report

                    write_report(options.output, report,
                                 acceptance=acceptance.to_json() if acceptance is not None else None)
                    if not json_out:
                        console.print(f"report: {report}", highlight=False)
            except KeyboardInterrupt as exc:
                if dry_run or plan_only is not None:
                    raise
                _interrupted(options.output, phase, exc, json_out)
        if acceptance is not None and acceptance.verdict == "fail":
            raise typer.Exit(1)

    return cmd


def _accept(options, template, sweep: bool, json_out: bool, command_name: str):
    """Build-then-accept (docs/cli.md §Build then accept) with the acceptance record beside the artifact. An
    error inside the gates is reported, then what is on disk and how to finish (exit 1); an interrupt goes
    to :func:`_interrupted`."""
    from converters.acceptance import record
    from converters.acceptance.accept import accept_written, artifact_id_of
    from ninfer_core.errors import NinferError

    try:
        with gate_progress(disable=json_out) as bar:
            return accept_written(options.output, options.source, inputs=options.inputs, template=template,
                                  sweep=sweep, record_by=command_name, progress=bar)
    except NinferError as exc:
        report_error(exc, json_out=json_out)
        line = record.describe(options.output, record.read(options.output, artifact_id_of(options.output)))
        err_console.print(line, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _interrupted(output: Path, phase: str, exc: BaseException, json_out: bool) -> None:
    """Ctrl-C or SIGTERM once the artifact is published: one line with what is on disk (the acceptance
    record's word) and how to finish, exit 130 (docs/cli.md §Build then accept)."""
    from converters.acceptance import record
    from converters.acceptance.accept import artifact_id_of

    line = f"interrupted ({interrupt_name(exc)}) {phase}: " + record.describe(
        output, record.read(output, artifact_id_of(output)))
    err_console.print(line, highlight=False, soft_wrap=True)
    if json_out:
        emit_json(interrupt_document(line, file=str(output)))
    interrupt_reported()
    raise typer.Exit(130) from None


def _check_report(report: Path, dry_run: bool, plan_only) -> None:
    """``--report`` needs a written artifact and a free name (checked before anything is read)."""
    from converters.sources.atomic_write import refuse_existing
    from ninfer_core.errors import ArtifactExistsError

    if dry_run or plan_only is not None:
        raise typer.BadParameter("a report describes a written artifact; not with --dry-run or --plan-only",
                                 param_hint="--report")
    refuse_existing(report, lambda: ArtifactExistsError(f"{report.name} already exists; it is never overwritten",
                                                        file=str(report), rule="target_exists"))


gguf2ninfer = command("gguf2ninfer", help="Convert a GGUF file (llama.cpp naming, any GGML type) to .ninfer.")(
    _options("gguf"))
st2ninfer = command("st2ninfer", help="Convert an HF safetensors checkpoint directory to .ninfer.")(_options("hf"))
