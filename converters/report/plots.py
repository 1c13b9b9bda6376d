"""The report's figures, drawn with matplotlib's Agg backend (docs/report.md §Plots).

matplotlib is the optional ``report`` extra; only this module imports it, and only the report commands
import this module, so a conversion without ``--report`` never loads it. Missing, it is a typed error
saying how to install it.

Rules every figure keeps (docs/report.md §Plots): text of at least :data:`MIN_TEXT_PX` pixels at the
page's scale (figures are at most :data:`MAX_WIDTH_IN` inches wide, so the page never shrinks them on a
1,400-pixel screen); legends outside the data (right of the axes); several series as small multiples —
one panel per parameter kind, shared axes — never as overlapping lines in one plot.
"""

from __future__ import annotations

import io
import math

from converters.errors import ConversionError
from converters.report.facts import ReportFacts

DPI = 100
FONT_PT = 9  # 12.5 px at DPI
MIN_TEXT_PX = 11
MAX_WIDTH_IN = 12.5
PANEL_COLUMNS = 4
ABSENT = "not present in this layer"
#: exactness → colour; "unknown" is grey (provenance does not say), ABSENT white with a cell border
EXACTNESS_COLOURS = {"bit-exact": "#2e7d32", "value-exact": "#9ccc65", "requantized": "#ef6c00",
                     "unknown": "#9e9e9e", ABSENT: "#ffffff"}
#: the floor of a log-scale error axis (an error of exactly 0 is drawn there)
LOG_FLOOR = 1e-12
_METRICS = {"cosine": "1 − cosine", "rel_rms": "relative RMS error"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ConversionError("the report needs matplotlib, the optional 'report' extra: pip install "
                              "'ninfer-convert[report]' (make setup installs it)", rule="report_extra_missing") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": FONT_PT, "axes.titlesize": FONT_PT + 1, "axes.labelsize": FONT_PT,
                         "xtick.labelsize": FONT_PT, "ytick.labelsize": FONT_PT, "legend.fontsize": FONT_PT,
                         "figure.titlesize": FONT_PT + 2})
    return plt


def png(fig) -> bytes:
    """The figure as PNG bytes (the figure is closed)."""
    plt = _pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def panels(fig) -> int:
    """The number of data panels of a figure."""
    return len(fig.axes)


def _legend_outside(ax, **kw):
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False, **kw)


def bytes_figure(facts: ReportFacts):
    """Stacked bars: MiB per component, one segment per format; the legend right of the bars."""
    plt = _pyplot()
    table = facts.bytes_by_component_format()
    comps = sorted(table)
    formats = sorted({f for t in table.values() for f in t})
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.45 * max(1, len(comps))))
    left = [0.0] * len(comps)
    for f in formats:
        vals = [table[c].get(f, 0) / 2**20 for c in comps]
        ax.barh(comps, vals, left=left, label=f)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_xlabel("MiB")
    _legend_outside(ax, title="format")
    ax.set_title("bytes by component and format")
    return fig


def _series(facts: ReportFacts, metric: str) -> dict[str, list[tuple[int, float, str]]]:
    series: dict[str, list[tuple[int, float, str]]] = {}
    for o in facts.layered():
        v = getattr(o, metric)
        if v is not None:
            shown = max(LOG_FLOOR, 1.0 - v) if metric == "cosine" else max(LOG_FLOOR, v)
            series.setdefault(f"{o.component}/{o.kind}", []).append((o.layer, shown, o.format))
    return series


def error_figure(facts: ReportFacts, metric: str):
    """Small multiples of ``metric`` (``cosine`` drawn as 1 − cosine, or ``rel_rms``) across layers: one panel
    per parameter kind, shared log-scale axes; ``None`` when no object was requantized."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    series = _series(facts, metric)
    if not series:
        return None
    n = len(series)
    rows = math.ceil(n / PANEL_COLUMNS)
    cols = math.ceil(n / rows)  # balanced: 5 panels are 3 + 2, not 4 + 1
    fig, axes = plt.subplots(rows, cols, figsize=(min(MAX_WIDTH_IN, 3.6 * cols), 0.6 + 2.2 * rows),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    flat = [a for row in axes for a in row]
    for ax, (kind, pts) in zip(flat, sorted(series.items()), strict=False):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, color="#1565c0")
        formats = sorted({p[2] for p in pts})
        ax.set_title(f"{kind.split('/', 1)[-1]}\n{', '.join(formats)}")
        ax.set_yscale("log")
        ax.grid(True, which="major", color="#e0e0e0", linewidth=0.6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    for ax in flat[n:]:
        fig.delaxes(ax)
    for i, ax in enumerate(flat[:n]):
        if i >= n - cols:  # the lowest panel of each column
            ax.set_xlabel("layer")
            ax.tick_params(labelbottom=True)
        if i % cols == 0:
            ax.set_ylabel(_METRICS[metric])
    fig.suptitle(f"{_METRICS[metric]} per layer (log scale, lower is better), one panel per parameter kind")
    return fig


def exactness_grid(facts: ReportFacts) -> tuple[list[str], list[int], list[list[str]]]:
    """Parameter kinds × layers: the exactness of each cell, :data:`ABSENT` where the layer has no such
    object, ``unknown`` where provenance does not say."""
    layered = facts.layered()
    kinds = sorted({f"{o.component}/{o.kind}" for o in layered})
    layers = sorted({o.layer for o in layered})
    grid = [[ABSENT for _ in layers] for _ in kinds]
    for o in layered:
        grid[kinds.index(f"{o.component}/{o.kind}")][layers.index(o.layer)] = (
            o.exactness if o.exactness in EXACTNESS_COLOURS else "unknown")
    return kinds, layers, grid


def exactness_figure(facts: ReportFacts):
    """The exactness map, layer × parameter kind, with its legend right of it; ``None`` without layers."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    kinds, layers, grid = exactness_grid(facts)
    if not kinds:
        return None
    names = list(EXACTNESS_COLOURS)
    codes = [[names.index(c) for c in row] for row in grid]
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN - 2.5, 2.5 + 0.3 * len(layers)), 1.0 + 0.28 * len(kinds)))
    ax.imshow(codes, aspect="auto", cmap=ListedColormap(list(EXACTNESS_COLOURS.values())), vmin=0,
              vmax=len(names) - 1, interpolation="nearest")
    step = max(1, math.ceil(len(layers) / 32))
    ax.set_xticks(range(0, len(layers), step), [str(x) for x in layers[::step]])
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_xticks([i - 0.5 for i in range(len(layers) + 1)], minor=True)
    ax.set_yticks([i - 0.5 for i in range(len(kinds) + 1)], minor=True)
    ax.grid(which="minor", color="#bdbdbd", linewidth=0.6)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("layer")
    ax.set_title("exactness by layer and parameter kind")
    _legend_outside(ax, handles=[Patch(facecolor=c, edgecolor="#757575", label=n)
                                 for n, c in EXACTNESS_COLOURS.items()])
    return fig
