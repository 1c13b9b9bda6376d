"""Human rendering of a validation report with rich: verdict line, key figures, gates table, findings.

Renders from the JSON document (:meth:`Report.to_json`), so the human view and ``--json`` always agree
and ``--sanitized`` hides the same fields in both.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from converters.acceptance.report.model import Report

_VERDICT_STYLE = {"pass": "bold green", "pass_with_warnings": "bold yellow", "fail": "bold red"}
_STATUS_STYLE = {
    "pass": "green",
    "pass_with_warnings": "yellow",
    "fail": "red",
    "skipped": "yellow",
    "not_run": "dim",
}
_SEVERITY_STYLE = {"ERROR": "red", "BLOCKED_REPRODUCIBILITY": "magenta", "INFO": "dim"}


def render(report: Report, console: Console, *, sanitized: bool = False) -> None:
    """Print ``report`` on ``console``: header, scalar key figures of each section, gates, findings."""
    doc = report.to_json(sanitized=sanitized)
    name = doc["package"].get("name") or doc["package"].get("path") or "?"
    verdict = doc["verdict"]
    console.print(
        f"[bold]{doc['schema']}[/] {name}: [{_VERDICT_STYLE[verdict]}]{verdict}[/]",
        highlight=False,
    )
    figures = _key_figures(doc)
    if figures:
        t = Table(title="Key figures", show_header=True)
        t.add_column("field")
        t.add_column("value", overflow="fold")
        for k, v in figures:
            t.add_row(k, v)
        console.print(t)

    gates = Table(title="Gates")
    for col in ("gate", "title", "status", "checks", "findings"):
        gates.add_column(col, overflow="fold")
    for g in doc["gates"]:
        style = _STATUS_STYLE[g["status"]]
        counts = "\n".join(f"{n} {sev}" for sev, n in g["findings"].items()) or "-"
        gates.add_row(g["name"], g["title"], f"[{style}]{g['status']}[/]", str(len(g["checks"])), counts)
    console.print(gates)

    if doc["findings"]:
        ft = Table(title=f"Findings ({len(doc['findings'])})", show_lines=True)
        ft.add_column("code / severity · gate", no_wrap=True)
        ft.add_column("where / evidence", overflow="fold", ratio=1)
        for f in doc["findings"]:
            sev = f["severity"]
            style = _SEVERITY_STYLE.get(sev, "yellow")
            where = f.get("file") or ""
            if "line" in f:
                where += f":{f['line']}"
            if "path" in f:
                where += f" {f['path']}" if where else f["path"]
            ft.add_row(f"[{style}]{f['code']}[/]\n[dim]{sev} · {f['gate']}[/]",
                       f"[dim]{escape(where)}[/]\n{escape(f['evidence'])}" if where else escape(f["evidence"]))
        console.print(ft)


def _key_figures(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Scalar fields of the ``model`` and ``memory`` sections (one level of nesting), for the summary."""
    rows: list[tuple[str, str]] = []
    for section in ("model", "memory"):
        block = doc.get(section)
        if not isinstance(block, dict):
            continue
        for key, value in block.items():
            if isinstance(value, dict):
                for sub, v in value.items():
                    if _scalar(v):
                        rows.append((f"{section}.{key}.{sub}", _fmt(f"{key}.{sub}", v)))
            elif _scalar(value):
                rows.append((f"{section}.{key}", _fmt(key, value)))
    return rows


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int) and "bytes" in key:
        return f"{v:,} B ({v / (1 << 30):.3f} GiB)" if abs(v) >= 1 << 30 else f"{v:,} B"
    return str(v)
