"""K-quant and modern IQ GGUFs: the evidence keeps their byte lengths unknown, and beside it ``convert
inspect`` states the sizes under modern ggml, labelled as an interpretation, and whether they tile the
data section (docs/inspect.md §Interpretation under modern ggml). Fixtures are written with gguf-py's
GGUFWriter (random block bytes of the modern sizes)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.constants import GGMLQuantizationType as T

from converters.cli import main
from converters.inspect import inspect_model_artifact
from converters.inspect.evidence import canonical
from converters.inspect.modern_sizes import interpret

TENSORS = [("a.weight", T.Q4_K, (8, 512)), ("b.weight", T.IQ4_XS, (4, 256)), ("c.weight", T.F32, (3, 5)),
           ("d.weight", T.Q6_K, (2, 256))]


def modern_bytes(t, shape) -> int:
    block, size = GGML_QUANT_SIZES[t]
    return shape[0] * shape[1] // block * size


@pytest.fixture
def kquant(tmp_path):
    path = tmp_path / "kq.gguf"
    w = GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(0)
    for name, t, shape in TENSORS:
        if t == T.F32:
            w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
        else:
            data = rng.integers(0, 255, size=(shape[0], modern_bytes(t, shape) // shape[0]), dtype=np.uint8)
            w.add_tensor(name, data, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_evidence_stays_unknown_and_the_interpretation_tiles(kquant, capsys):
    rec = inspect_model_artifact(kquant)
    assert [t["byte_length"] for t in rec["tensors"]] == [None, None, 60, None]  # the evidence: unknown
    it = interpret(rec)
    assert it["label"].startswith("interpretation, not evidence")
    sizes = {e["type"]: e["bytes"] for e in it["interpreted_types"]}
    assert sizes == {t.name: modern_bytes(t, s) for _, t, s in TENSORS if t != T.F32}
    assert it["total_bytes"] == 60 + sum(sizes.values()) and it["tiles_data_section"] is True
    assert main(["inspect", str(kquant)]) == 0
    out = capsys.readouterr().out
    assert "INTERPRETATION (not evidence)" in out and "tiles the data section exactly" in out


def test_json_carries_the_interpretation_in_its_own_block(kquant, capsys):
    assert main(["inspect", str(kquant), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the evidence rows are unchanged: byte lengths the file cannot decide stay unknown
    assert [t["byte_length"] for t in doc["tensors"]] == [None, None, 60, None]
    assert doc["totals"]["bytes"] is None and doc["totals"]["tensors_with_unknown_bytes"] == 3
    block = doc["interpretations"]["modern_ggml"]
    assert block["evidence"] is False and block["label"].startswith("interpretation, not evidence")
    assert block["tiles_data_section"] is True
    assert {e["type"]: e["bytes"] for e in block["interpreted_types"]} == {
        t.name: modern_bytes(t, s) for _, t, s in TENSORS if t != T.F32}
    # the block is part of the sealed record: its evidence_id still checks
    assert doc["evidence_id"] == "sha256:" + hashlib.sha256(canonical(doc)).hexdigest()


def test_trailing_bytes_do_not_tile(kquant):
    with kquant.open("ab") as f:
        f.write(b"\0" * 64)
    it = interpret(inspect_model_artifact(kquant))
    assert it["tiles_data_section"] is False and it["first_mismatch"]["tensor"] == "d.weight"


def test_nothing_to_interpret_when_every_length_is_known(tmp_path):
    path = tmp_path / "f.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_tensor("x", np.zeros((2, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rec = inspect_model_artifact(path)
    assert interpret(rec) is None and "interpretations" not in rec
