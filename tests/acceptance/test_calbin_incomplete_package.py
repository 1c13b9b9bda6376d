"""A calbin package without its root manifest or its runtime metadata is still detected as a calbin
package by its directory shape, and reported with the calbin report (``FS_REQUIRED_MISSING`` naming the
file), not with the ``.ninfer`` schema or as a checkpoint directory (docs/calbin.md)."""

from __future__ import annotations

import json

import pytest

from converters.cli import main as cli_main
from converters.sources.kind import detect_kind
from tests.support.hf import make_sharded
from tinymodels.calbin import write_calbin_package


@pytest.mark.parametrize("missing", ["manifest", "model_memory_reserved_info.txt"])
def test_incomplete_package_gets_the_calbin_report(tmp_path, capsys, missing):
    fx = write_calbin_package(tmp_path)
    name = f"{fx.spec.model_name}.yaml" if missing == "manifest" else missing
    (fx.root / name).unlink()
    assert detect_kind(fx.root) == "calbin"
    assert cli_main(["validate", str(fx.root), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    required = [f for f in doc["findings"] if f["code"] == "FS_REQUIRED_MISSING"]
    assert required and not [f for f in doc["findings"] if f["code"].startswith("NINFER_")]
    expected_file = "<model>.yaml" if missing == "manifest" else missing
    assert expected_file in {f.get("file") for f in required}


def test_checkpoint_directory_is_not_a_package(tmp_path):
    make_sharded(tmp_path / "hf")
    (tmp_path / "hf" / "model_memory_reserved_info.txt").write_text("n_batch 1\n")
    assert detect_kind(tmp_path / "hf") == "hf"
    (tmp_path / "empty").mkdir()
    assert detect_kind(tmp_path / "empty") == "hf"
