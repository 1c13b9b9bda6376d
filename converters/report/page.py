"""The report as one self-contained HTML page (docs/report.md §Sections): images as ``data:`` URIs, no
script, style or font fetched from anywhere. Every section is a ``<section id=...>``; the facts the page
shows are also embedded as JSON (``<script type="application/json" id="report-facts">``) for tools.

The page uses the window's full width; counts carry thousands separators; the recipe and the importance
record are tables, not JSON dumps (docs/report.md §Sections).
"""

from __future__ import annotations

import base64
import html
import json

from converters.report import plots
from converters.report.facts import ReportFacts

SECTIONS = ("bytes", "bits-per-weight", "per-layer-error", "exactness", "verify", "recipe")
#: the titles of the recipe's tables of named entries (any other such member gets its own name)
_TABLE_TITLES = {"roles": "Formats by role", "groups": "Fused groups"}

_STYLE = """body{font-family:sans-serif;margin:1.5em 2em;font-size:15px}
section{margin:1.5em 0}h2{border-bottom:1px solid #ddd;padding-bottom:.2em}
.row{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#eee}td.l,th.l{text-align:left}td code{font-size:12px}
img{max-width:100%;height:auto}.swatch{display:inline-block;width:1em;height:1em;vertical-align:middle;
border:1px solid #757575;margin:0 .3em 0 1em}"""


def _e(x) -> str:
    return html.escape(str(x))


def _img(png: bytes | None, alt: str, n_panels: int | None = None) -> str:
    if png is None:
        return f"<p>No data for: {_e(alt)}.</p>"
    attr = f' data-panels="{n_panels}"' if n_panels is not None else ""
    return f'<img alt="{_e(alt)}"{attr} src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _figure(fig, alt: str) -> str:
    if fig is None:
        return _img(None, alt)
    n = plots.panels(fig)
    return _img(plots.png(fig), alt, n)


def _table(head: list[str], rows: list[list], left: int = 1, cls: str = "") -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(c)}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def _value(v) -> str:
    """A cell: a scalar as text (integers with separators), a list or mapping of scalars as ``a, b`` /
    ``key value, …``, anything deeper as compact JSON."""
    if v is None:
        return "—"
    if isinstance(v, bool) or not isinstance(v, int | float | dict | list):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list) and all(not isinstance(x, dict | list) for x in v):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict) and all(not isinstance(x, dict | list) for x in v.values()):  # golden_budget
        return ", ".join(f"{k} {x:.9g}" if isinstance(x, float) else f"{k} {x}" for k, x in v.items())
    return json.dumps(v, separators=(", ", ": "), ensure_ascii=False)


def _key_values(d: dict, cls: str) -> str:
    return _table(["field", "value"], [[k, _value(v)] for k, v in d.items()], left=2, cls=cls)


def _bits_rows(facts: ReportFacts) -> list[list]:
    bpw, src = facts.bits_per_weight(), facts.source_bits_per_weight()
    rows = []
    for c in sorted(bpw):
        s = src.get(c)
        rows.append([c, f"{bpw[c]:.3f}", "unknown" if s is None else f"{s:.3f}",
                     "" if not s else f"{bpw[c] / s:.1%}"])
    return rows


def _entries(name: str, entries: dict) -> str:
    """A table of named entries (``{name: {field: value}}``): one row each, ``format`` first."""
    columns = sorted({k for r in entries.values() for k in r}, key=lambda k: (k != "format", k))
    rows = [[n, *[_value(r.get(k)) if k in r else "" for k in columns]] for n, r in entries.items()]
    head = [name.rstrip("s") or name, *[k.replace("_", " ") for k in columns]]
    return (f"<div><h3>{_e(_TABLE_TITLES.get(name, name))}</h3>"
            + _table(head, rows, left=len(head), cls=name) + "</div>")


def _recipe(facts: ReportFacts) -> str:
    """The recipe as tables: its fields, then each member of named entries (roles, groups) as its own."""
    rec = {k: v for k, v in facts.recipe.items() if k != "overrides"}
    nested = {k: v for k, v in rec.items()
              if isinstance(v, dict) and v and all(isinstance(r, dict) for r in v.values())}
    out = ['<div class="row"><div><h3>Recipe</h3>',
           _key_values({k: v for k, v in rec.items() if k not in nested}, "recipe"), "</div>"]
    out += [_entries(k, v) for k, v in nested.items()]
    out.append("<div><h3>Overrides</h3>" + (_table(["rule", "format"], [[o.get("rule"), o.get("format")]
                                                                       for o in facts.overrides], left=2, cls="overrides")
                                           if facts.overrides else "<p>No overrides.</p>") + "</div>")
    out.append("<div><h3>Importance matrix</h3>" + (_key_values(facts.importance, "importance")
                                                    if facts.importance else "<p>No importance matrix.</p>")
               + "</div></div>")
    return "".join(out)


