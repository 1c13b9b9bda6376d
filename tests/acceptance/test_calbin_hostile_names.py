"""Declared file names the file system cannot hold are findings, never an ``OSError``: a component longer
than 255 bytes, an embedded NUL, a path of many long components (docs/calbin.md)."""

from __future__ import annotations

import json

import pytest

from converters.acceptance.calbin import validate_calbin
from converters.cli import main as cli_main
from tinymodels.calbin import write_calbin_package

NAMES = {"long_component": "p" * 300 + ".bin", "nul": "pld\x00chip0_ping.bin",
         "long_path": "/".join(["d" * 250] * 20) + "/x.bin"}


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_unusable_declared_name_is_a_finding(tmp_path, capsys, kind):
    fx = write_calbin_package(tmp_path)
    meta = fx.submodel_dir("prefill") / "submodel_memory_reserved_info.txt"
    text = meta.read_text()
    assert "pld_chip0_ping.bin chip" in text
    meta.write_text(text.replace("pld_chip0_ping.bin chip", f"{NAMES[kind]} chip", 1))
    report = validate_calbin(fx.root)
    missing = [f for f in report.findings if f.code == "XREF_FILE_MISSING"]
    assert missing and all(f.severity == "ERROR" for f in missing)
    if kind == "long_component":
        assert any("255-byte file-name limit" in f.evidence for f in missing)
    assert cli_main(["validate", str(fx.root), "--json"]) == 1
    assert "XREF_FILE_MISSING" in {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert cli_main(["inspect", str(fx.root), "--json"]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err
