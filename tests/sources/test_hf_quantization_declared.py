"""An HF directory is read through the prequantized readers only when it declares a quantization
(``config.json``'s ``quantization_config`` or ModelOpt's ``hf_quant_config.json``, docs/prequantized.md
§Detection): a plain checkpoint does not import them (a fixed cost of every conversion, docs/io-speed.md
§Fixed costs), a declaring one is still checked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from converters import ROOT
from converters.errors import SourceFormatError
from converters.sources import open_hf_dir
from tests.support.hf import make_sharded


def test_a_plain_checkpoint_declares_none_and_the_readers_are_not_imported(tmp_path):
    make_sharded(tmp_path / "m")
    with open_hf_dir(tmp_path / "m") as s:
        assert not s.declares_quantization() and s.quantization is None
    code = ("import sys; from converters.sources import open_hf_dir; s = open_hf_dir(sys.argv[1]); "
            "print(sorted(m for m in sys.modules if m.startswith('converters.sources.prequantized')))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m")], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("where", ["config", "side_file"])
def test_a_declared_quantization_is_read_and_checked(tmp_path, where):
    d = tmp_path / "m"
    make_sharded(d)
    if where == "config":
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**cfg, "quantization_config": {"quant_method": "awq"}}))
        rule = "prequantized_quant_method"
    else:
        (d / "hf_quant_config.json").write_text("[]")
        rule = "prequantized_config_type"
    with pytest.raises(SourceFormatError) as exc:
        open_hf_dir(d)
    assert exc.value.rule == rule
