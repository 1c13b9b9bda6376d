"""Finding codes of ``.ninfer`` acceptance: one table for ``convert validate`` (gates A–F), ``convert verify``
(gates 1–7) and ``convert check`` (checks 1–3), each code with its fixed severity and the gates that report it
(docs/acceptance.md §Gate registry).

A code has one meaning whichever command reports it: ``convert verify``'s structure, coverage and codec gates
run the same checks as ``convert validate``'s gates A/B/C/F and report the same codes. ``validate`` is
static (the artifact alone) and files each finding under its code's letter; codes whose ``validate`` gate is
``None`` need the source and are reported only by ``verify`` (values, order, resources against the source,
golden numerics) or are ``check``'s (``CHECK_*``). :func:`finding` makes every finding of these codes.

:data:`VALIDATE_CODES` is the :class:`~converters.acceptance.report.CodeTable` of ``convert validate``;
``docs/validation-codes.md`` documents every row of :data:`SPECS` (a test compares the two).

Severities (docs/acceptance.md §One finding model): ``ERROR`` rejects; ``BLOCKED_REPRODUCIBILITY`` may
run but may not be called reproducible; ``WARNING_ARTIFACT`` (the ``WARNING_<AREA>`` a ``.ninfer`` artifact
adds) is a writer-hygiene or completeness defect that does not change a decoded value; ``WARNING_SERVICE``
constrains the serving layer; ``INFO`` is reported, not judged.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.acceptance.report import CodeSpec, CodeTable, Finding

E, B, W, S, INFO = "ERROR", "BLOCKED_REPRODUCIBILITY", "WARNING_ARTIFACT", "WARNING_SERVICE", "INFO"


@dataclass(frozen=True)
class GateCode:
    """One code: severity, the ``validate`` gate (A–F or None), the ``verify`` gate (1–7 or None) and the
    ``check`` gate (1–3, for ``CHECK_*`` codes)."""

    code: str
    severity: str
    validate_gate: str | None
    verify_gate: int | None
    summary: str
    check_gate: int | None = None


SPECS: tuple[GateCode, ...] = (
    # filesystem and framing (docs/format/container.md §2–§3, §11.1–§11.2; gate A)
    GateCode("NINFER_ENTRY_UNREADABLE", E, "A", 1, "The entry file is missing, unreadable or not a regular file."),
    GateCode("NINFER_FRAMING", E, "A", 1, "The entry header is broken: magic, JSON length or JSON size limit (§3.1)."),
    GateCode("NINFER_PART_MISSING", E, "A", 1, "A declared continuation part is missing or cannot be read (§3.2)."),
    GateCode("NINFER_PART_SIZE", E, "A", 1, "A file of the set is shorter or longer than its declared payload (truncated or extended; §3, §11.2)."),
    GateCode("NINFER_PART_FOREIGN", E, "A", 1, "A part's header names another artifact_id, another index or a wrong magic (§3.2)."),
    GateCode("NINFER_SYMLINK_ESCAPE", E, "A", 1, "A file of the set is a symlink that leaves the artifact's directory, or dangles."),
    GateCode("NINFER_READ_FAILED", E, "A", 1, "Reading the artifact failed while a check ran (a damaged or missing part; the read error is in the evidence)."),
    GateCode("NINFER_ALIGNMENT_ZONE", W, "A", 1, "An alignment zone holds non-zero bytes; the writer fills it with zeros (§3.1, §3.2)."),
    GateCode("NINFER_UNKNOWN_FILE", INFO, "A", None, "A file named like a part or temporary of this artifact that the directory does not declare."),
    # schema (docs/format/container.md §1, §4–§10; gate B)
    GateCode("NINFER_SCHEMA", E, "B", 1, "The JSON directory breaks a schema rule: syntax, field, type, ID or enumeration (§1, §4–§10)."),
    GateCode("NINFER_ENCODING", E, "B", 3, "An object's format, layout, shape or divisors is unknown or not allowed, or its bytes are not its encoded size (§5.3, §6)."),
    GateCode("NINFER_CONTAINER_RULE", E, "B", 1, "Another container rule is broken (the rule is named in the evidence)."),
    GateCode("NINFER_CONFIG_INVALID", E, "B", 2, "A component's config (components.<id>.config) lacks a field its architecture needs, or holds an invalid value."),
    # cross-reference (docs/format/container.md §4.2, §5.3, §7–§9; gate C)
    GateCode("NINFER_REFERENCE", E, "C", 1, "A reference names a missing object, an object of the wrong kind, or a range outside its object (§4.2, §7–§9)."),
    GateCode("NINFER_OBJECT_RANGE", E, "C", 1, "Objects are out of order, overlap, are misaligned or lie beyond the payload (§5.3)."),
    GateCode("NINFER_BINDING_MISSING", E, "C", 2, "A logical parameter the architecture requires for a selected component is not bound."),
    GateCode("NINFER_BINDING_SHAPE", E, "C", 2, "A binding's element count, or its whole object's shape, differs from the parameter's logical shape."),
    GateCode("NINFER_BINDING_UNEXPECTED", W, "C", 2, "A binding that no selected component's parameter list names."),
    GateCode("NINFER_OBJECT_UNCONSUMED", E, "C", 2, "An object that no binding, use auxiliary, resource table or contract object consumes."),
    GateCode("NINFER_USE_MISSING", E, "C", 2, "A parameter the contract gives a use position has no use record (§8)."),
    GateCode("NINFER_USE_INPUT", E, "C", 2, "A use's input differs from the contract's input for its parameter (§8)."),
    GateCode("NINFER_PROPOSAL_TOKEN_IDS", E, "C", 2, "proposal/token_ids of an indexed proposal is not an integer tensor, or names a token outside the text vocabulary or one token twice (§9.2)."),
    GateCode("NINFER_COVERAGE_UNCHECKED", INFO, "C", 2, "A component whose parameter list could not be derived (no mapping for it, or its config lacks a field); its bindings were not checked."),
    # capacity (gate D)
    GateCode("NINFER_CAP_CONFIG_INCOMPLETE", W, "D", None, "KV-cache or state bytes cannot be computed: the text config lacks a field."),
    GateCode("NINFER_CAP_CONTEXT_EXCEEDS", S, "D", None, "The requested --context exceeds the model's max_position_embeddings."),
    # supply chain (docs/format/container.md §10; gate E)
    GateCode("NINFER_SUPPLY_PROVENANCE_MISSING", B, "E", None, "The artifact has no provenance block (§10)."),
    GateCode("NINFER_SUPPLY_SOURCE_MISSING", B, "E", None, "provenance.source lacks the source's kind, size or hash."),
    GateCode("NINFER_SUPPLY_CONVERTER_MISSING", B, "E", None, "provenance.converter lacks the converter's name or version."),
    GateCode("NINFER_SUPPLY_RECIPE_MISSING", B, "E", None, "provenance.recipe lacks the recipe's name or sha256."),
    GateCode("NINFER_SUPPLY_OBJECT_UNTRACED", B, "E", None, "A tensor object has no per-object provenance (sources, transforms, exactness)."),
    GateCode("NINFER_SUPPLY_RESOURCE_HASH", E, "E", 6, "A resource's bytes do not match the sha256 its provenance records."),
    GateCode("NINFER_SUPPLY_BORROWED", INFO, "E", None, "Objects borrowed byte-for-byte from a template (counted by prefix)."),
    GateCode("NINFER_SUPPLY_REQUANTIZED", INFO, "E", None, "Requantized objects and their measured error (worst cosine)."),
    # pre-run checks without a GPU (gate F)
    GateCode("NINFER_CODEC_INVALID", E, "F", 3, "An object's bytes hold invalid codes, non-finite multipliers or invalid divisors (storage-layouts)."),
    GateCode("NINFER_CODEC_WARNING", W, "F", 3, "An object's bytes have non-zero padding, negative multipliers or non-finite values (writer hygiene)."),
    GateCode("NINFER_AUX_HADAMARD", E, "F", 3, "hadamard_signs: width not a multiple of 1024 or not the matrix's K, values not +-1, or widths table disagrees (storage-layouts §7)."),
    GateCode("NINFER_AUX_INPUT_COLUMNS", E, "F", 3, "input_columns is not a permutation of 0..K-1 of its matrix (§8)."),
    GateCode("NINFER_AUX_DIVISOR", E, "F", 3, "An activation divisor is not one fp32 element, or not a positive finite number (§8)."),
    GateCode("NINFER_AUX_UNKNOWN", W, "F", 3, "An auxiliary kind this validator does not know was not checked (§8)."),
    GateCode("NINFER_RUNTIME_RUN_REQUIRED", INFO, "F", None, "Static acceptance done; convert verify --source (values, order, golden numerics) must still run."),
    # verify only: the artifact against its source (gates 4-7)
    GateCode("VERIFY_SKIPPED_NO_SOURCE", INFO, None, 4, "A gate that compares with the source (4, 5, 7; 6 in part) was skipped: no --source given."),
    GateCode("VERIFY_SOURCE_MISMATCH", E, None, 4, "The given source is not the one provenance records (header sha256 or size differ)."),
    GateCode("VERIFY_CONFIG_MISMATCH", E, None, 4, "A component's config differs from the one the source gives in a field the source states (geometry, RoPE, deepstack wiring)."),
    GateCode("VERIFY_PARAMETER_UNREADABLE", E, None, 4, "A bound parameter cannot be decoded from the artifact or computed from the source."),
    GateCode("VERIFY_VALUE_NOT_EXACT", E, None, 4, "A parameter provenance calls exact decodes to values that differ from the source's after the mapped transforms."),
    GateCode("VERIFY_SWEEP_PARTIAL", E, None, 4, "verify --sweep compares every layer, and the artifact binds only some of them (a minimal --only-layer artifact): the count is in the evidence."),
    GateCode("VERIFY_VALUE_TOLERANCE", E, None, 4, "A requantized parameter's cosine or maximum error is outside its format's tolerance."),
    GateCode("VERIFY_ROW_ORDER", E, None, 5, "Rows of a parameter do not match the source's rows of the same index (permuted or foreign rows)."),
    GateCode("VERIFY_ROW_NORM", E, None, 5, "Per-row norms of a parameter differ from the source's beyond its format's tolerance."),
    GateCode("VERIFY_HEAD_ORDER", E, None, 5, "A head slice of a parameter is closer to another source head than to its own, or matches none (heads permuted, tiled or interleaved)."),
    GateCode("VERIFY_RESOURCE_MISMATCH", E, None, 6, "A resource differs from the one the source provides (copied or rebuilt)."),
    GateCode("VERIFY_RESOURCE_MISSING", E, None, 6, "A resource the source provides is not in the artifact."),
    GateCode("VERIFY_BORROWED_MISMATCH", E, None, 4, "An object provenance calls borrowed from a template differs from the template's object (or its recorded sha256); gates 4 (tensors) and 6 (resources)."),
    GateCode("VERIFY_BORROWED_UNCHECKED", E, None, 4, "An object borrowed from a template could not be compared: no sha256 recorded and the template cannot be opened (pass --template)."),
    GateCode("VERIFY_GOLDEN_LOGITS", E, None, 7, "Cost: the artifact's golden forward logits differ from the source's beyond the recipe's budget (or its precision class's default)."),
    GateCode("VERIFY_GOLDEN_STRUCTURE", E, None, 7, "Structure: the source's forward, under its own config and conventions, on the artifact's values read back, is another function than the artifact's forward."),
    GateCode("VERIFY_GOLDEN_UNAVAILABLE", INFO, None, 7, "The golden forward does not cover this architecture or component; not run."),
    # check only: the conversion's self-test before writing (checks 1-3)
    GateCode("CHECK_GEOMETRY_MISMATCH", E, None, None, "check 1: a group's payload bytes are not what the storage layout's arithmetic gives (docs/format/layouts.md).", check_gate=1),
    GateCode("CHECK_ROUNDTRIP_FAILED", E, None, None, "check 2: a sampled tensor's bytes, codes or decoded values differ after the transcode, or its multipliers look read at a wrong offset.", check_gate=2),
    GateCode("CHECK_PRODUCER_FAILED", E, None, None, "check 3: an object could not be produced, or produced a byte count other than its planned encoded size.", check_gate=3),
)

BY_CODE: dict[str, GateCode] = {c.code: c for c in SPECS}
if len(BY_CODE) != len(SPECS):  # pragma: no cover - a programming error caught at import
    raise RuntimeError("duplicate code in converters.acceptance.gates.codes.SPECS")

VALIDATE_CODES = CodeTable(CodeSpec(c.code, c.severity, c.validate_gate, c.summary)
                           for c in SPECS if c.validate_gate is not None)


def spec(code: str) -> GateCode:
    """The :class:`GateCode` of ``code`` (KeyError for an undocumented code: a programming error)."""
    return BY_CODE[code]


def finding(code: str, evidence: str, *, path: str | None = None, file: str | None = None,
            detail: dict | None = None) -> Finding:
    """The :class:`~converters.acceptance.report.Finding` of ``code``: its severity from :data:`SPECS`, its gate
    the code's ``validate`` letter (``None`` for a code only verify or check reports; the report files it
    under the gate that ran). ``evidence`` is one sentence a reader can act on; ``path`` a JSON path or
    logical name; ``file`` a file name relative to the artifact's directory; ``detail`` structured numbers.
    An undocumented code fails here, where it is made (KeyError: a programming error)."""
    c = spec(code)
    return Finding(c.severity, code, c.validate_gate, evidence, path=path or None, file=file or None,
                   detail=detail or None)
