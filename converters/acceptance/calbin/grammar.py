"""Explicit grammar of the calbin ``.txt`` metadata: one parser per line form (docs/calbin.md §4, §5).

The metadata files are not YAML; docs/calbin.md §9 Gate B forbids loose splitting and guessing. Each line must match
exactly one of the forms below (full-line regular expressions, tried in order), else it is a grammar
error naming the file and line. Blank lines are allowed; nothing else is skipped.

``model_memory_reserved_info.txt`` (§4)::

    calcc_ver: VALUE                         device_memory_required: N UNIT
    deviceN: [name, ...]                     model_arch NAME | model_type NAME | n_batch N | max_seq_len N
    dram_rsvd|sram_rsvd|sync_rsvd vaddr <hex> size <decimal>
    <file> offset <hex> vaddr <hex> size <hex> chip <mask95_64> <mask63_32> <mask31_0>

``<submodel>/submodel_memory_reserved_info.txt`` (§5)::

    model_arch NAME | smodel_type NAME | n_batch N | calc_mchip NAME | calc_utype [a,b] | workload N UNIT
    ccu_stack_config location <domain>
    <file> chip <mask95_64> <mask63_32> <mask31_0>                      (commands, helper SOs)
    <file> location <domain> chip <mask95_64> <mask63_32> <mask31_0>    (CCU ELF programs)
    icsr <name> offset <hex>
    ibuf|obuf <name> shape [d0,d1,...] type <dtype> vaddr <ping> <pong> size <decimal>

Reading decisions where docs/calbin.md shows only a template: ``<hex>`` takes an optional ``0x`` prefix; a chip
mask is three 32-bit hex words, high word first; ``key value`` lines whose key is not in the dictionary
parse as :class:`Field` with ``known=False`` (reported as ``META_UNKNOWN_FIELD``, not guessed at).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_LINE_BYTES = 64 << 10

_HEX = r"(?:0[xX])?[0-9a-fA-F]{1,16}"  # <= 64 bits; longer is no address
_MASK = r"([0-9a-fA-F]{1,8})\s+([0-9a-fA-F]{1,8})\s+([0-9a-fA-F]{1,8})"
_DEC = r"\d{1,20}"  # <= 64 bits (and below int()'s digit limit)
_FILE = r"([^\s]+)"
_NAME = r"([A-Za-z_][\w.\-\[\]/]*)"


@dataclass(frozen=True)
class Field:
    """A ``key value`` / ``key: value`` line; ``known`` says whether the key is in the dictionary."""

    key: str
    value: str
    line: int
    known: bool = True


@dataclass(frozen=True)
class Reservation:
    domain: str  # "dram" | "sram" | "sync"
    vaddr: int
    size: int
    line: int


@dataclass(frozen=True)
class ParamMapping:
    file: str
    offset: int
    vaddr: int
    size: int
    mask: int
    line: int


@dataclass(frozen=True)
class FileDecl:
    """A command/helper (``location`` None) or CCU ELF (``location`` = memory domain) declaration."""

    file: str
    mask: int
    line: int
    location: str | None = None


@dataclass(frozen=True)
class Csr:
    name: str
    offset: int
    line: int


@dataclass(frozen=True)
class IoBuffer:
    direction: str  # "ibuf" | "obuf"
    name: str
    shape: tuple[int, ...]
    dtype: str
    vaddr_ping: int
    vaddr_pong: int
    size: int
    line: int


@dataclass(frozen=True)
class GrammarIssue:
    line: int
    message: str


@dataclass
class Metadata:
    """Everything one metadata file declared, in file order, plus the lines that broke the grammar."""

    file: str
    fields: list[Field] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    mappings: list[ParamMapping] = field(default_factory=list)
    decls: list[FileDecl] = field(default_factory=list)
    csrs: list[Csr] = field(default_factory=list)
    buffers: list[IoBuffer] = field(default_factory=list)
    issues: list[GrammarIssue] = field(default_factory=list)
    typed: dict[str, object] = field(default_factory=dict)  # checked field values, filled by metadata.py

    def values(self, key: str) -> list[Field]:
        return [f for f in self.fields if f.key == key]


def mask_of(hi: str, mid: str, lo: str) -> int:
    """The 96-bit chip mask from its three 32-bit words (``mask95_64 mask63_32 mask31_0``)."""
    return (int(hi, 16) << 64) | (int(mid, 16) << 32) | int(lo, 16)


def _hex(s: str) -> int:
    return int(s, 16)


# -- line forms --------------------------------------------------------------------------------------
class _Form:
    """One line form: a full-line regex and a builder that appends the parsed record to ``Metadata``."""

    regex: re.Pattern[str]

    def apply(self, m: re.Match[str], line: int, meta: Metadata) -> None:
        raise NotImplementedError


class _ReservationForm(_Form):
    regex = re.compile(rf"(dram|sram|sync)_rsvd\s+vaddr\s+({_HEX})\s+size\s+({_DEC})")

    def apply(self, m, line, meta):
        meta.reservations.append(Reservation(m[1], _hex(m[2]), int(m[3]), line))


class _ParamMappingForm(_Form):
    regex = re.compile(rf"{_FILE}\s+offset\s+({_HEX})\s+vaddr\s+({_HEX})\s+size\s+({_HEX})\s+chip\s+{_MASK}")

    def apply(self, m, line, meta):
        meta.mappings.append(
            ParamMapping(m[1], _hex(m[2]), _hex(m[3]), _hex(m[4]), mask_of(m[5], m[6], m[7]), line)
        )


class _ElfDeclForm(_Form):
    regex = re.compile(rf"{_FILE}\s+location\s+(\w+)\s+chip\s+{_MASK}")

    def apply(self, m, line, meta):
        meta.decls.append(FileDecl(m[1], mask_of(m[3], m[4], m[5]), line, location=m[2]))


class _FileDeclForm(_Form):
    regex = re.compile(rf"{_FILE}\s+chip\s+{_MASK}")

    def apply(self, m, line, meta):
        meta.decls.append(FileDecl(m[1], mask_of(m[2], m[3], m[4]), line))


class _CcuStackForm(_Form):
    regex = re.compile(r"(ccu_stack_config)\s+location\s+(\w+)")

    def apply(self, m, line, meta):
        meta.fields.append(Field(m[1], m[2], line))


class _CsrForm(_Form):
    regex = re.compile(rf"icsr\s+{_NAME}\s+offset\s+({_HEX})")

    def apply(self, m, line, meta):
        meta.csrs.append(Csr(m[1], _hex(m[2]), line))


class _IoBufferForm(_Form):
    regex = re.compile(
        rf"(ibuf|obuf)\s+{_NAME}\s+shape\s+\[\s*((?:{_DEC}\s*(?:,\s*{_DEC}\s*){{0,63}})?)\]\s+type\s+(\w+)"
        rf"\s+vaddr\s+({_HEX})\s+({_HEX})\s+size\s+({_DEC})"
    )

    def apply(self, m, line, meta):
        dims = tuple(int(d) for d in m[3].split(",")) if m[3].strip() else ()
        meta.buffers.append(IoBuffer(m[1], m[2], dims, m[4], _hex(m[5]), _hex(m[6]), int(m[7]), line))


class _FieldForm(_Form):
    """``key: value`` (colon keys) or ``key value`` (space keys); values are checked per key later."""

    regex = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(:\s*|\s+)(\S(?:.*\S)?)")

    def __init__(self, colon_keys: re.Pattern[str], space_keys: frozenset[str], structured: dict[str, str]):
        self.colon_keys = colon_keys
        self.space_keys = space_keys
        self.structured = structured  # keywords of the structured forms: a malformed one is no field

    def apply(self, m, line, meta):
        key, sep, value = m[1], m[2], m[3]
        if key in self.structured:
            meta.issues.append(GrammarIssue(line, f"malformed {key} line; expected '{self.structured[key]}'"))
            return
        colon = sep.startswith(":")
        if colon and self.colon_keys.fullmatch(key) or not colon and key in self.space_keys:
            meta.fields.append(Field(key, value, line))
        elif self.colon_keys.fullmatch(key) or key in self.space_keys:
            form = f"{key}: VALUE" if self.colon_keys.fullmatch(key) else f"{key} VALUE"
            meta.issues.append(GrammarIssue(line, f"field {key!r} must be written as '{form}'"))
        else:
            meta.fields.append(Field(key, value, line, known=False))


RUNTIME_FORMS: tuple[_Form, ...] = (
    _ReservationForm(),
    _ParamMappingForm(),
    _FieldForm(re.compile(r"calcc_ver|device\d+|device_memory_required"),
               frozenset({"model_arch", "model_type", "n_batch", "max_seq_len"}),
               {f"{d}_rsvd": f"{d}_rsvd vaddr <hex> size <decimal>" for d in ("dram", "sram", "sync")}),
)

SUBMODEL_FORMS: tuple[_Form, ...] = (
    _IoBufferForm(),
    _CsrForm(),
    _CcuStackForm(),
    _ElfDeclForm(),
    _FileDeclForm(),
    _FieldForm(re.compile(r"(?!)"),
               frozenset({"model_arch", "smodel_type", "n_batch", "calc_mchip", "calc_utype", "workload"}),
               {"icsr": "icsr <name> offset <hex>",
                "ibuf": "ibuf <name> shape [d,...] type <dtype> vaddr <ping> <pong> size <decimal>",
                "obuf": "obuf <name> shape [d,...] type <dtype> vaddr <ping> <pong> size <decimal>",
                "ccu_stack_config": "ccu_stack_config location <domain>"}),
)


def _lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """``(number, text, problem)`` per line, streamed; over-long or non-UTF-8 lines yield a problem."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if len(raw) > MAX_LINE_BYTES:
                yield number, None, f"line longer than {MAX_LINE_BYTES} bytes"
                continue
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                yield number, None, f"not UTF-8 text (byte {exc.start})"


