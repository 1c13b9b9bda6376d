"""State shared by the calbin gates: the package root, the report, and what each stage parsed.

Each gate module reads what earlier stages put here and adds findings through :meth:`Ctx.emit`; a
missing piece (``None``) means its parse failed and was already reported, so dependent checks skip
themselves instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from converters.acceptance.calbin.codes import CODES
from converters.acceptance.calbin.grammar import Metadata
from converters.acceptance.calbin.yamlio import YamlLoadError, load_yaml
from converters.acceptance.report import Finding, Report

#: Findings of one code listed per file before the rest are only counted (a broken 40k-line
#: metadata file should give a readable report, not 40k rows).
MAX_PER_FILE = 25


@dataclass
class FileEntry:
    """One regular file of the package (``rel`` is POSIX, relative to the root)."""

    rel: str
    size: int
    role: str  # inventory role (see inventory.py), "unknown" if none
    sha256: str | None = None


@dataclass
class Submodel:
    """One submodel directory and everything parsed from it."""

    name: str
    rel: str  # directory, relative to the root
    dir_role: str | None  # "prefill" / "decode" from the directory name, or None
    cfg: dict | None = None  # its one_model_cfg entry, when the manifest names it
    meta: Metadata | None = None
    ops: Any = None  # opgraph.OpGraph
    profparts: dict[int, Any] = field(default_factory=dict)  # chip -> opgraph.Profparts
    commands: dict[str, Any] = field(default_factory=dict)  # text file -> commands.CommandText

    @property
    def kind(self) -> str | None:
        """``prefill``/``decode`` from ``model_info.is_prefill`` and the directory name; None if they conflict."""
        info = (self.cfg or {}).get("model_info")
        if isinstance(info, dict) and isinstance(info.get("is_prefill"), bool):
            declared = "prefill" if info["is_prefill"] else "decode"
            return declared if self.dir_role in (None, declared) else None  # conflicting: unknown
        return self.dir_role


@dataclass
class Ctx:
    root: Path
    report: Report
    context: int | None = None
    batch: int | None = None
    fast: bool = False
    files: dict[str, FileEntry] = field(default_factory=dict)
    manifest_rel: str | None = None
    manifest: dict | None = None
    runtime: Metadata | None = None
    submodels: list[Submodel] = field(default_factory=list)
    config: dict | None = None  # __Tokenizer/config.json
    tokenizer: dict[str, Any] = field(default_factory=dict)  # parsed tokenizer JSON files by name
    chips: int | None = None  # device_cfg.chip_nums, when consistent

    _emitted: dict[tuple[str, str | None], int] = field(default_factory=dict)

    def emit(self, code: str, evidence: str, **where: Any) -> Finding | None:
        """Add a finding; past :data:`MAX_PER_FILE` of one code in one file, only count it."""
        key = (code, where.get("file"))
        n = self._emitted[key] = self._emitted.get(key, 0) + 1
        if n > MAX_PER_FILE:
            return None
        return self.report.add(CODES.finding(code, evidence, **where))

    def flush_suppressed(self) -> None:
        """One closing finding per (code, file) whose findings were capped, giving the total."""
        for (code, file), n in sorted(self._emitted.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            if n > MAX_PER_FILE:
                self.report.add(CODES.finding(code, f"{n - MAX_PER_FILE} more {code} findings in this file "
                                              f"({n} in all) not listed", file=file))

    def check(self, gate: str, name: str) -> None:
        self.report.gate(gate).check(name)

    def path(self, rel: str) -> Path:
        return self.root.joinpath(*rel.split("/"))

    def load_mapping(self, rel: str, what: str = "a mapping") -> dict | None:
        """The YAML file ``rel`` (:func:`~converters.acceptance.calbin.yamlio.load_yaml`) when its top level is a
        mapping; else None after a ``YAML_DUPLICATE_KEY`` / ``YAML_PARSE`` finding (``what`` names the
        mapping expected in the evidence)."""
        try:
            doc = load_yaml(self.path(rel), rel)
        except YamlLoadError as exc:
            self.emit("YAML_DUPLICATE_KEY" if exc.duplicate else "YAML_PARSE", exc.message, file=rel, line=exc.line)
            return None
        if not isinstance(doc, dict):
            self.emit("YAML_PARSE", f"top level is {type(doc).__name__}, not {what}", file=rel)
            return None
        return doc

    @property
    def model_name(self) -> str | None:
        name = (self.manifest or {}).get("model_name")
        return name if isinstance(name, str) else None

    def submodel(self, kind: str) -> Submodel | None:
        found = [s for s in self.submodels if s.kind == kind]
        return found[0] if len(found) == 1 else None
