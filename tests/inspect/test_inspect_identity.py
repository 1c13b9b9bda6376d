"""Identity, limits and typed errors of an inspection: replaced/modified targets, I/O failures,
Ctrl-C after the header, missing and non-regular paths, the header cap and the retained budget."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

from converters.errors import SourceError, SourceFormatError
from converters.inspect import InspectionCancelled, inspect_model_artifact
from converters.sources.fileio import SourceIOError
from tests.support.sources import RawGGUF


@pytest.fixture
def model(tmp_path):
    raw = RawGGUF().kv("general.architecture", V.STRING, "x").kv("x.n", V.UINT32, 3)
    raw.tensor("a", [1024], Q.F32, np.arange(1024, dtype="<f4").tobytes())
    raw.tensor("b", [256], Q.F32, np.ones(256, dtype="<f4").tobytes())
    return raw.write(tmp_path / "m.gguf")


def test_replacement_during_full_hash_gives_partial_evidence(model, tmp_path):
    other = tmp_path / "other.gguf"
    other.write_bytes(model.read_bytes())
    calls = []

    def progress(n):
        if not calls:
            os.replace(other, model)  # the selected path now names a different file
        calls.append(n)

    ev = inspect_model_artifact(model, hash="full", progress=progress, buffer_bytes=256)
    assert ev["status"] == "partial" and ev["artifact"]["identity"] == "changed"
    assert ev["error"]["code"] == "target_unavailable" and ev["error"]["category"] == "target_changed"
    assert ev["artifact"]["sha256"] is None and ev["body"] is None and ev["coverage"]["digest"] == "unknown"
    assert len(ev["tensors"]) == 2 and ev["metadata"][1]["value"] == 3  # verified header facts kept
    assert any("final file identity" in u for u in ev["unknowns"])


def test_modification_detected_in_header_mode(model):
    import converters.inspect.run as run

    orig = run.InspectedFile.verify

    def touch_then_verify(self):
        with open(self.path, "ab") as f:
            f.write(b"\0" * 32)
        return orig(self)

    run.InspectedFile.verify = touch_then_verify
    try:
        ev = inspect_model_artifact(model)
    finally:
        run.InspectedFile.verify = orig
    assert ev["status"] == "partial" and ev["artifact"]["identity"] == "changed"


def test_io_error_while_hashing_keeps_verified_facts(model, monkeypatch):
    import converters.inspect.hashing as hashing

    def eio(*a, **k):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(hashing.os, "preadv", eio)
    ev = inspect_model_artifact(model, hash="full")
    assert ev["status"] == "partial" and ev["error"]["code"] == "execution_failure"
    diag = ev["error"]["details"]["diagnostics"]
    assert diag["errno"] == errno.EIO and diag["path"] == str(model)
    assert [t["name"] for t in ev["tensors"]] == ["a", "b"] and ev["artifact"]["sha256"] is None


def test_ctrl_c_after_header_raises_with_partial_evidence(model):
    def interrupt(n):
        raise KeyboardInterrupt

    with pytest.raises(InspectionCancelled) as ei:
        inspect_model_artifact(model, hash="full", progress=interrupt, buffer_bytes=256)
    ev = ei.value.evidence
    assert isinstance(ei.value, KeyboardInterrupt)
    assert ev["status"] == "partial" and ev["error"]["code"] == "cancelled"
    assert ev["coverage"]["digest"] == "unknown" and ev["artifact"]["identity"] == "unverified"
    assert ev["coverage"]["header"] == "complete" and len(ev["tensors"]) == 2


def test_emfile_on_open_is_execution_failure(model, monkeypatch):
    import converters.sources.fileio as fileio

    real = os.open

    def emfile(path, *a, **k):
        if str(path) == str(model):
            raise OSError(errno.EMFILE, "Too many open files")
        return real(path, *a, **k)

    monkeypatch.setattr(fileio.os, "open", emfile)
    with pytest.raises(SourceIOError) as ei:
        inspect_model_artifact(model)
    d = ei.value.to_dict()
    assert d["code"] == "execution_failure" and d["details"]["diagnostics"]["errno_name"] == "EMFILE"


def test_missing_and_non_regular_targets(tmp_path):
    with pytest.raises(SourceError) as ei:
        inspect_model_artifact(tmp_path / "nope.gguf")
    assert (ei.value.code, ei.value.category) == ("target_unavailable", "missing")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SourceError) as ei:
        inspect_model_artifact(fifo)
    assert (ei.value.code, ei.value.category) == ("target_unavailable", "not_regular")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(SourceError) as ei:
        inspect_model_artifact(tmp_path / "empty")
    assert ei.value.category == "unsupported_target"


def test_retained_budget_is_a_typed_rejection(tmp_path, monkeypatch):
    import converters.sources.limits as limits

    raw = RawGGUF().kv("general.architecture", V.STRING, "x")
    for i in range(40):
        raw.tensor(f"t{i}", [1], Q.F32, b"\0" * 4)
    path = raw.write(tmp_path / "many.gguf")
    monkeypatch.setattr(limits, "RETAINED_BUDGET", 40 * limits.ROW_COST)
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(path)
    assert ei.value.rule == "retained_budget" and ei.value.category == "limit_exceeded"


def test_string_preview_charged_before_expansion(tmp_path, monkeypatch):
    import converters.sources.limits as limits

    raw = RawGGUF().kv("general.architecture", V.STRING, "x").kv("x.big", V.STRING, "y" * 20000)
    path = raw.write(tmp_path / "s.gguf")
    monkeypatch.setattr(limits, "RETAINED_BUDGET", 10000)
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(path)
    assert ei.value.rule == "retained_budget" and "x.big" in str(ei.value)


def test_header_cap_on_declared_sizes(tmp_path):
    import struct

    raw = RawGGUF().kv("general.architecture", V.STRING, "x")
    raw.kv_raw(raw.string("x.arr") + struct.pack("<IIQ", V.ARRAY, V.UINT64, 20_000_000))
    with pytest.raises(SourceFormatError) as ei:
        inspect_model_artifact(raw.write(tmp_path / "cap.gguf"))
    assert ei.value.rule == "header_cap"


def test_continuation_part_is_not_an_entry(tmp_path):
    (tmp_path / "x.part-0001").write_bytes(b"NINPRT\x00\x03" + b"\0" * 24)
    with pytest.raises(SourceError, match="continuation part"):
        inspect_model_artifact(tmp_path / "x.part-0001")
