"""An artifact that is only an n-gram table (component ``ngram``, no ``text``; container §4.2) passes
``convert validate``; its ``hot_profile`` must reference a resource object within the payload (§9.1)."""

from __future__ import annotations

import json

import pytest

from converters.cli import main as cli_main
from tests.support.container import entry_file

TABLE, HOT = 4096, 64


def ngram_root(hot: str = "r.hot", hot_offset: int = TABLE, hot_kind: str = "resource") -> dict:
    hot_obj = {"id": "r.hot", "kind": "resource", "encoding": "raw_bytes_v1", "offset": hot_offset, "bytes": HOT} \
        if hot_kind == "resource" else \
        {"id": "r.hot", "kind": "tensor", "shape": [16], "format": "fp32", "layout": "contiguous_le_v1",
         "offset": hot_offset, "bytes": HOT}
    return {"components": {"ngram": {"config": {"architectures": ["NgramTable"]},
                                     "resources": {"table": "r.table", "hot_profile": hot}}},
            "objects": [{"id": "r.table", "kind": "resource", "encoding": "raw_bytes_v1", "offset": 0, "bytes": TABLE},
                        hot_obj],
            "bindings": {}, "uses": [], "files": [{"path": None, "payload_bytes": TABLE + HOT}],
            "provenance": {"tool": "test"}}


def run(tmp_path, capsys, root) -> dict:
    path = tmp_path / "ng.ninfer"
    path.write_bytes(entry_file(root, b"\x01" * TABLE + b"NFNGHOT1" + bytes(HOT - 8)))
    cli_main(["validate", str(path), "--json"])
    return json.loads(capsys.readouterr().out)


def test_ngram_only_artifact_passes(tmp_path, capsys):
    doc = run(tmp_path, capsys, ngram_root())
    assert doc["verdict"] in ("pass", "pass_with_warnings")
    assert not [f for f in doc["findings"] if f["severity"] == "ERROR"]
    assert "NINFER_CONFIG_INVALID" not in {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize(("root", "code"), [
    (ngram_root(hot="r.none"), "NINFER_REFERENCE"),
    (ngram_root(hot_kind="tensor"), "NINFER_REFERENCE"),
    (ngram_root(hot_offset=TABLE + 32), "NINFER_OBJECT_RANGE"),
])
def test_hot_profile_reference_and_range(tmp_path, capsys, root, code):
    doc = run(tmp_path, capsys, root)
    assert doc["verdict"] == "fail"
    assert code in {f["code"] for f in doc["findings"] if f["severity"] == "ERROR"}


def test_no_text_and_no_ngram_still_fails(tmp_path, capsys):
    root = ngram_root()
    root["components"] = {"vision": root["components"]["ngram"]}
    doc = run(tmp_path, capsys, root)
    assert "NINFER_CONFIG_INVALID" in {f["code"] for f in doc["findings"]}
