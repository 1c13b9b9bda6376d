"""The acceptance record beside an artifact: whether ``OUT.ninfer`` was accepted (docs/acceptance.md §Acceptance
record).

A conversion publishes its artifact as soon as it is written (crash-safe, §11.4); acceptance runs after
that. So that nobody mistakes a written artifact for an accepted one, ``convert gguf2ninfer`` /
``st2ninfer`` write ``OUT.ninfer.acceptance.json`` beside the entry: ``state`` ``accepting`` before the
gates run, then ``judged`` with the verdict, or ``interrupted`` (Ctrl-C, SIGTERM) / ``error`` (the
gates could not finish). ``convert verify … --source SRC`` replaces it with its own verdict (the way to
finish an interrupted or failed acceptance). ``convert inspect`` and ``convert verify`` read it.

The rule readers apply: the artifact is **accepted** only when the record's ``artifact_id`` is the
artifact's and ``accepted`` is true (verdict ``pass``, or ``incomplete`` for a minimal artifact judged on
its scope — the exit status of the acceptance). No record (``--no-verify``, a library conversion, a kill
before the first write), a record of another artifact (``stale``) or an unreadable one: not accepted.
The record is replaced whole (temporary, flush, rename: :func:`converters.sources.atomic_write.replace_file`).
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

SCHEMA = "ninfer-acceptance-record/v1"
SUFFIX = ".acceptance.json"
#: states of a record: written before the gates run, after them, or when they were stopped
STATES = ("accepting", "judged", "interrupted", "error")
#: what a reader finds beside an artifact besides a record of its own
ABSENT, STALE, UNREADABLE = "none", "stale", "unreadable"
DOC = "docs/acceptance.md §Acceptance record"


def record_path(entry: str | os.PathLike) -> Path:
    """``OUT.ninfer.acceptance.json`` beside the entry ``OUT.ninfer``."""
    entry = Path(entry)
    return entry.with_name(entry.name + SUFFIX)


def finish_command(entry, source, *, inputs: dict | None = None, template=None, sweep: bool = False) -> str:
    """The ``convert verify`` command line that accepts ``entry`` against what it was converted from."""
    words = ["convert", "verify", str(entry), "--source", str(source)]
    for key, value in (inputs or {}).items():
        for v in value if isinstance(value, list) else [value] if value else []:
            words += [f"--{key.replace('_', '-')}", str(v)]
    if template is not None:
        words += ["--template", str(template)]
    if sweep:
        words.append("--sweep")
    return shlex.join(words)


def make(artifact_id: str, entry, *, state: str, by: str, finish: str, report=None, reason: str | None = None) -> dict:
    """A record of ``state`` for the artifact ``artifact_id`` at ``entry``; ``report`` (a verify report) when
    judged, ``reason`` when interrupted or stopped by an error."""
    verdict = report.result if report is not None and state == "judged" else None
    doc = {"schema": SCHEMA, "artifact": Path(entry).name, "artifact_id": artifact_id, "state": state,
           "verdict": verdict, "accepted": verdict in ("pass", "incomplete"), "by": by}
    if report is not None and state == "judged":
        doc["gates"] = [{"gate": g.number, "title": g.title, "status": g.status} for g in report.gates]
        doc["sweep"] = bool(report.sweep)
        doc["layers"] = report.layers
    if reason is not None:
        doc["reason"] = reason
    doc["finish"] = finish
    return doc


def write(entry, doc: dict) -> Path:
    """Replace the record beside ``entry`` with ``doc`` (whole, never half-written)."""
    from converters.sources.atomic_write import replace_file

    path = record_path(entry)
    replace_file(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
    return path


def read(entry, artifact_id: str | None) -> dict:
    """The record beside ``entry`` as readers see it: the record itself when it is ``artifact_id``'s, else
    ``{"state": "none" | "stale" | "unreadable", "accepted": false}`` (see the module docstring)."""
    path = record_path(entry)
    if not os.path.lexists(path):
        return {"state": ABSENT, "accepted": False, "record": path.name}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {"state": UNREADABLE, "accepted": False, "record": path.name}
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("state") not in STATES:
        return {"state": UNREADABLE, "accepted": False, "record": path.name}
    if doc.get("artifact_id") != artifact_id:
        return {"state": STALE, "accepted": False, "record": path.name, "artifact_id": doc.get("artifact_id")}
    return {**doc, "accepted": doc.get("accepted") is True and doc.get("state") == "judged", "record": path.name}


def describe(entry, rec: dict) -> str:
    """One line: what is on disk at ``entry`` and, unless accepted, how to finish — the last line of an
    interrupted or failed conversion, and the acceptance line of ``inspect``."""
    state, verdict = rec.get("state"), str(rec.get("verdict") or "").upper()
    if state == "judged" and rec.get("accepted"):
        return f"{entry} written, accepted ({verdict}, {rec.get('by')})"
    why = {"judged": f"acceptance {verdict}", "accepting": "acceptance did not finish",
           "interrupted": f"acceptance interrupted ({rec.get('reason') or 'signal'})",
           "error": f"acceptance stopped by an error ({rec.get('reason')})",
           ABSENT: f"no acceptance record ({record_path(entry).name})",
           STALE: f"the acceptance record {rec.get('record')} is another artifact's",
           UNREADABLE: f"the acceptance record {rec.get('record')} cannot be read"}[state]
    finish = rec.get("finish") or f"convert verify {shlex.quote(str(entry))} --source SRC"
    return f"{entry} written, NOT accepted ({why}); finish with: {finish}"
