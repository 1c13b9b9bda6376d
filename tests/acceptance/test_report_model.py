"""The shared validation report model: severities, gates, verdict, JSON shape, sanitization, rendering."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from converters.acceptance.report import (
    GATE_TITLES,
    SCHEMA_CALBIN,
    SCHEMA_NINFER,
    CodeSpec,
    CodeTable,
    Finding,
    Report,
    Severity,
    is_address_key,
    render,
    sanitize,
    scrub_text,
)
from converters.errors import ConverterError


def _report(*findings: Finding) -> Report:
    r = Report(SCHEMA_NINFER, {"name": "m.ninfer", "path": "/data/models/m.ninfer"})
    for f in findings:
        r.add(f)
    return r


@pytest.mark.parametrize(
    ("severities", "verdict"),
    [
        ((), "pass"),
        (("INFO", "INFO"), "pass"),
        (("WARNING_SERVICE",), "pass_with_warnings"),
        (("WARNING_FORMAT", "INFO"), "pass_with_warnings"),  # a .ninfer area warning
        (("BLOCKED_REPRODUCIBILITY",), "pass_with_warnings"),  # may run, may not be called reproducible
        (("BLOCKED_REPRODUCIBILITY", "ERROR", "INFO"), "fail"),
        (("ERROR",), "fail"),
    ],
)
def test_verdict_rule(severities, verdict):
    r = _report(*(Finding(s, f"CODE_{i}", "C", "e") for i, s in enumerate(severities)))
    assert r.verdict == verdict
    assert r.to_json()["verdict"] == verdict


def test_gate_status_follows_its_own_findings_and_checks():
    r = _report(Finding("ERROR", "X", "A", "bad"), Finding("WARNING_VENDOR", "Y", "B", "meh"),
                Finding("INFO", "Z", "D", "note"))
    r.gate("C").check("model_name")
    status = {g.name: g.status for g in r.gates}
    assert status == {"A": "fail", "B": "pass_with_warnings", "C": "pass", "D": "pass", "E": "not_run",
                      "F": "not_run"}
    assert [g["name"] for g in r.to_json()["gates"]] == list(GATE_TITLES)
    gate_b = r.to_json()["gates"][1]
    assert gate_b == {"name": "B", "title": "schema", "status": "pass_with_warnings", "checks": [],
                      "findings": {"WARNING_VENDOR": 1}}


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        (("WARNING", "X", "A", "e"), "severity_name"),  # bare WARNING has no area
        (("warning_vendor", "X", "A", "e"), "severity_name"),
        (("ERROR", "lower_case", "A", "e"), "code_form"),
        (("ERROR", "X", "G", "e"), "gate_name"),
    ],
)
def test_finding_rejects_bad_fields(args, rule):
    with pytest.raises(ConverterError) as exc:
        Finding(*args)
    assert exc.value.rule == rule


def test_severity_rank_order():
    names = ["INFO", "WARNING_VENDOR", "BLOCKED_REPRODUCIBILITY", "ERROR"]
    assert [Severity.rank(n) for n in names] == [0, 1, 2, 3]
    with pytest.raises(ConverterError):
        Severity.rank("FATAL")


def test_code_table_fixes_severity_and_gate_and_refuses_undocumented_codes():
    table = CodeTable([CodeSpec("META_SMODEL_TYPE", "WARNING_VENDOR", "B", "prefill labelled decode")])
    f = table.finding("META_SMODEL_TYPE", "prefill says llm_decode", file="a/b.txt", line=2)
    assert (f.severity, f.gate, f.file, f.line) == ("WARNING_VENDOR", "B", "a/b.txt", 2)
    with pytest.raises(ConverterError):
        table.finding("NOT_DOCUMENTED", "x")
    with pytest.raises(ConverterError):
        CodeTable([CodeSpec("A_B", "ERROR", "A", "x"), CodeSpec("A_B", "INFO", "A", "y")])


def test_json_shape_order_and_optional_fields():
    r = Report(SCHEMA_CALBIN, {"name": "pkg"})
    r.section("model")["batch"] = 1
    r.section("memory")["kv_bytes"] = 4026531840
    r.add(Finding("INFO", "NOTE", "D", "n"))
    r.add(Finding("ERROR", "BAD", "C", "b", path="model_info.batch_num", file="m.yaml", line=3))
    doc = r.to_json()
    assert list(doc) == ["schema", "package", "model", "memory", "gates", "findings", "verdict"]
    assert doc["schema"] == "calculet-package-validation/v1"
    assert doc["findings"][0] == {"severity": "ERROR", "code": "BAD", "gate": "C", "evidence": "b",
                                  "path": "model_info.batch_num", "file": "m.yaml", "line": 3}
    assert doc["findings"][1] == {"severity": "INFO", "code": "NOTE", "gate": "D", "evidence": "n"}
    json.dumps(doc)  # plain JSON types only
    with pytest.raises(ConverterError):
        r.section("verdict")
    with pytest.raises(ConverterError):
        Report("other/v1")


def test_sanitized_json_drops_addresses_and_absolute_paths_but_keeps_every_finding():
    r = _report(
        Finding("WARNING_VENDOR", "IO_PINGPONG_SAME_VADDR", "C", "ibuf x at 0x880005000 shares ping and pong",
                detail={"vaddr": 0x880005000, "count": 2}),
        Finding("ERROR", "FS_SYMLINK_ESCAPE", "A", "symlink resolves outside the package, to /etc/passwd",
                file="param_blk0.bin"),
        Finding("INFO", "NOTE", "F", r"tool at C:\vendor\bin\calcc.exe"),
    )
    r.section("submodels", [])
    r.sections["submodels"].append({"inputs": [{"name": "input_ids", "vaddr_ping": 1, "vaddr_pong": 2}],
                                    "commands": {"x.txt": {"srcAddr": 5, "dst_addr_range": [1, 2], "n": 3}}})
    r.section("supply_chain")["model_paths"] = {"prefill": "/vendor/export/q/model.onnx"}
    internal, shared = r.to_json(), r.to_json(sanitized=True)
    assert internal["submodels"][0]["inputs"][0]["vaddr_ping"] == 1
    text = json.dumps(shared)
    for leaked in ("vaddr", "Addr", "addr_range", "/etc/", "/vendor/", "/data/", "C:\\\\", "0x880005000"):
        assert leaked not in text, leaked
    assert shared["supply_chain"]["model_paths"]["prefill"] == "model.onnx"
    assert shared["package"]["path"] == "m.ninfer"
    assert shared["submodels"][0]["commands"]["x.txt"] == {"n": 3}
    assert [(f["code"], f["severity"]) for f in shared["findings"]] == [
        (f["code"], f["severity"]) for f in internal["findings"]]
    assert shared["verdict"] == internal["verdict"] == "fail"
    assert [g["status"] for g in shared["gates"]] == [g["status"] for g in internal["gates"]]


@pytest.mark.parametrize(
    ("key", "is_addr"),
    [("vaddr", True), ("vaddr_ping", True), ("src_addr", True), ("dstAddr", True), ("srcAddr", True),
     ("addr", True), ("dst_addr_range", True), ("line_text", True), ("address_union", False),
     ("kv_bytes", False), ("padding", False), ("chip_mask", False)],
)
def test_address_keys(key, is_addr):
    assert is_address_key(key) is is_addr


def test_scrub_text_keeps_ratios_and_relative_paths():
    assert scrub_text("KV bytes/chip for sub/dir/file.txt") == "KV bytes/chip for sub/dir/file.txt"
    assert scrub_text("see /abs/dir/file.onnx, and ~/x/y.bin") == "see file.onnx, and y.bin"
    assert scrub_text("at 0xDEADbeef") == "at 0x<redacted>"
    assert sanitize({"a": ["/x/y", 3, None, True]}) == {"a": ["y", 3, None, True]}


def test_render_shows_verdict_gates_and_findings():
    r = _report(Finding("BLOCKED_REPRODUCIBILITY", "SUPPLY_ONNX_MISSING", "E", "no ONNX delivered",
                        file="m.yaml", path="onnx_hash"))
    r.section("memory")["kv_bytes"] = 4026531840
    buf = io.StringIO()
    render(r, Console(file=buf, width=200, color_system=None), sanitized=True)
    out = buf.getvalue()
    assert "pass_with_warnings" in out
    assert "SUPPLY_ONNX_MISSING" in out and "m.yaml onnx_hash" in out
    assert "4,026,531,840 B (3.750 GiB)" in out
    assert "supply_chain" in out and "not_run" in out
