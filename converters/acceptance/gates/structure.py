"""Structure: every reader rule of the container, plus the filesystem checks of docs/calbin.md §9 Gate A.

``ninfer_core.validate`` already runs every container rule (framing, schema, references, ranges, parts,
encodings, codec validity) and lists all findings instead of stopping at the first. This module sorts
them into the acceptance codes (:mod:`converters.acceptance.gates.codes`) by their ``rule`` — the reader's stable
identifiers (``ninfer_core.container`` docstring) — and adds what a reader does not look at: symlinks that
leave the artifact's directory and files that look like parts of this artifact but are not declared.

``verify`` gate 1 is every structure code here; gate 3 (codec validity) the encoding and codec-value codes;
``validate`` puts them under Gates A/B/C/F by the code table.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from converters.acceptance.gates.codes import finding
from converters.acceptance.registry import GateContext
from converters.acceptance.report import Finding
from converters.sources.fileio import symlink_leaving
from ninfer_core import open_artifact, validate
from ninfer_core.errors import NinferError

# reader rule -> acceptance code (ninfer_core.container's rule list, codecs' finding rules)
RULE_CODES: dict[str, str] = {
    **dict.fromkeys(("entry_missing", "entry_unreadable", "io_error"), "NINFER_ENTRY_UNREADABLE"),
    **dict.fromkeys(("entry_too_short", "entry_magic", "json_bytes_range", "json_too_large"), "NINFER_FRAMING"),
    **dict.fromkeys(("part_missing", "part_unreadable"), "NINFER_PART_MISSING"),
    **dict.fromkeys(("entry_length", "part_length", "short_read", "file_length", "payload_size"), "NINFER_PART_SIZE"),
    **dict.fromkeys(("part_magic", "part_index", "part_artifact_id"), "NINFER_PART_FOREIGN"),
    "alignment_zone_nonzero": "NINFER_ALIGNMENT_ZONE",
    **dict.fromkeys(("json_utf8", "json_syntax", "json_duplicate_key", "field_type", "missing_field", "unknown_field",
                     "empty_collection", "u64_range", "u64_overflow", "id_rule", "shape_rule", "object_kind",
                     "enum_value", "binding_form", "proposal_placement", "proposal_rows", "metadata_name",
                     "entry_path", "part_name", "part_name_duplicate", "object_id_duplicate", "use_duplicate"),
                    "NINFER_SCHEMA"),
    **dict.fromkeys(("reference_missing", "reference_kind", "part_range"), "NINFER_REFERENCE"),
    **dict.fromkeys(("object_order", "object_overlap", "object_out_of_payload", "object_alignment", "read_range"),
                    "NINFER_OBJECT_RANGE"),
    "binding_coverage": "NINFER_BINDING_SHAPE",
    # container §8 auxiliary rules (ninfer_core.container.auxiliaries): filed with the gate F codes
    **dict.fromkeys(("auxiliary_signs_shape", "auxiliary_signs_value"), "NINFER_AUX_HADAMARD"),
    **dict.fromkeys(("auxiliary_columns_shape", "auxiliary_columns_value", "auxiliary_columns_format"),
                    "NINFER_AUX_INPUT_COLUMNS"),
    "auxiliary_divisor_shape": "NINFER_AUX_DIVISOR",
    **dict.fromkeys(("invalid_code", "non_finite_multiplier", "block_scale_nan", "block_scale_sign",
                     "invalid_divisor"), "NINFER_CODEC_INVALID"),
    **dict.fromkeys(("nonzero_padding", "negative_multiplier", "non_finite_value"), "NINFER_CODEC_WARNING"),
}
# interpretation rules (container §5.3/§6, codecs' validate_combination): the object cannot be decoded
ENCODING_RULES = frozenset({
    "unknown_encoding", "object_encoded_size", "unknown_format", "unknown_layout", "format_layout_mismatch",
    "shape_rank", "shape_dims", "nvfp4_shape", "nvfp4_divisors", "divisors_invalid", "divisors_not_allowed",
    "ggml_block_shape", "encoded_size_mismatch", "row_split_shape", "shape_not_allowed",
})
CODEC_CODES = frozenset({"NINFER_ENCODING", "NINFER_CODEC_INVALID", "NINFER_CODEC_WARNING"})
TEMPORARY_RE = re.compile(r"\.tmp|\.partial|~$")


def code_for(rule: str, severity: str) -> str:
    if rule in RULE_CODES:
        return RULE_CODES[rule]
    if rule in ENCODING_RULES:
        return "NINFER_ENCODING"
    return "NINFER_CONTAINER_RULE" if severity == "ERROR" else "NINFER_CODEC_WARNING"


def relative_name(file: str | None, root: Path) -> str | None:
    """``file`` relative to the artifact's directory when inside it (reports never need the absolute path)."""
    if not file:
        return None
    p = Path(file)
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # outside, unusable, or a symlink loop (Python < 3.13)
        return p.name


