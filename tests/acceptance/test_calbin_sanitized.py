"""The shareable calbin report leaks no vaddr, no command address and no absolute path (docs/calbin.md §5.3, §11).

The fixture records every address it wrote (parameter map, reservations, I/O buffers, op YAML, command
src/dst); the sanitized JSON text is scanned for each of them in decimal and hex spellings.
"""

from __future__ import annotations

import json
import re

import pytest

from converters.acceptance.calbin import validate_calbin
from tinymodels.calbin import CalbinSpec, write_calbin_package


def _spellings(addr: int) -> list[str]:
    return [str(addr), f"{addr:x}", f"{addr:X}", f"0x{addr:x}"]


@pytest.mark.parametrize("quirks", [False, True])
def test_sanitized_report_has_no_addresses_or_absolute_paths(tmp_path, quirks):
    fx = write_calbin_package(tmp_path, CalbinSpec(vendor_quirks=quirks))
    # Defects whose evidence or detail carries addresses or absolute paths in the internal report.
    meta = fx.submodel_dir("decode") / "submodel_memory_reserved_info.txt"
    meta.write_text(re.sub(r"(obuf logits .* vaddr) (\S+) \S+", r"\1 \2 \2", meta.read_text()))
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    (fx.root / "link.txt").symlink_to(outside)
    runtime = fx.root / "model_memory_reserved_info.txt"
    runtime.write_text(runtime.read_text().replace("param_blk0.bin offset 0x5000 vaddr 0x420001000",
                                                   "param_blk0.bin offset 0x5000 vaddr 0x10000"))
    fx.vaddrs.add(0x10000)
    report = validate_calbin(fx.root)
    internal = json.dumps(report.to_json())
    shared_doc = report.to_json(sanitized=True)
    shared = json.dumps(shared_doc)

    assert fx.vaddrs and fx.command_addrs
    assert any(s in internal for a in fx.vaddrs for s in _spellings(a)), "internal report keeps addresses"
    assert str(tmp_path) in internal and fx.onnx_path in internal
    for addr in sorted(fx.vaddrs | fx.command_addrs):
        for s in _spellings(addr):
            assert not re.search(rf"(?<![0-9a-fA-F]){re.escape(s)}(?![0-9a-fA-F])", shared), (hex(addr), s)
    keys, strings = [], []

    def walk(o):
        if isinstance(o, dict):
            keys.extend(o)
            strings.extend(o)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, str):
            strings.append(o)

    walk(shared_doc)
    for s in strings:
        assert not re.search(r"(^|[\s'\"(,=])(/|~/|[A-Za-z]:\\)[^\s]", s), s
    for k in keys:
        assert not re.search(r"(^|_)v?addrs?(_|$)", re.sub(r"(?<=[a-z])(?=[A-Z])", "_", k).lower()), k
    assert str(tmp_path) not in shared and "/vendor/export" not in shared
    # Every finding, code, gate and the verdict survive.
    assert [(f["code"], f["severity"], f["gate"]) for f in shared_doc["findings"]] == \
        [(f.code, f.severity, f.gate) for f in sorted(report.findings, key=lambda f: (-f.rank, f.gate, f.code,
                                                                                      f.file or "", f.line or 0,
                                                                                      f.path or ""))]
    assert shared_doc["verdict"] == report.verdict == "fail"
    assert shared_doc["supply_chain"]["model_paths"][fx.submodel_dir("prefill").name] == "model.onnx"
    assert "vaddr" not in shared_doc["memory"]["reservations"]["dram"]
    cmd = shared_doc["submodels"][0]["commands"]["pld_chip0_ping.txt"]
    assert cmd == {"commands": 6, "types": {"CMD_PLD_D2D": 4, "CMD_SYNC": 2}, "with_data_size": 4,
                   "data_size_bytes": 3072}
