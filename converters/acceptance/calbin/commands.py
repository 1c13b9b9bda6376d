"""Runtime command text files (docs/calbin.md §7.2): grammar and the static summary per file.

Grammar (docs/calbin.md names the fields; this is our reading of the layout): a comment line ``# <TYPE>``
describes the command type; the next line holds that command's fields as ``key=value`` tokens separated
by whitespace, values decimal or ``0x`` hex. Fields read: ``cmdId`` (required), ``chipMask0``/``1``/``2``
(bits 31..0, 63..32, 95..64; at least ``chipMask0``), ``srcAddr``, ``dstAddr``, ``dataSize``, and sync
register indices (any other key is kept in the count of fields only).

The summary is streamed (a 40k-context PLD file holds ~445k commands): count, per-type histogram, commands
with ``dataSize`` and their byte sum (a description of the maximum-context graph, not measured PCIe/D2D
traffic), address ranges (internal only), and a digest of the file with addresses removed, so ping and
pong can be compared ("identical modulo addresses" proves two command copies, not safe parallelism).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

from converters.acceptance.calbin.context import Ctx

_COMMENT_RE = re.compile(r"#\s*([A-Za-z_][\w\-]*)\s*")
_VALUE = r"(?:0[xX][0-9a-fA-F]{1,16}|\d{1,20})"
_TOKEN_RE = re.compile(rf"([A-Za-z_]\w*)=({_VALUE})")
_LINE_RE = re.compile(rf"[A-Za-z_]\w*={_VALUE}(?:[\s,]+[A-Za-z_]\w*={_VALUE})*")
_ADDRESS_TOKEN_RE = re.compile(rf"(?:srcAddr|dstAddr)={_VALUE}")
_INT_FIELDS = ("cmdId", "chipMask0", "chipMask1", "chipMask2", "dataSize", "srcAddr", "dstAddr")
MAX_LINE_BYTES = 64 << 10


@dataclass
class CommandText:
    file: str
    chip: int
    commands: int = 0
    types: Counter = field(default_factory=Counter)
    with_data_size: int = 0
    data_size_bytes: int = 0
    src_addr_range: list[int] | None = None
    dst_addr_range: list[int] | None = None
    digest_without_addrs: str = ""
    chip_mask_mismatches: int = 0

    def summary(self) -> dict:
        return {"commands": self.commands, "types": dict(sorted(self.types.items())),
                "with_data_size": self.with_data_size, "data_size_bytes": self.data_size_bytes,
                "src_addr_range": self.src_addr_range, "dst_addr_range": self.dst_addr_range}


def parse_command_text(ctx: Ctx, rel: str, chip: int) -> CommandText | None:
    """Parse one ``{cpu,pld}_chip<N>_{ping,pong}.txt``; grammar breaks are ``CMD_TEXT_GRAMMAR``."""
    out = CommandText(rel, chip)
    digest = hashlib.sha256()
    ids: set[int] = set()
    try:
        with ctx.path(rel).open("rb") as fh:
            pending_type = _scan(ctx, out, fh, digest, ids)
    except OSError as exc:
        ctx.emit("FS_UNREADABLE", f"cannot read: {exc.strerror or exc}", file=rel)
        return None
    if pending_type is not None:
        ctx.emit("CMD_TEXT_GRAMMAR", f"file ends after type {pending_type} without its field line", file=rel)
    if out.chip_mask_mismatches:
        ctx.emit("CMD_CHIP_MASK", f"{out.chip_mask_mismatches} command(s) whose chip mask excludes chip {chip} "
                 "named by the file", file=rel)
    out.digest_without_addrs = digest.hexdigest()
    return out


def _scan(ctx: Ctx, out: CommandText, fh, digest, ids: set[int]) -> str | None:
    """Stream the lines; returns the type of a trailing comment left without its field line."""
    rel = out.file
    pending_type: str | None = None
    for number, raw in enumerate(fh, start=1):
        if len(raw) > MAX_LINE_BYTES:
            ctx.emit("CMD_TEXT_GRAMMAR", f"line longer than {MAX_LINE_BYTES} bytes", file=rel, line=number)
            continue
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            continue
        if text.startswith("#"):
            m = _COMMENT_RE.fullmatch(text)
            if not m:
                ctx.emit("CMD_TEXT_GRAMMAR", "comment line is not '# <TYPE>'", file=rel, line=number)
                continue
            if pending_type is not None:
                ctx.emit("CMD_TEXT_GRAMMAR", f"type {pending_type} has no field line", file=rel, line=number)
            pending_type = m[1]
            continue
        if pending_type is None:
            ctx.emit("CMD_TEXT_GRAMMAR", "field line without a preceding '# <TYPE>' comment", file=rel,
                     line=number)
            continue
        fields = _fields(text)
        if fields is None or "cmdId" not in fields or "chipMask0" not in fields:
            ctx.emit("CMD_TEXT_GRAMMAR", "field line must be key=value tokens with cmdId and chipMask0",
                     file=rel, line=number)
            pending_type = None
            continue
        _account(ctx, out, pending_type, fields, number, ids)
        digest.update(f"{pending_type} {_ADDRESS_TOKEN_RE.sub('', text)}\n".encode())
        pending_type = None
    return pending_type


def _fields(text: str) -> dict[str, int] | None:
    """``key=value`` tokens (whitespace/comma separated, no key twice), with the summary's fields as ints."""
    if not _LINE_RE.fullmatch(text):
        return None
    pairs = _TOKEN_RE.findall(text)
    raw = dict(pairs)
    if len(raw) != len(pairs):
        return None
    return {k: int(raw[k], 16) if raw[k][:2] in ("0x", "0X") else int(raw[k]) for k in _INT_FIELDS if k in raw}


def _account(ctx: Ctx, out: CommandText, ctype: str, fields: dict[str, int], number: int, ids: set[int]) -> None:
    out.commands += 1
    out.types[ctype] += 1
    if fields["cmdId"] in ids:
        ctx.emit("CMD_TEXT_GRAMMAR", f"cmdId {fields['cmdId']} repeats", file=out.file, line=number)
    ids.add(fields["cmdId"])
    mask = (fields.get("chipMask2", 0) << 64) | (fields.get("chipMask1", 0) << 32) | fields["chipMask0"]
    if not mask >> out.chip & 1:
        out.chip_mask_mismatches += 1
    if "dataSize" in fields:
        out.with_data_size += 1
        out.data_size_bytes += fields["dataSize"]
    for key, attr in (("srcAddr", "src_addr_range"), ("dstAddr", "dst_addr_range")):
        if key in fields:
            rng = getattr(out, attr)
            v = fields[key]
            setattr(out, attr, [v, v] if rng is None else [min(rng[0], v), max(rng[1], v)])
