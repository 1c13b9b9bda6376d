"""The report's figures, drawn with matplotlib's Agg backend into PNG bytes (docs/report.md §Plots).

matplotlib is the optional ``report`` extra; only this module imports it, and only the report commands
import this module, so a conversion without ``--report`` never loads it. Missing, it is a typed error
saying how to install it.
"""

from __future__ import annotations

import io

from converters.errors import ConversionError
from converters.report.facts import ReportFacts

EXACTNESS_COLOURS = {"bit-exact": "#2e7d32", "value-exact": "#9ccc65", "requantized": "#ef6c00", "unknown": "#bdbdbd"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ConversionError("the report needs matplotlib, the optional 'report' extra: pip install "
                              "'ninfer-convert[report]' (make setup installs it)", rule="report_extra_missing") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    fig.clf()
    return buf.getvalue()


def bytes_chart(facts: ReportFacts) -> bytes:
    """Stacked bars: bytes per component, one segment per format."""
    plt = _pyplot()
    table = facts.bytes_by_component_format()
    comps = sorted(table)
    formats = sorted({f for t in table.values() for f in t})
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * max(1, len(comps))))
    left = [0.0] * len(comps)
    for f in formats:
        vals = [table[c].get(f, 0) / 2**20 for c in comps]
        ax.barh(comps, vals, left=left, label=f)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_xlabel("MiB")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("bytes by component and format")
    out = _png(fig)
    plt.close(fig)
    return out


def error_lines(facts: ReportFacts, metric: str) -> bytes | None:
    """One line per parameter kind across layers: ``metric`` (``cosine`` or ``rel_rms``) of requantized objects."""
    plt = _pyplot()
    series: dict[str, list[tuple[int, float]]] = {}
    for o in facts.layered():
        v = getattr(o, metric)
        if v is not None:
            series.setdefault(f"{o.component}/{o.kind}", []).append((o.layer, v))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for kind, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=kind)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer")
    ax.set_ylabel("cosine" if metric == "cosine" else "relative RMS error")
    if metric == "rel_rms":
        ax.set_yscale("log")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title(f"per-layer {'cosine' if metric == 'cosine' else 'relative RMS error'} by parameter kind")
    out = _png(fig)
    plt.close(fig)
    return out


def exactness_map(facts: ReportFacts) -> bytes | None:
    """Layer × parameter kind, coloured by exactness."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap

    layered = facts.layered()
    if not layered:
        return None
    kinds = sorted({f"{o.component}/{o.kind}" for o in layered})
    layers = sorted({o.layer for o in layered})
    names = list(EXACTNESS_COLOURS)
    grid = [[names.index("unknown") for _ in layers] for _ in kinds]
    for o in layered:
        grid[kinds.index(f"{o.component}/{o.kind}")][layers.index(o.layer)] = names.index(
            o.exactness if o.exactness in EXACTNESS_COLOURS else "unknown")
    fig, ax = plt.subplots(figsize=(min(12, 2 + 0.25 * len(layers)), 0.8 + 0.25 * len(kinds)))
    ax.imshow(grid, aspect="auto", cmap=ListedColormap(list(EXACTNESS_COLOURS.values())), vmin=0,
              vmax=len(names) - 1, interpolation="nearest")
    ax.set_yticks(range(len(kinds)), kinds, fontsize=6)
    ax.set_xticks(range(len(layers)), [str(x) for x in layers], fontsize=6)
    ax.set_xlabel("layer")
    ax.set_title("exactness by layer and parameter kind (legend in the table below)", fontsize=8)
    out = _png(fig)
    plt.close(fig)
    return out