def parse_metadata(path: Path, rel: str, forms: tuple[_Form, ...]) -> Metadata:
    """Parse one metadata file with the given line forms; every bad line becomes a :class:`GrammarIssue`.

    Raises:
        OSError: the file cannot be opened (the caller reports it under Gate A).
    """
    meta = Metadata(rel)
    for number, text, problem in _lines(path):
        if problem is not None:
            meta.issues.append(GrammarIssue(number, problem))
            continue
        stripped = text.strip()
        if not stripped:
            continue
        for form in forms:
            m = form.regex.fullmatch(stripped)
            if m:
                form.apply(m, number, meta)
                break
        else:
            meta.issues.append(GrammarIssue(number, "line matches no metadata line form"))
    return meta


# -- typed values of fields ---------------------------------------------------------------------------
_INT_RE = re.compile(_DEC)
_LIST_RE = re.compile(r"\[\s*([\w.\-]+(?:\s*,\s*[\w.\-]+)*)?\s*\]")
_QUANTITY_RE = re.compile(rf"({_DEC})\s*([A-Za-z]+)")

UNIT_BYTES = {
    "b": 1, "byte": 1, "bytes": 1,
    "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20,
    "gb": 1 << 30, "gib": 1 << 30, "tb": 1 << 40, "tib": 1 << 40,
}


def parse_int(value: str) -> int | None:
    return int(value) if _INT_RE.fullmatch(value) else None


def parse_list(value: str) -> list[str] | None:
    m = _LIST_RE.fullmatch(value)
    if not m:
        return None
    return [v.strip() for v in m[1].split(",")] if m[1] else []


def parse_quantity(value: str) -> tuple[int, str, int] | None:
    """``"16777216 MB"`` → ``(16777216, "MB", bytes_per_unit)``; ``None`` if not ``N UNIT`` or unit unknown."""
    m = _QUANTITY_RE.fullmatch(value)
    if not m or m[2].lower() not in UNIT_BYTES:
        return None
    return int(m[1]), m[2], UNIT_BYTES[m[2].lower()]
