"""``--imatrix`` on the conversion commands (docs/imatrix.md): the JSON summary names the file, a bad file
is one typed error line, a staged conversion refuses the flag."""

from __future__ import annotations

import json

import jsonschema
import pytest

from converters import ROOT
from converters.cli import main
from converters.sources.gguf import open_gguf
from tests.support.imatrix_files import write_gguf_imatrix
from tinymodels import qwen3


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    import numpy as np

    d = tmp_path_factory.mktemp("imatrix-cli")
    qwen3.write_gguf(d / "m.gguf", qwen3.config(), matrix_type="F32")
    with open_gguf(d / "m.gguf") as src:
        entries = {n: np.ones(t.shape[-1], np.float32) * 2 for n, t in src.tensors.items() if len(t.shape) == 2}
    write_gguf_imatrix(d / "m.imatrix", entries)
    return d


def test_json_summary_carries_importance(inputs, tmp_path, capsys):
    rc = main(["gguf2ninfer", str(inputs / "m.gguf"), str(tmp_path / "o.ninfer"), "--imatrix",
               str(inputs / "m.imatrix"), "--json", "--no-verify"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    imp = doc["importance"]
    assert imp["file"] == "m.imatrix" and imp["objects_weighted"] > 0 and imp["missing"] == 0
    schema = json.loads((ROOT / "docs" / "schemas" / "convert.schema.json").read_text())
    jsonschema.validate(doc, schema)


def test_bad_file_is_one_typed_line(inputs, tmp_path, capsys):
    bad = tmp_path / "bad.imatrix"
    bad.write_bytes(b"GGUF\x03\x00")
    rc = main(["gguf2ninfer", str(inputs / "m.gguf"), str(tmp_path / "o.ninfer"), "--imatrix", str(bad)])
    err = capsys.readouterr().err
    assert rc != 0 and "bad.imatrix" in err and "Traceback" not in err
    assert not (tmp_path / "o.ninfer").exists()


def test_staged_conversion_refuses_the_flag(inputs, tmp_path, capsys):
    rc = main(["gguf2ninfer", str(inputs / "m.gguf"), str(tmp_path / "o.ninfer"), "--imatrix",
               str(inputs / "m.imatrix"), "--plan-only", str(tmp_path / "plan.json")])
    assert rc != 0 and "--imatrix" in capsys.readouterr().err
