"""The report as one self-contained HTML page (docs/report.md §Sections): images as ``data:`` URIs, no
script, style or font fetched from anywhere. Every section is a ``<section id=...>``; the facts the page
shows are also embedded as JSON (``<script type="application/json" id="report-facts">``) for tools."""

from __future__ import annotations

import base64
import html
import json

from converters.report import plots
from converters.report.facts import ReportFacts

SECTIONS = ("bytes", "bits-per-weight", "per-layer-error", "exactness", "verify", "recipe")

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;font-size:12px}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}td.l,th.l{text-align:left}
img{max-width:100%}.swatch{display:inline-block;width:1em;height:1em;vertical-align:middle}"""


def _e(x) -> str:
    return html.escape(str(x))


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return f"<p>No data for: {_e(alt)}.</p>"
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(head: list[str], rows: list[list], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(c)}</td>' for i, c in enumerate(r))
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def render(facts: ReportFacts) -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>report: {_e(facts.name)}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1>Conversion report: {_e(facts.name)}</h1><p>artifact {_e(facts.artifact)} · id "
             f"<code>{_e(facts.artifact_id)}</code> · recipe <b>{_e(facts.recipe.get('name'))}</b></p>"]
    table = facts.bytes_by_component_format()
    rows = [[c, f, b, f"{b / 2**20:.3f}"] for c in sorted(table) for f, b in sorted(table[c].items())]
    parts.append('<section id="bytes"><h2>Bytes by component and format</h2>' + _img(plots.bytes_chart(facts),
                 "bytes by component and format") + _table(["component", "format", "bytes", "MiB"], rows, 2)
                 + "</section>")
    bpw = facts.bits_per_weight()
    parts.append('<section id="bits-per-weight"><h2>Bits per weight</h2>'
                 + _table(["component", "bits per weight"], [[c, f"{v:.4f}"] for c, v in sorted(bpw.items())])
                 + "</section>")
    req = [o for o in facts.objects if o.cosine is not None]
    err_rows = [[o.id, o.format, f"{o.cosine:.9f}", _fmt(o.rms, ".6g"), _fmt(o.rel_rms, ".6g"),
                 "" if o.importance_used is None else ("yes" if o.importance_used else "no")] for o in req]
    parts.append('<section id="per-layer-error"><h2>Per-layer error</h2>'
                 + _img(plots.error_lines(facts, "cosine"), "cosine per layer")
                 + _img(plots.error_lines(facts, "rel_rms"), "relative RMS per layer")
                 + _table(["object", "format", "cosine", "rms", "relative rms", "importance"], err_rows)
                 + "<p>relative RMS: the measured RMS error over the RMS of the stored values.</p></section>")
    legend = " ".join(f'<span class="swatch" style="background:{c}"></span> {_e(n)}'
                      for n, c in plots.EXACTNESS_COLOURS.items())
    ex_rows = [[o.id, o.exactness] for o in facts.objects]
    parts.append('<section id="exactness"><h2>Exactness map</h2>' + _img(plots.exactness_map(facts), "exactness map")
                 + f"<p>{legend}</p><p>produced tensors: "
                 + _e(", ".join(f"{k} {v:,}" for k, v in facts.exactness.items()) or "not recorded") + "</p>"
                 + "<details><summary>every object</summary>"
                 + _table(["object", "exactness"], ex_rows) + "</details></section>")
    if facts.acceptance:
        acc = facts.acceptance
        gates = [[g.get("gate"), g.get("title"), g.get("status")] for g in acc.get("gates", [])]
        body = f"<p>verdict: <b>{_e(acc.get('verdict'))}</b></p>" + _table(["gate", "title", "status"], gates)
    else:
        body = "<p>verify was not run for this report (convert verify ARTIFACT --source SRC, or --report on " \
               "a conversion that accepts what it wrote).</p>"
    parts.append(f'<section id="verify"><h2>Verify verdict</h2>{body}</section>')
    rec = {k: v for k, v in facts.recipe.items() if k not in ("roles", "groups")}
    parts.append('<section id="recipe"><h2>Recipe, overrides and importance matrix</h2>'
                 f"<pre>{_e(json.dumps(rec, indent=1))}</pre>"
                 + ("<h3>Overrides</h3>" + _table(["rule", "format"], [[o.get("rule"), o.get("format")]
                                                                       for o in facts.overrides])
                    if facts.overrides else "<p>No overrides.</p>")
                 + (f"<h3>Importance matrix</h3><pre>{_e(json.dumps(facts.importance, indent=1))}</pre>"
                    if facts.importance else "<p>No importance matrix.</p>") + "</section>")
    blob = json.dumps(facts.to_json()).replace("</", "<\\/")
    parts.append(f'<script type="application/json" id="report-facts">{blob}</script></body></html>')
    return "".join(parts)
