"""Acceptance shows progress and the summary its time (docs/acceptance.md §Progress): every gate starts and
ends in order, the gates with countable work report steps, the conversion's JSON and summary give acceptance
and total seconds, and ``verify`` and ``convert gguf2ninfer`` draw the gate bar on stderr."""

from __future__ import annotations

import json

import jsonschema
import pytest

from converters import ROOT
from converters.acceptance.accept import accept_written
from tests.cli.test_cli_contract import run
from tinymodels import qwen35


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("progress") / "m.gguf"
    qwen35.write_gguf(path, qwen35.config(), matrix_type="Q8_0")
    return path


class Recorder:
    def __init__(self):
        self.events = []

    def start(self, kind, label, title):
        self.events.append(("start", kind, label, title))

    def step(self, done, total):
        self.events.append(("step", done, total))

    def finish(self, label, status, seconds):
        self.events.append(("finish", label, status, seconds))


def test_every_gate_reports_start_steps_and_end(gguf, tmp_path, capsys):
    out = tmp_path / "m.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, out, "--no-verify")[0] == 0
    rec = Recorder()
    acceptance = accept_written(out, gguf, progress=rec)
    starts = [e[2] for e in rec.events if e[0] == "start"]
    ends = [e for e in rec.events if e[0] == "finish"]
    assert starts == [str(n) for n in range(1, 8)] and [e[1] for e in ends] == starts
    assert all(e[2] == "pass" and e[3] >= 0 for e in ends)
    steps_by_gate, gate = {}, None
    for e in rec.events:
        if e[0] == "start":
            gate = e[2]
        elif e[0] == "step":
            steps_by_gate.setdefault(gate, []).append(e[1:])
    assert steps_by_gate["4"][0][0] == 0 and len(steps_by_gate["4"]) == steps_by_gate["4"][0][1]  # one per parameter
    layers = len(qwen35.config()["layer_types"])
    assert steps_by_gate["7"][-1] == (2 * (layers + 1), 2 * (layers + 1))  # each forward: every layer, the head
    assert acceptance.seconds >= sum(g.seconds for g in acceptance.report.gates) * 0.99


def test_summary_gives_acceptance_and_total_seconds(gguf, tmp_path, capsys):
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "j.ninfer", "--json")
    doc = json.loads(stdout)
    assert rc == 0
    acc = doc["acceptance"]
    assert acc["seconds"] > 0 and all(g["seconds"] >= 0 for g in acc["gates"])
    assert doc["total_seconds"] == pytest.approx(doc["seconds"] + acc["seconds"], abs=2e-3)
    assert acc["golden_truncated"] is False and acc["golden_layers"].startswith("every layer")
    schema = json.loads((ROOT / "docs" / "schemas" / "convert.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)
    for field in ("total_seconds",):
        assert field in schema["properties"]
    assert {"seconds", "golden_layers", "golden_truncated"} <= set(schema["properties"]["acceptance"]["properties"])
    rc, stdout, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "h.ninfer")
    assert rc == 0 and "total seconds" in stdout and "acceptance seconds" in stdout
    assert "verify 7/7 golden_numerics" in err  # the gate bar, on stderr


def test_verify_draws_the_gate_bar_and_json_stays_clean(gguf, tmp_path, capsys):
    out = tmp_path / "v.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, out, "--no-verify")[0] == 0
    rc, _, err = run(capsys, "verify", out, "--source", gguf)
    assert rc == 0 and "verify 4/7 values" in err and "verify 7/7 golden_numerics" in err
    rc, stdout, err = run(capsys, "verify", out, "--source", gguf, "--json")
    assert rc == 0 and json.loads(stdout)["result"] == "pass" and "verify 4/7" not in err
