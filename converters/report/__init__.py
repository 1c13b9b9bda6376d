"""The conversion report: one self-contained HTML page about an artifact (docs/report.md).

:func:`write_report` is what ``convert report ARTIFACT -o report.html`` and ``--report FILE`` on the
conversion commands call. The numbers come from the artifact (:mod:`converters.report.facts`); the plots are
drawn with matplotlib's Agg backend (:mod:`converters.report.plots`, the optional ``report`` extra, imported
only here); :mod:`converters.report.page` puts them into one HTML file with the images embedded.
"""

from __future__ import annotations

from pathlib import Path


def write_report(artifact, output, *, acceptance: dict | None = None) -> dict:
    """Write the report of ``artifact`` to ``output`` (refused if it exists; written atomically) and return
    its facts as JSON (``acceptance``: the verify block of a conversion, docs/cli.md §Build then accept)."""
    from converters.report.facts import gather
    from converters.report.page import render
    from converters.sources.atomic_write import write_new_file
    from ninfer_core.errors import ArtifactExistsError

    facts = gather(Path(artifact), acceptance=acceptance)
    html = render(facts)
    write_new_file(Path(output), html.encode("utf-8"), exists=lambda: ArtifactExistsError(
        f"{Path(output).name} already exists; it is never overwritten", file=str(output), rule="target_exists"))
    return facts.to_json()
