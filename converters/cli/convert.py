"""``convert gguf2ninfer`` and ``convert st2ninfer``: a GGUF file or an HF safetensors directory → ``.ninfer``.

Thin layer over :func:`converters.convert.convert` (same parameter names). The output is refused if it
exists and the recipe is validated before the input is read; ``--dry-run`` prints the plan and writes
nothing. Progress (stderr): the whole payload and each object in flight, with bytes/s. Result: a
summary table (total, produced, borrowed by prefix, objects, exactness counts) or, with ``--json``, one
JSON document.

Examples::

    convert gguf2ninfer model.gguf out/model.ninfer --recipe exact
    convert st2ninfer ./Qwen3.5-27B out/q.ninfer --recipe groupwise-int --max-file-bytes 4GiB
    convert gguf2ninfer bonsai.gguf out/b.ninfer --template tpl.ninfer --only-layer 3 --dry-run
"""

from __future__ import annotations

import threading
from pathlib import Path

import typer

from converters.cli.output import byte_progress, command, console, emit_json, table
from converters.cli.repack import parse_byte_size

SOURCE_HELP = {"gguf": "GGUF file to convert.", "hf": "HF checkpoint directory (config.json, safetensors, tokenizer)."}


def _run(kind: str, source: Path, output: Path, template: Path | None, recipe: str | None, max_file_bytes: str | None,
         only_layer: int | None, dry_run: bool, json_out: bool, components: str, workers: int | None) -> None:
    from converters.convert import check_output_free, convert

    limit = parse_byte_size(max_file_bytes)
    if not dry_run:
        check_output_free(output)  # before anything is read
    comps = tuple(c.strip() for c in components.split(",") if c.strip())
    if not comps:
        raise typer.BadParameter("--components needs at least one component", param_hint="--components")
    bars = _Bars(byte_progress(disable=json_out or dry_run))
    with bars.progress:
        result = convert(source, output, recipe=recipe, template=template, max_file_bytes=limit, only_layer=only_layer,
                         dry_run=dry_run, components=comps, workers=workers, expect_kind=kind,
                         on_plan=bars.plan, progress=bars.advance)
    summary = result.summary()
    if json_out:
        emit_json({**summary, "objects_detail": result.object_rows()} if dry_run else summary)
        return
    if dry_run:
        rows = [[r["id"], r.get("format", r["kind"]), "×".join(map(str, r.get("shape", []))), f"{r['bytes']:,}",
                 r["exactness"], r["origin"], ",".join(r.get("method", []))] for r in result.object_rows()]
        console.print(table(f"plan: {output.name} (nothing written)",
                            ["object", "format", "shape", "bytes", "exactness", "origin", "method"], rows))
    print_summary(summary)


class _Bars:
    """One bar for the whole payload and one per object in flight (bytes, bytes/s), thread-safe."""

    def __init__(self, progress) -> None:
        self.progress = progress
        self.lock = threading.Lock()
        self.sizes: dict[str, int] = {}
        self.tasks: dict[str, tuple[int, int]] = {}  # object id → (task, bytes so far)
        self.total = None

    def plan(self, objects) -> None:
        self.sizes = {o.id: o.bytes for o in objects}
        self.total = self.progress.add_task("total", total=sum(self.sizes.values()))

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
    for p, e in sorted(s["borrowed"]["by_prefix"].items()):
        rows.append([f"  borrowed {p}/", f"{e['objects']} objects, {e['bytes']:,} bytes"])
    for k in ("bit-exact", "value-exact", "requantized"):
        if k in s["exactness"]:
            rows.append([f"exactness {k}", s["exactness"][k]])
    if "worst_cosine" in s:
        w = s["worst_cosine"]
        rows.append(["worst cosine", f"{w['cosine']:.6f} ({w['object']}, max abs {w['max_abs']:g})"])
    if s.get("only_layer") is not None:
        rows.append(["only layer", s["only_layer"]])
    if not s["dry_run"]:
        rows += [["artifact_id", s["artifact_id"]], ["files", len(s["files"])], ["seconds", s["seconds"]]]
        if s.get("bytes_per_second"):
            rows.append(["throughput", f"{s['bytes_per_second'] / 1e6:,.1f} MB/s"])
    for note in s["notes"]:
        rows.append(["note", note])
    console.print(table("conversion summary", ["", "value"], rows))


def _options(kind: str):
    def cmd(
        source: Path = typer.Argument(..., help=SOURCE_HELP[kind], show_default=False),
        output: Path = typer.Argument(..., help="Entry file of the artifact to create (never overwritten).",
                                      show_default=False),
        template: Path = typer.Option(None, "--template", help="Template artifact: its directory is the skeleton; "
                                      "objects not produced from the source are borrowed byte-for-byte."),
        recipe: str = typer.Option(None, "--recipe", help="Recipe name (bf16, exact, fp8-row, groupwise-int, nvfp4) "
                                   "or path to a recipe file. Default: the template's, else groupwise-int."),
        max_file_bytes: str = typer.Option(None, "--max-file-bytes", help="Split so no file exceeds this size "
                                           "(e.g. 64000000, 2GiB); default one file."),
        only_layer: int = typer.Option(None, "--only-layer", help="Minimal artifact: layer L, its auxiliaries and "
                                       "the frontend resources."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
        components: str = typer.Option("text", "--components", help="Comma-separated components to convert."),
        workers: int = typer.Option(None, "--workers", help="Worker threads (default: min(4, CPUs))."),
    ) -> None:
        _run(kind, source, output, template, recipe, max_file_bytes, only_layer, dry_run, json_out, components,
             workers)

    return cmd


gguf2ninfer = command("gguf2ninfer", help="Convert a GGUF file (llama.cpp naming, any GGML type) to .ninfer.")(
    _options("gguf"))
st2ninfer = command("st2ninfer", help="Convert an HF safetensors checkpoint directory to .ninfer.")(_options("hf"))