def render(facts: ReportFacts) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>report: {_e(facts.name)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>Conversion report: {_e(facts.name)}</h1><p>artifact {_e(facts.artifact)} · id "
             f"<code>{_e(facts.artifact_id)}</code> · recipe <b>{_e(facts.recipe.get('name'))}</b> · "
             f"{sum(o.bytes for o in facts.objects):,} bytes in {len(facts.objects):,} tensor objects</p>"]
    table = facts.bytes_by_component_format()
    rows = [[c, f, f"{b:,}", f"{b / 2**20:,.3f}"] for c in sorted(table) for f, b in sorted(table[c].items())]
    parts.append('<section id="bytes"><h2>Bytes by component and format</h2><div class="row">'
                 + _figure(plots.bytes_figure(facts), "bytes by component and format")
                 + _table(["component", "format", "bytes", "MiB"], rows, 2) + "</div></section>")
    parts.append('<section id="bits-per-weight"><h2>Bits per weight</h2>'
                 + _table(["component", "this artifact", "the source", "of the source"], _bits_rows(facts),
                          cls="bits")
                 + "<p>8 × bytes / elements over the same tensor objects; the source's from the type of every "
                   "piece it was read from (a GGUF type's block bytes, scales included; a safetensors float "
                   "dtype's width; unknown for packed integer storage).</p></section>")
    req = [o for o in facts.objects if o.cosine is not None]
    err_rows = [[o.id, o.format, f"{o.cosine:.9f}", _fmt(o.rms, ".6g"), _fmt(o.rel_rms, ".6g"),
                 "" if o.importance_used is None else ("yes" if o.importance_used else "no")] for o in req]
    parts.append('<section id="per-layer-error"><h2>Per-layer error</h2>'
                 + _figure(plots.error_figure(facts, "cosine"), "1 − cosine per layer, one panel per parameter kind")
                 + _figure(plots.error_figure(facts, "rel_rms"),
                           "relative RMS per layer, one panel per parameter kind")
                 + "<details><summary>every requantized object</summary>"
                 + _table(["object", "format", "cosine", "rms", "relative rms", "importance"], err_rows)
                 + "</details><p>relative RMS: the measured RMS error over the RMS of the stored values.</p>"
                   "</section>")
    legend = "".join(f'<span class="swatch" style="background:{c}"></span>{_e(n)}'
                     for n, c in plots.EXACTNESS_COLOURS.items())
    ex_rows = [[o.id, o.exactness] for o in facts.objects]
    parts.append('<section id="exactness"><h2>Exactness map</h2>'
                 + _figure(plots.exactness_figure(facts), "exactness map")
                 + f"<p>{legend}</p><p>produced tensors: "
                 + _e(", ".join(f"{k} {v:,}" for k, v in facts.exactness.items()) or "not recorded") + "</p>"
                 + "<details><summary>every object</summary>"
                 + _table(["object", "exactness"], ex_rows, 2) + "</details></section>")
    if facts.acceptance:
        acc = facts.acceptance
        gates = [[g.get("gate"), g.get("title"), g.get("status")] for g in acc.get("gates", [])]
        body = f"<p>verdict: <b>{_e(acc.get('verdict'))}</b></p>" + _table(["gate", "title", "status"], gates, 3)
    else:
        body = "<p>verify was not run for this report (convert verify ARTIFACT --source SRC, or --report on " \
               "a conversion that accepts what it wrote).</p>"
    parts.append(f'<section id="verify"><h2>Verify verdict</h2>{body}</section>')
    parts.append('<section id="recipe"><h2>Recipe, overrides and importance matrix</h2>' + _recipe(facts)
                 + "</section>")
    blob = json.dumps(facts.to_json()).replace("</", "<\\/")
    parts.append(f'<script type="application/json" id="report-facts">{blob}</script></body></html>')
    return "".join(parts)
