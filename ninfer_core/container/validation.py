"""``validate(path)``: every finding about an artifact, not only the first (container spec §11).

Runs the same checks as :func:`~ninfer_core.open_artifact` and goes on where the reader stops or stays
lazy: every continuation part is opened and checked (§3.2), the alignment zones are checked for the
zeros the writer puts there (a WARNING: §3.1/§3.2 ask the writer, not the reader), every object is
interpreted (§11.1: known encoding, allowed shape, encoded size) and every tensor's bytes go through
the codec's validity check (invalid codes, non-finite scales, non-zero padding). Objects stored in a
part that cannot be read are reported once, through that part.
"""

from __future__ import annotations

import os

import numpy as np

from ninfer_core.container.auxiliaries import auxiliary_findings
from ninfer_core.container.encoding import check_object_encoding, codec_findings
from ninfer_core.container.entry import load_entry
from ninfer_core.container.framing import HEADER_BYTES, PART_PAYLOAD_START
from ninfer_core.container.payload import PayloadFiles, pread_exact
from ninfer_core.container.problems import Problems, to_finding
from ninfer_core.container.records import TensorObject
from ninfer_core.errors import FramingError, NinferError
from ninfer_core.findings import Finding


def validate(path: str | os.PathLike) -> list[Finding]:
    """Every finding about the artifact at ``path`` (ERROR and WARNING), in a stable order."""
    try:
        loaded = load_entry(path)
    except NinferError as exc:
        return [to_finding(exc)]
    try:
        problems = loaded.problems
        d = loaded.directory
        if d is None or any(e.rule == "entry_length" for e in problems.errors):
            return problems.findings()
        payload = PayloadFiles(d.files, loaded.header.artifact_id, loaded.fd)
        loaded.fd = -1
        try:
            return _validate_payload(loaded, payload, problems)
        finally:
            payload.close()
    finally:
        loaded.close()


def _validate_payload(loaded, payload: PayloadFiles, problems: Problems) -> list[Finding]:
    d = loaded.directory
    entry = d.files[0]
    _check_zero_zone(payload, 0, loaded.header.metadata_end, entry.payload_start, problems)
    bad_files = set()
    for error in payload.check_all():
        problems.extend(error)
        bad_files.add(error.file)
    for f in d.files[1:]:
        if str(f.location) not in bad_files:
            _check_zero_zone(payload, f.index, HEADER_BYTES, PART_PAYLOAD_START, problems)
    findings = problems.findings()
    for k, obj in enumerate(d.objects):
        if obj.end > payload.payload_bytes:
            continue  # reported as object_out_of_payload
        json_path = f"$.objects[{loaded.object_positions_list[k]}]"
        try:
            check_object_encoding(obj, json_path=json_path, file=str(loaded.path))
        except NinferError as exc:
            findings.append(to_finding(exc))
            continue
        if not isinstance(obj, TensorObject):
            continue
        segments = payload.segments(obj.offset, obj.bytes)
        if any(str(s.file.location) in bad_files for s in segments):
            continue
        try:
            data = payload.view(obj.offset, obj.bytes)
            findings.extend(codec_findings(obj, np.frombuffer(data, dtype=np.uint8), json_path=json_path,
                                           file=str(loaded.path)))
        except NinferError as exc:
            findings.append(to_finding(exc))
    findings += auxiliary_findings(d, lambda obj: _auxiliary_bytes(payload, obj, bad_files), file=str(loaded.path))
    return findings


def _auxiliary_bytes(payload: PayloadFiles, obj: TensorObject, bad_files: set) -> np.ndarray | None:
    """An auxiliary object's bytes; None when it lies outside the payload or in an unreadable part (both
    reported already)."""
    if obj.end > payload.payload_bytes or any(str(s.file.location) in bad_files
                                              for s in payload.segments(obj.offset, obj.bytes)):
        return None
    try:
        return np.frombuffer(payload.view(obj.offset, obj.bytes), dtype=np.uint8)
    except NinferError:
        return None


def _check_zero_zone(payload: PayloadFiles, index: int, start: int, end: int, problems: Problems) -> None:
    """The alignment zone ``[start, end)`` of file ``index`` should hold zeros (§3.1, §3.2)."""
    if end <= start:
        return
    handle = payload.opened(index)
    name = str(payload.files[index].location)
    buf = bytearray(end - start)
    pread_exact(handle.fd, memoryview(buf), start, file=name)
    if any(buf):
        first = next(i for i, b in enumerate(buf) if b) + start
        problems.warn(FramingError, f"alignment zone [{start}, {end}) is not all zero (first non-zero byte at "
                      f"{first}); the writer fills it with zeros", json_path=f"$.files[{index}]",
                      section="§3.1" if index == 0 else "§3.2", rule="alignment_zone_nonzero", file=name)
