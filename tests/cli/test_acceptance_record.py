"""Truth on interruption and failure (docs/acceptance.md §Acceptance record, docs/cli.md §Build then accept):
a conversion whose acceptance is interrupted (a real SIGINT or SIGTERM to the process) or fails ends with
what is on disk and how to finish; the record beside the artifact says "not accepted" to ``inspect`` and
``verify``, and ``convert verify --source`` finishes the acceptance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converters.acceptance import record
from tests.support.cli import run
from tinymodels import qwen35

ROOT = Path(__file__).resolve().parents[2]
#: runs ``convert`` with the verify gates paused: they signal ``READY`` (a file) and then wait, so the test
#: can interrupt the process while it is inside the acceptance, deterministically
PAUSED = """
import sys, time
from pathlib import Path
import converters.acceptance.gates.verify as v
def paused(*args, **kwargs):
    Path(sys.argv[1]).write_text("accepting")
    time.sleep(120)
v.run_gates = paused
from converters.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("record") / "m.gguf"
    qwen35.write_gguf(path, qwen35.config(), matrix_type="Q8_0")
    return path


def interrupted(tmp_path, gguf, sig, *extra) -> tuple[int, str, str, Path]:
    """Convert in a subprocess, send ``sig`` once its acceptance has started, and return what it said."""
    ready, out = tmp_path / "ready", tmp_path / "m.ninfer"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", PAUSED, str(ready), "gguf2ninfer", str(gguf), str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the acceptance never started"
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    return proc.returncode, stdout, stderr, out


@pytest.mark.parametrize("sig, name", [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_interrupted_acceptance_says_what_is_on_disk(gguf, tmp_path, capsys, sig, name):
    rc, _stdout, stderr, out = interrupted(tmp_path, gguf, sig)
    assert rc == 130
    last = stderr.strip().splitlines()[-1]
    assert last == (f"interrupted ({name}) during acceptance: {out} written, NOT accepted (acceptance interrupted "
                    f"({name})); finish with: convert verify {out} --source {gguf}")
    assert "nothing was published" not in stderr
    assert out.is_file()  # the artifact is complete and stays; the record marks it
    rec = json.loads(record.record_path(out).read_text())
    assert rec["state"] == "interrupted" and rec["accepted"] is False and rec["verdict"] is None
    # anyone opening it later is told
    rc, stdout, _ = run(capsys, "inspect", out)
    assert rc == 0 and f"{out} written, NOT accepted (acceptance interrupted" in stdout
    rc, stdout, _ = run(capsys, "inspect", out, "--json")
    doc = json.loads(stdout)
    assert doc["acceptance"]["state"] == "interrupted" and doc["acceptance"]["accepted"] is False
    rc, stdout, _ = run(capsys, "verify", out)  # no source: reads the record
    assert rc == 0 and stdout.strip().splitlines()[-1].startswith(f"{out} written, NOT accepted")
    # the printed command finishes the acceptance
    rc, stdout, _ = run(capsys, "verify", out, "--source", gguf)
    assert rc == 0 and stdout.strip().splitlines()[-1] == f"{out} written, accepted (PASS, convert verify)"
    assert record.read(out, json.loads(record.record_path(out).read_text())["artifact_id"])["accepted"] is True


def test_interrupt_with_json_is_one_error_document_naming_the_artifact(gguf, tmp_path):
    rc, stdout, _stderr, out = interrupted(tmp_path, gguf, signal.SIGINT, "--json")
    doc = json.loads(stdout)
    assert rc == 130 and doc["error"]["code"] == "interrupted" and doc["error"]["file"] == str(out)
    assert "NOT accepted" in doc["error"]["message"]


def test_failed_acceptance_is_recorded_and_ends_with_what_is_on_disk(gguf, tmp_path, capsys, monkeypatch):
    from converters.acceptance.gates import tolerance

    impossible = tolerance.Tolerance(cosine=1.5, max_rel=0.0, row_rel=0.0)
    monkeypatch.setattr(tolerance, "loosest", lambda formats: impossible)
    out = tmp_path / "f.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, out)
    assert rc == 1 and out.is_file()
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("ACCEPT: FAIL") and last.endswith(
        f": {out} written, NOT accepted; full report: convert verify {out} --source {gguf} --sweep")
    rec = json.loads(record.record_path(out).read_text())
    assert rec["state"] == "judged" and rec["verdict"] == "fail" and rec["accepted"] is False
    assert {g["gate"]: g["status"] for g in rec["gates"]}[4] == "fail"
    rc, stdout, _ = run(capsys, "inspect", out)
    assert f"{out} written, NOT accepted (acceptance FAIL)" in stdout


def test_an_error_during_acceptance_is_recorded(gguf, tmp_path, capsys, monkeypatch):
    import converters.acceptance.gates.verify as v
    from converters.errors import ConverterError

    def broken(*args, **kwargs):
        raise ConverterError("the gates broke", rule="test")

    monkeypatch.setattr(v, "run_gates", broken)
    out = tmp_path / "e.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", gguf, out)
    lines = err.strip().splitlines()
    assert rc == 1 and "the gates broke" in lines[-2]
    assert lines[-1].startswith(f"{out} written, NOT accepted (acceptance stopped by an error (")
    assert json.loads(record.record_path(out).read_text())["state"] == "error"


def test_a_record_of_another_artifact_or_none_is_not_an_acceptance(gguf, tmp_path, capsys):
    a, b = tmp_path / "a.ninfer", tmp_path / "b.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, a)[0] == 0
    assert run(capsys, "gguf2ninfer", gguf, b, "--no-verify")[0] == 0
    rc, stdout, _ = run(capsys, "verify", b)
    assert stdout.strip().splitlines()[-1].startswith(f"{b} written, NOT accepted (no acceptance record")
    record.record_path(b).write_bytes(record.record_path(a).read_bytes())  # a's record beside b
    rc, stdout, _ = run(capsys, "inspect", b, "--json")
    assert json.loads(stdout)["acceptance"]["state"] == "stale"
    record.record_path(b).write_text("{not json")
    rc, stdout, _ = run(capsys, "inspect", b, "--json")
    assert json.loads(stdout)["acceptance"]["state"] == "unreadable"


def test_an_interrupt_after_writing_never_claims_nothing_was_published(gguf, tmp_path, capsys, monkeypatch):
    import converters.cli.convert as cli_convert

    def interrupted_summary(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_convert, "render_outcome", interrupted_summary)
    out = tmp_path / "n.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", gguf, out, "--no-verify")
    assert rc == 130 and out.is_file()
    assert err.strip().splitlines()[-1].startswith(
        f"interrupted (Ctrl-C) after writing: {out} written, NOT accepted (no acceptance record")
    assert "nothing was published" not in err
