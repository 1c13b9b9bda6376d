"""Gate 4's shortcut for a ``gguf_<type>`` object holding the source tensor's own bytes (docs/acceptance.md
§Golden at scale): equal bytes are equal values and rows, so nothing is decoded; one changed byte, and the
parameter is decoded and compared as before, and the difference is found."""

from __future__ import annotations

import pytest

from converters.acceptance.gates import values
from converters.acceptance.gates.verify import verify
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tinymodels import qwen3

EMBEDDING = "text/token_embedding"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("same-bytes")
    qwen3.write_gguf(d / "q4.gguf", qwen3.config(), matrix_type="Q4_0")
    convert(d / "q4.gguf", d / "e.ninfer", recipe="exact", workers=1)
    return d


def decoded_names(monkeypatch) -> list[str]:
    """The parameters gate 4 decodes (gate 7 decodes what its forward needs, on its own)."""
    seen: list[str] = []
    side_by_side = values._side_by_side

    def spy(a, s, r0, r1):
        seen.append(a.name)
        return side_by_side(a, s, r0, r1)

    monkeypatch.setattr(values, "_side_by_side", spy)
    return seen


def gate4(report) -> dict:
    return next(g for g in report.to_json()["gates"] if g["gate"] == 4)


def test_equal_bytes_are_not_decoded_and_pass(made, monkeypatch):
    with open_artifact(made / "e.ninfer") as art:
        assert art.object(EMBEDDING).format == "gguf_q4_0"
    seen = decoded_names(monkeypatch)
    report = verify(made / "e.ninfer", made / "q4.gguf", sweep=True)
    assert report.verdict == "pass"
    assert EMBEDDING not in seen and not any(n.startswith("text/layers/0/mlp") for n in seen)
    row = next(r for r in gate4(report)["evidence"]["per_parameter"] if r["name"] == EMBEDDING)
    assert row["exactness"] == "bit-exact" and row["cosine"] == 1.0 and row["max_abs"] == 0.0


def test_one_changed_byte_is_decoded_and_found(made, tmp_path, monkeypatch):
    bad = tmp_path / "bad.ninfer"
    bad.write_bytes((made / "e.ninfer").read_bytes())
    with open_artifact(bad) as art:
        obj = art.object(EMBEDDING)
        at = art.files[0].payload_start + obj.offset + obj.bytes // 2  # a code byte of a middle block
    with open(bad, "r+b") as fh:
        fh.seek(at)
        b = fh.read(1)[0]
        fh.seek(at)
        fh.write(bytes([b ^ 0x11]))
    seen = decoded_names(monkeypatch)
    report = verify(bad, made / "q4.gguf", sweep=True)
    assert report.verdict == "fail" and EMBEDDING in seen
    codes = {(f["code"], f.get("path")) for f in gate4(report)["findings"]}
    assert ("VERIFY_VALUE_NOT_EXACT", EMBEDDING) in codes
