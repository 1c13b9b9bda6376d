"""``convert check SRC [--template TPL] [--recipe R] [--json]``: the read-only conversion self-test.

CHECK 1 geometry, CHECK 2 byte round trip (``bytes_equal``; for a ternary/binary source transcoded to
``t2_g128_fp16``, whose trits and bits cannot be reassembled byte for byte, ``codes_equal``: every code and
multiplier read back equals the source block's) + decode equality + the multiplier plausibility probe (prints
``IMPLAUSIBLE -- offset bug?``), CHECK 3 producer smoke of every object (borrowed template objects listed);
then ``RESULT: OK`` (exit 0) or ``RESULT: FAILED`` (exit 1). Nothing is written (:mod:`converters.acceptance.check`).

Examples::

    convert check model.Q8_0.gguf
    convert check ./hf-dir --recipe bf16
    convert check bonsai.gguf --template tpl.ninfer --json      # --gguf SRC is the older spelling
    NINFER_TERNARY_GGUF=bonsai.gguf NINFER_TERNARY_TEMPLATE=tpl.ninfer convert check
"""

from __future__ import annotations

from pathlib import Path

import typer

from converters.cli.output import command, console, emit_json, table


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _codes(sample: dict) -> str:
    """The ``codes_equal`` cell: ``yes``, ``NO (codes, multipliers)`` naming what differs, or ``-`` where the byte
    round trip is the proof (a source whose blocks the target holds byte for byte)."""
    if sample.get("codes_equal") is False and sample.get("codes_differ"):
        return f"NO ({', '.join(sample['codes_differ'])})"
    return _fmt(sample.get("codes_equal"))


def print_check(r: dict) -> None:
    console.print(f"source {r['source']}  recipe {r['recipe']}" + (f"  template {r['template']}" if r["template"] else ""))
    rows = [[g["source_type"], g["n"], g["k"], g["format"], g["method"], g["tensors"], _fmt(g["groups_per_row"]),
             _fmt(g["source_bytes"]), _fmt(g["payload_bytes"]), _fmt(g["pad"]), g["note"]] for g in r["check1"]["groups"]]
    console.print(table("CHECK 1 - geometry (source type, n, k)", ["type", "n", "k", "target", "method", "pieces",
                                                                  "groups/row", "src bytes", "payload", "pad", "note"], rows))
    rows = []
    for s in r["check2"]["samples"]:
        p = s["probe"]
        probe = "-" if p is None else (
            f"{'PLAUSIBLE' if p['plausible'] else 'IMPLAUSIBLE -- offset bug?'} (nonfinite {p['nonfinite']}, "
            f"negative {p['negative']}, hi_distinct {p['hi_distinct']}, median {p['median']:.3g})")
        rows.append([s["tensor"], s["type"], s["target"] or "-", _fmt(s["bytes_equal"]), _codes(s),
                     _fmt(s["decode_equal"]), probe,
                     s["verdict"] + ("" if "problems" not in s else ": " + "; ".join(s["problems"]))])
    console.print(table("CHECK 2 - byte round trip (bytes_equal; codes_equal for ternary sources in t2), decode "
                        "equality, offset probe (one tensor per role)",
                        ["tensor", "type", "target", "bytes_equal", "codes_equal", "decode_equal", "probe", "verdict"],
                        rows))
    for s in r["check2"]["samples"]:  # one unwrapped line per failure, greppable in logs
        for problem in s.get("problems", []):
            console.print(f"  {s['tensor']}: {problem}", highlight=False, markup=False, soft_wrap=True)
    c3 = r["check3"]
    bad = [o for o in c3["objects"] if o["status"] not in ("OK", "borrowed")]
    rows = [[o["object"], "×".join(map(str, o.get("shape", []))), o.get("format", o["kind"]), _fmt(o["bytes"]),
             _fmt(o.get("produced")), o["status"]] for o in bad]
    rows += [[f"{p}/*", "", "", "", "", f"(borrowed) SKIP x{n}"] for p, n in c3["borrowed"].items()]
    rows.append([f"{c3['produced']} produced objects", "", "", "", "", "all sizes OK" if not bad else f"{len(bad)} FAILED"])
    console.print(table("CHECK 3 - producer smoke (shape and size of every object)",
                        ["object", "shape", "format", "planned", "produced", "status"], rows))
    console.print("[dim]check compares sizes and a sample of values; it is no substitute for "
                  "`convert verify OUT.ninfer --source SRC` after writing.[/]")
    console.print("RESULT: OK" if r["result"] == "OK" else "[bold red]RESULT: FAILED[/]", highlight=False)


@command("check")
def check(
    source: Path = typer.Argument(None, help="GGUF file or HF checkpoint directory to self-test (default: "
                                  "$NINFER_TERNARY_GGUF).", show_default=False),
    gguf: Path = typer.Option(None, "--gguf", help="The source, spelled as before (same as the argument).",
                              show_default=False),
    template: Path = typer.Option(None, "--template", help="Template artifact (objects to borrow are listed; "
                                  "default: $NINFER_TERNARY_TEMPLATE)."),
    recipe: str = typer.Option(None, "--recipe", help="Recipe name or file (default: the template's, else groupwise-int)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    components: str = typer.Option("text", "--components", help="Comma-separated components."),
) -> None:
    """Read-only self-test of a conversion: CHECK 1 geometry, CHECK 2 round trip + offset probe, CHECK 3 producer smoke."""
    from converters.acceptance.check import run_check
    from converters.cli.ternary_env import default_source, default_template
    from converters.sources.kind import require_kind

    if source is not None and gguf is not None:
        raise typer.BadParameter("give the source once: as the argument or as --gguf", param_hint="--gguf")
    source = default_source(source if source is not None else gguf, "check")
    template = default_template(template, always=True)
    require_kind(source, ("gguf", "hf", "safetensors"), command="check", rule="check_source_kind")
    comps = tuple(c.strip() for c in components.split(",") if c.strip()) or ("text",)
    result = run_check(source, template=template, recipe=recipe, components=comps)
    if json_out:
        emit_json(result)
    else:
        print_check(result)
    if result["result"] != "OK":
        raise typer.Exit(1)
