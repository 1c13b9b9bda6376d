"""Use auxiliaries the recipes and the exact path create (container §8): ``input_columns`` for GGML blocks
that cannot move whole, ``hadamard_signs`` for rotated matrices (storage-layouts §7), activation divisors."""

from __future__ import annotations

import numpy as np
import pytest

from converters.model.engine import expected_parameters, logical_array
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from tinymodels import qwen3, qwen35


def test_input_columns_keep_gguf_blocks_exact(tmp_path):
    # value heads of 16 columns: a Q8_0 block (32 columns) straddles two heads, so ssm_out's tiled columns
    # cannot be moved whole; the exact recipe keeps the blocks and binds input_columns instead
    cfg = qwen35.config(linear_value_head_dim=16)
    qwen35.write_gguf(tmp_path / "m.gguf", cfg, matrix_type="Q8_0")
    convert(tmp_path / "m.gguf", tmp_path / "exact.ninfer", recipe="exact")
    convert(tmp_path / "m.gguf", tmp_path / "int.ninfer", recipe="groupwise-int")
    want = dict(expected_parameters(tmp_path / "m.gguf", names=["text/layers/0/gdn/output"]))
    w = want["text/layers/0/gdn/output"]
    with open_artifact(tmp_path / "exact.ninfer") as art:
        assert art.object("text/layers/0/gdn/output").format == "gguf_q8_0"
        use = next(u for u in art.uses if u.parameter == "text/layers/0/gdn/output")
        cols = art.binding_array(use.auxiliaries["input_columns"]).astype(int)
        assert sorted(cols) == list(range(64)) and list(cols) != list(range(64))
        stored = art.binding_array("text/layers/0/gdn/output").reshape(w.shape)
        assert not np.array_equal(stored, w)  # stored in llama.cpp's tiled column order ...
        np.testing.assert_array_equal(logical_array(art, "text/layers/0/gdn/output"), w)  # ... and exact
        # every layer shares one permutation object
        aux = {u.auxiliaries["input_columns"].object for u in art.uses if "input_columns" in u.auxiliaries}
        assert aux == {"text/input_columns/0"}
        assert art.provenance["objects"]["text/layers/0/gdn/output"]["exactness"] == "bit-exact"
    assert not [f for f in validate(tmp_path / "exact.ninfer") if f.severity == "ERROR"]
    with open_artifact(tmp_path / "int.ninfer") as art:  # requantizing recipes permute the float columns
        assert not any("input_columns" in u.auxiliaries for u in art.uses)
        got = logical_array(art, "text/layers/0/gdn/output")
        assert np.corrcoef(got.reshape(-1), w.reshape(-1))[0, 1] > 0.99


RECIPE = """\
name: rotated
description: q8 MLP stored Hadamard-rotated; a constant activation divisor on the query
hadamard_seed: 3
roles:
  "*": {format: bf16}
  mlp.*: {format: q8_g32_fp16, hadamard: true}
  attention.output: {format: bf16, hadamard: true}
  attention.query: {format: bf16, activation_policy: AllowA8, activation_input_divisor: 2.5}
"""


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    d = tmp_path_factory.mktemp("hadamard")
    cfg = qwen3.config(num_hidden_layers=1, hidden_size=1024, intermediate_size=1024, vocab_size=384)
    qwen3.write_hf_dir(d / "hf", cfg)
    (d / "rotated.yaml").write_text(RECIPE)
    result = convert(d / "hf", d / "r.ninfer", recipe=d / "rotated.yaml")
    return cfg, d, result


def test_hadamard_rotated_objects(rotated):
    cfg, d, result = rotated
    ref = qwen3.logical_parameters(cfg)
    assert any("attention/output: not Hadamard-rotated (input width 128" in n for n in result.summary()["notes"])
    assert not [f for f in validate(d / "r.ninfer") if f.severity == "ERROR"]
    with open_artifact(d / "r.ninfer") as art:
        assert art.object("text/hadamard_signs").format == "bf16"
        assert list(art.object_array("text/hadamard_widths")) == [1024]
        signs = art.object_array("text/hadamard_signs")
        assert set(np.unique(signs)) == {-1.0, 1.0}
        use = next(u for u in art.uses if u.parameter == "text/layers/0/mlp/down")
        assert use.auxiliaries["hadamard_signs"].parts[0].object == "text/hadamard_signs"
        w = ref["text/layers/0/mlp/down"]
        stored = art.binding_array("text/layers/0/mlp/down").reshape(w.shape)
        x = np.random.default_rng(0).standard_normal(1024)
        i = np.arange(1024)
        parity = np.zeros((1024, 1024), dtype=np.int64)
        for bit in range(10):  # (-1)^popcount(i & j): the Sylvester matrix by its closed form
            parity += ((i[:, None] & i[None, :]) >> bit) & 1
        h = np.where(parity % 2, -1.0, 1.0) / 32.0
        y_rot = stored.astype(np.float64) @ (h @ (signs * x))  # what a consumer computes (§8)
        assert np.corrcoef(y_rot, w @ x)[0, 1] > 0.999
        assert abs(np.corrcoef(stored.reshape(-1), w.reshape(-1))[0, 1]) < 0.1  # the stored matrix is rotated
        got = logical_array(art, "text/layers/0/mlp/down", w.shape)
        assert np.corrcoef(got.reshape(-1), w.reshape(-1))[0, 1] > 0.999
        # provenance says which pieces were rotated, and for which input width
        assert art.provenance["objects"]["text/layers/0/mlp/down"]["pieces"][0]["hadamard_rotate"] == 1024


def test_activation_divisor_and_policy(rotated):
    _, d, _ = rotated
    with open_artifact(d / "r.ninfer") as art:
        use = next(u for u in art.uses if u.parameter == "text/layers/0/attention/query")
        assert use.activation_policy == "AllowA8"
        assert art.binding_array(use.auxiliaries["activation_input_divisor"]).tolist() == [2.5]
        other = next(u for u in art.uses if u.parameter == "text/layers/0/attention/key")
        assert other.activation_policy == "A16Only" and not other.auxiliaries
