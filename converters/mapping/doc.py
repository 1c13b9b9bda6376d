"""Generate ``docs/mappings/<architecture>.md``: the logical-parameter tables of every mapping file.

``python -m converters.mapping.doc`` rewrites the files; ``python -m converters.mapping.doc --check``
exits 1 when a file is stale (the test suite runs the check, so the tables never drift from the YAML).
Per mapping: its description, the rules with their evidence (``INFERRED`` marks rules read in upstream
code but not measured on upstream output), the layer kinds and their probes, one row per logical
parameter (shape expression, role, use input, GGUF and HF sources with their transform chains), the
derived counts (``counts``, docs/ternary.md §2), tensors owned by other components, drops and open questions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from converters import ROOT
from converters.mapping.loader import load_mapping
from converters.mapping.schema import MAPPINGS_DIR, Mapping, SourceRule
from converters.model.architectures import ARCHITECTURE_MODULES, module

DOCS_DIR = ROOT / "docs" / "mappings"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _source(rule: SourceRule | None) -> str:
    if rule is None:
        return "—"
    out = []
    for choice in rule.choices():
        steps = []
        for s in choice.transforms:
            args = ", ".join(f"{k}={v}" for k, v in s.args)
            steps.append(f"{s.name}({args})")
        read = " + ".join(f"`{t}`" for t in choice.stack) + " stacked" if choice.stack else f"`{choice.tensor}`"
        read += " transposed" if choice.transpose else ""
        out.append(read + "".join(f" → `{x}`" for x in steps))
    return " <br>or ".join(out)


def _probe(names: tuple[str, ...] | None) -> str:
    return " + ".join(f"`{n}`" for n in names) if names else "—"


def render(m: Mapping) -> str:
    lines = [f"# `{m.architecture}` — component `{m.component}`", "",
             f"Generated from `mappings/{Path(m.file).name}` (sha256 `{m.sha256[:16]}…`) by "
             "`python -m converters.mapping.doc`; do not edit by hand.", "", _cell(m.doc), ""]
    if m.prefixes:
        lines += ["## Name prefixes", ""]
        for kind, table in m.prefixes.items():
            for ph, alts in table.items():
                lines.append(f"- {kind} `{{{ph}}}`: first of " + ", ".join(f"`{a}`" for a in alts) + " that names a tensor")
        lines.append("")
    if m.symbols:
        lines += ["## Symbols", "", "| symbol | expression |", "| --- | --- |"]
        lines += [f"| `{n}` | `{e}` |" for n, e in m.symbols]
        lines.append("")
    if m.stored_like:
        lines += ["## Roles this mapping introduces", "", "| role | stored like (unless a recipe names it) |",
                  "| --- | --- |"]
        lines += [f"| `{r}` | `{like}` |" for r, like in m.stored_like.items()]
        lines.append("")
    lines += ["## Rules", "", "| rule | transforms | status | evidence |", "| --- | --- | --- | --- |"]
    for r in m.rules.values():
        status = "INFERRED" if r.inferred else "specified"
        lines.append(f"| `{r.name}` | {', '.join(f'`{t}`' for t in r.transforms) or '—'} | {status} | {_cell(r.evidence)} |")
    lines.append("")
    if m.kinds:
        lines += ["## Layer kinds", "", f"Layer count: `{m.layer_count}`; the kind of each layer comes from the config "
                  "and must agree with the probe tensors (present iff the layer has that kind).", "",
                  "| kind | parameter groups | GGUF probe | HF probe |", "| --- | --- | --- | --- |"]
        for k in m.kinds.values():
            lines.append(f"| `{k.name}` | {', '.join(k.groups)} | {_probe(k.probes.get('gguf'))} | "
                         f"{_probe(k.probes.get('hf'))} |")
        lines.append("")
    lines += ["## Logical parameters", "",
              "| group | logical parameter | shape | role | use input | GGUF source → transforms | "
              "HF source → transforms | evidence |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in m.parameters():
        shape = "[" + ", ".join(str(d) for d in p.shape) + "]"
        tie = f" (tied to `{p.tied_to}`" + (f" when `{p.tied_when}`)" if p.tied_when else ")") if p.tied_to else ""
        if p.repeat:
            tie += " (" + ", ".join(f"`{ph}` < `{n}`" for ph, n in p.repeat) + ")"
        if p.bank:
            tie += f" (rows of bank `{p.bank}`)"
        mark = " INFERRED" if p.inferred else ""
        lines.append(f"| {p.group} | `{p.name}`{tie} | `{shape}` | `{p.role}` | {f'`{p.input}`' if p.input else '—'} | "
                     f"{_source(p.sources.get('gguf'))} | {_source(p.sources.get('hf'))} | {_cell(p.evidence)}{mark} |")
    lines += ["", "## Counts", ""]
    if m.counts:
        lines += ["Declared in the file (`counts`) and checked against the rules by the loader.", ""]
    globals_ = [g for g in m.groups if g not in m.layer_groups()]
    lines.append(f"- global parameters: {sum(len(m.groups[g]) for g in globals_)}")
    for k in m.kinds.values():
        n = sum(len(m.groups[g]) for g in k.groups)
        tensors = {p.sources['gguf'].tensor for g in k.groups for p in m.groups[g] if 'gguf' in p.sources}
        lines.append(f"- per `{k.name}` layer: {n} logical parameters from {len(tensors)} GGUF tensors")
    if m.other_components:
        lines += ["", "## Tensors of other components", "", "| component | HF | GGUF | evidence |",
                  "| --- | --- | --- | --- |"]
        for o in m.other_components:
            gg = o.patterns.get("gguf") or (f"`blk.N.*`, N ≥ `{o.gguf_from_layer}`" if o.gguf_from_layer else "—")
            lines.append(f"| `{o.component}` | `{o.patterns.get('hf', '—')}` | {gg} | {_cell(o.evidence)} |")
    if m.drops:
        lines += ["", "## Dropped tensors", "", "| source | pattern | evidence |", "| --- | --- | --- |"]
        for d in m.drops:
            for kind, pat in d.patterns.items():
                lines.append(f"| {kind} | `{pat}` | {_cell(d.evidence)} |")
    if m.unresolved:
        lines += ["", "## Unresolved", ""] + [f"- {_cell(u)}" for u in m.unresolved]
    return "\n".join(lines) + "\n"


def outputs() -> dict[Path, str]:
    out = {}
    for arch in ARCHITECTURE_MODULES:
        for component, file in module(arch).MAPPINGS.items():
            m = load_mapping(MAPPINGS_DIR / file)
            own = component == "text" or getattr(module(arch), "COMPONENT", None) == component
            name = arch if own else f"{arch}.{component}"
            out[DOCS_DIR / f"{name}.md"] = render(m)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m converters.mapping.doc", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        sys.stderr.write("stale: " + ", ".join(str(p) for p in stale) + " (run python -m converters.mapping.doc)\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