@dataclass
class Structure:
    """What the structure checks found: issues, and the open artifact when it could be opened."""

    issues: list[Finding] = field(default_factory=list)
    artifact: object | None = None
    open_error: str | None = None
    checks: list[str] = field(default_factory=list)

    @property
    def codec_issues(self) -> list[Finding]:
        return [i for i in self.issues if i.code in CODEC_CODES]

    @property
    def container_issues(self) -> list[Finding]:
        return [i for i in self.issues if i.code not in CODEC_CODES]

    def close(self) -> None:
        if self.artifact is not None:
            self.artifact.close()
            self.artifact = None


def check_structure(path: str | os.PathLike) -> Structure:
    """Run every reader rule and the filesystem checks on the artifact whose entry is ``path``.

    The artifact is opened (``Structure.artifact``, caller closes) when the entry and directory are sound;
    parts are checked by ``validate`` and again lazily on every read."""
    path = Path(path)
    root = path.parent
    out = Structure(checks=["entry_readable", "framing", "schema", "references", "ranges", "parts",
                            "encodings", "codec_values", "symlinks", "unknown_files"])
    if not path.is_file() and not path.is_symlink():
        out.issues.append(finding("NINFER_ENTRY_UNREADABLE", "the entry file does not exist or is not a regular file",
                                file=path.name))
        out.open_error = "entry missing"
        return out
    for f in validate(path):
        code = code_for(f.rule, f.severity)
        section = f" {f.section}" if f.section else ""
        out.issues.append(finding(code, f"{f.message} [rule {f.rule}{section}]", path=f.json_path,
                                file=relative_name(f.file, root), detail={"rule": f.rule}))
    try:
        out.artifact = open_artifact(path)
    except NinferError as exc:
        out.open_error = f"{exc.message} [rule {exc.rule}]"
        if not out.issues:  # validate and the reader share every rule; keep the reader's word if they differ
            out.issues.append(finding(code_for(exc.rule or "", "ERROR"), out.open_error, path=exc.json_path,
                                    file=relative_name(exc.file, root)))
        return out
    out.issues += _filesystem(out.artifact, path)
    return out


def _filesystem(art, entry: Path) -> list[Finding]:
    """Symlinks leaving the directory (or dangling), and undeclared files named like this artifact's."""
    issues = []
    root = entry.parent.resolve()
    declared = {entry.name}
    for f in art.files:
        loc = Path(f.location) if f.location is not None else entry
        declared.add(loc.name)
        target = symlink_leaving(loc, root)
        if target is not None and not target.exists():
            issues.append(finding("NINFER_SYMLINK_ESCAPE", f"{loc.name} is a dangling symlink", file=loc.name))
        elif target is not None:
            issues.append(finding("NINFER_SYMLINK_ESCAPE", f"{loc.name} is a symlink to a file outside the "
                                  "artifact's directory", file=loc.name, detail={"target": str(target)}))
    try:
        siblings = sorted(p.name for p in root.iterdir() if p.name.startswith(entry.name) and p.name not in declared)
    except OSError:
        siblings = []
    for name in siblings:
        kind = "temporary" if TEMPORARY_RE.search(name) else "file"
        issues.append(finding("NINFER_UNKNOWN_FILE", f"{name}: an undeclared {kind} named after the artifact "
                            "(a stale part, or a leftover of an interrupted write?)", file=name))
    return issues


class ArtifactGateContext(GateContext):
    """A gate run over one artifact path (verify, validate): its structure is read once and shared."""

    def __init__(self, report, path: Path):
        super().__init__(report)
        self.path = path

    @cached_property
    def structure(self) -> Structure:
        return check_structure(self.path)

    @property
    def artifact(self):
        return self.structure.artifact
