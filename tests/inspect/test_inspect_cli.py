"""``convert inspect``: JSON and table output, option conflicts, errors on stderr with exit codes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

from converters.cli import main
from tests.support.sources import RawGGUF


@pytest.fixture
def model(tmp_path):
    raw = RawGGUF().kv("general.architecture", V.STRING, "qwen3").kv("general.name", V.STRING, "tiny")
    raw.tensor("token_embd.weight", [8, 4], Q.F32, np.ones(32, dtype="<f4").tobytes())
    raw.tensor("blk.0.ffn_down.weight", [256, 1], Q.Q4_K, b"\0" * 144)
    return raw.write(tmp_path / "m.gguf")


def test_json_output_is_the_evidence(model, capsys):
    assert main(["inspect", str(model), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["format"] == "gguf" and [t["name"] for t in ev["tensors"]] == ["token_embd.weight",
                                                                          "blk.0.ffn_down.weight"]


def test_tables_without_json(model, capsys):
    assert main(["inspect", str(model)]) == 0
    out = capsys.readouterr().out
    for title in ("summary", "metadata", "tensors", "per-type totals"):
        assert title in out
    assert "Q4_K" in out and "F32" in out and "k_quant_block_unknown" in out and "unknown" in out


def test_summary_view_and_evidence_output(model, tmp_path, capsys):
    out_file = tmp_path / "ev.json"
    view = json.dumps({"collection": "tensors", "names": ["token_embd.weight"], "fields": ["type", "shape"]})
    code = main(["inspect", str(model), "--detail", "summary", "--evidence-output", str(out_file),
                 "--view", view, "--json"])
    assert code == 0
    s = json.loads(capsys.readouterr().out)
    assert s["page"]["rows"] == [{"index": 0, "type": "F32", "shape": ["8", "4"]}]
    bundle = json.loads(out_file.read_text())  # a bundle of one record (docs/inspect.md §Bundles)
    assert [r["evidence_id"] for r in bundle["records"]] == [s["parent_evidence_id"]]
    assert main(["inspect", str(out_file), "--detail", "summary", "--view", view]) == 0
    assert "token_embd.weight" not in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--view", '{"collection": "tensors"}'], ["--hash", "sha1"],
                                  ["--detail", "everything"], ["--detail", "summary", "--view", "{not json"]])
def test_usage_errors_exit_2(model, args, capsys):
    assert main(["inspect", str(model), *args]) == 2


def test_existing_evidence_output_refused_before_reading(model, tmp_path, capsys):
    out_file = tmp_path / "ev.json"
    out_file.write_text("keep")
    assert main(["inspect", str(model), "--evidence-output", str(out_file)]) == 2
    assert out_file.read_text() == "keep"


def test_rejected_file_is_one_line_on_stderr_exit_1(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x07\x00\x00\x00" + b"\0" * 16)
    assert main(["inspect", str(bad), "--json"]) == 1
    cap = capsys.readouterr()
    assert "unsupported GGUF version" in cap.err and "byte order unknown" in cap.err
    err = json.loads(cap.out)["error"]  # with --json, the error is also one document on stdout (docs/cli.md §Errors)
    assert err["code"] == "target_unavailable" and err["rule"] == "gguf_version"
    assert str(bad) in cap.err and len(cap.err.strip().splitlines()) == 1


def test_partial_evidence_printed_and_exit_1(model, monkeypatch, capsys):
    import errno

    import converters.inspect.hashing as hashing

    def eio(*a, **k):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(hashing.os, "preadv", eio)
    assert main(["inspect", str(model), "--hash", "full", "--json"]) == 1
    cap = capsys.readouterr()
    ev = json.loads(cap.out)
    assert ev["status"] == "partial" and "execution_failure" in cap.err


def test_ctrl_c_after_header_prints_partial_and_exits_130(model, monkeypatch, capsys):
    import converters.inspect.run as run

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "stream_sha256", interrupted)
    assert main(["inspect", str(model), "--hash", "full", "--json"]) == 130
    ev = json.loads(capsys.readouterr().out)
    assert ev["status"] == "partial" and ev["error"]["code"] == "cancelled"
