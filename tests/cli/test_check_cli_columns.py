"""``convert check``'s CHECK 2 table: ``bytes_equal`` proves byte-for-byte targets, ``codes_equal`` ternary
sources in ``t2_g128_fp16`` (trits and bits cannot be reassembled byte for byte). Each column shows its own
proof, ``-`` where the other one applies, and a failed code proof names what differs."""

from __future__ import annotations

import json

import pytest

from converters.acceptance.check import run_check
from converters.cli import main
from converters.cli.check import print_check
from converters.cli.output import console
from tinymodels import bonsai, qwen35

COLUMNS = ["tensor", "type", "target", "bytes_equal", "codes_equal", "decode_equal", "probe", "verdict"]


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    d = tmp_path_factory.mktemp("check-cli")
    return {"ptq": bonsai.write_gguf(d / "ptq.gguf", bonsai.config(linear_value_head_dim=128), ternary_type="PTQ1_0"),
            "q8": qwen35.write_gguf(d / "q8.gguf", qwen35.config(), matrix_type="Q8_0")}


def table_rows(out: str) -> dict[str, list[str]]:
    """CHECK 2 rows of a printed report, tensor → cells (the rich table's ``│``-separated columns)."""
    section = out.split("CHECK 2", 1)[1].split("CHECK 3", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == len(COLUMNS) and "│" in line:
            rows[cells[0]] = cells
    return rows


def printed(r: dict, capsys, monkeypatch) -> dict[str, list[str]]:
    monkeypatch.setattr(console, "width", 400)  # one line per row
    print_check(r)
    out = capsys.readouterr().out
    header = next(line for line in out.split("CHECK 2", 1)[1].splitlines() if "bytes_equal" in line and "┃" in line)
    assert [c.strip() for c in header.strip().strip("┃").split("┃")] == COLUMNS
    return table_rows(out)


def test_ternary_rows_show_codes_equal_and_byte_rows_bytes_equal(ggufs, capsys, monkeypatch):
    r = run_check(ggufs["ptq"], recipe="ternary")
    rows = printed(r, capsys, monkeypatch)
    t2 = [s for s in r["check2"]["samples"] if s["target"] == "t2_g128_fp16"]
    assert t2 and all(s["codes_equal"] is True and s["bytes_equal"] is None for s in t2)
    for s in t2:
        cells = dict(zip(COLUMNS, rows[s["tensor"]], strict=True))
        assert (cells["bytes_equal"], cells["codes_equal"], cells["decode_equal"]) == ("-", "yes", "yes"), cells
    r = run_check(ggufs["q8"])
    rows = printed(r, capsys, monkeypatch)
    q8 = [s for s in r["check2"]["samples"] if s["type"] == "Q8_0"]
    assert q8
    for s in q8:
        cells = dict(zip(COLUMNS, rows[s["tensor"]], strict=True))
        assert (cells["bytes_equal"], cells["codes_equal"]) == ("yes", "-"), cells


def test_a_failed_code_proof_names_what_differs(ggufs, capsys, monkeypatch):
    r = run_check(ggufs["ptq"], recipe="ternary")
    s = next(s for s in r["check2"]["samples"] if s["target"] == "t2_g128_fp16")
    s.update(codes_equal=False, codes_differ=["codes", "multipliers"], verdict="FAILED")
    cells = dict(zip(COLUMNS, printed(r, capsys, monkeypatch)[s["tensor"]], strict=True))
    assert cells["codes_equal"] == "NO (codes, multipliers)" and cells["bytes_equal"] == "-"


def test_cli_json_keeps_both_proofs(ggufs, capsys):
    assert main(["check", "--gguf", str(ggufs["ptq"]), "--recipe", "ternary", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    t2 = [s for s in doc["check2"]["samples"] if s["target"] == "t2_g128_fp16"]
    assert t2 and all(s["codes_equal"] is True and s["codes_differ"] == [] for s in t2)
