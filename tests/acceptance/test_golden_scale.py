"""Gate 7 at scale (docs/acceptance.md §Golden at scale): the forward runs in float32 on the project's own
decoders; past ``FULL_FORWARD_ELEMENTS`` text parameters it runs a stated subset of layers (the first and last
``EDGE_LAYERS`` and the first of every kind), says so in its evidence and in the verdict line, and still
catches a structural error in a layer it runs; ``--sweep`` runs every layer."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance import golden
from converters.acceptance.accept import Acceptance
from converters.acceptance.gates import numerics
from converters.acceptance.gates.verify import verify
from tests.support.gates import CFG35, HEAD_DIM, converted, rewrite, swap_blocks, write_sources
from tinymodels import qwen35


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    d = tmp_path_factory.mktemp("scale")
    src = write_sources(d)
    clean = converted(src["q35_gguf"], d / "exact.ninfer", "exact")  # the cost budget of exactness sees any swap
    bad = rewrite(clean, d / "swap.ninfer", edit={"text/layers/3/attention/query": lambda x: swap_blocks(x, 0, 1, HEAD_DIM)})
    return src["q35_gguf"], clean, bad


def test_the_subset_is_the_edges_and_the_first_layer_of_each_kind():
    spec = golden.TextSpec.from_config(CFG35)
    shapes = golden.parameter_shapes(spec)
    assert numerics.golden_layers(spec, shapes, sweep=False) == (list(range(8)), False)  # tiny: every layer
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(numerics, "FULL_FORWARD_ELEMENTS", 0)
        assert numerics.golden_layers(spec, shapes, sweep=False) == ([0, 1, 3, 6, 7], True)
        assert numerics.golden_layers(spec, shapes, sweep=True) == (list(range(8)), False)
    assert numerics.describe_layers([0, 1, 3, 6, 7], 8) == "5 of 8 layers: 0-1, 3, 6-7"


def test_truncated_forward_runs_only_the_listed_layers():
    cfg = qwen35.config()
    params = qwen35.logical_parameters(cfg)
    tokens = [1, 7, 3]
    full = golden.forward(cfg, params, tokens)
    np.testing.assert_array_equal(golden.forward(cfg, params, tokens, layers=range(8)), full)
    broken = {**params, "text/layers/5/mlp/up": np.zeros_like(params["text/layers/5/mlp/up"])}
    subset = [0, 1, 3, 6, 7]
    # layer 5 is not run: what it holds does not matter; the layers that run do
    np.testing.assert_array_equal(golden.forward(cfg, broken, tokens, layers=subset),
                                  golden.forward(cfg, params, tokens, layers=subset))
    assert not np.array_equal(golden.forward(cfg, params, tokens, layers=subset), full)
    steps = []
    golden.forward(cfg, params, tokens, layers=subset, progress=steps.append)
    assert steps == [1, 2, 3, 4, 5, 6]
    with pytest.raises(Exception, match="outside"):
        golden.forward(cfg, params, tokens, layers=[8])


@pytest.mark.parametrize("model", ["qwen35", "qwen3_moe"])
def test_a_float32_forward_stays_in_float32(model, monkeypatch):
    """No step widens the hidden state to float64 (a float64 state would multiply every weight in float64:
    twice the memory and several times the time of the float32 forward)."""
    import importlib

    mod = importlib.import_module(f"tinymodels.{model}")
    cfg = mod.config()
    params = mod.logical_parameters(cfg)
    seen = []
    original = golden.rms_norm

    def spy(x, *a, **kw):
        seen.append(x.dtype)
        return original(x, *a, **kw)

    monkeypatch.setattr(golden, "rms_norm", spy)
    golden.forward(cfg, params, [1, 2, 3], dtype=np.float32)
    assert seen and set(seen) == {np.dtype(np.float32)}


def test_float32_forward_is_the_float64_one_to_float_rounding():
    cfg = qwen35.config()
    params = qwen35.logical_parameters(cfg)
    tokens = list(range(1, 17))
    m = golden.compare_logits(golden.forward(cfg, params, tokens), golden.forward(cfg, params, tokens, dtype=np.float32))
    assert m["top1_agreement"] == 1.0 and m["cosine"] > 1 - 1e-9


def test_a_large_model_runs_a_stated_subset_and_still_catches_a_swapped_head(arts, monkeypatch):
    source, clean, bad = arts
    monkeypatch.setattr(numerics, "FULL_FORWARD_ELEMENTS", 0)
    ok = verify(clean, source)
    ev = ok.gate(7).evidence
    assert ok.gate(7).status == "pass" and ev["truncated"] is True and ev["layers"] == [0, 1, 3, 6, 7]
    assert ev["dtype"] == "float32"
    line = Acceptance(clean, source, ok, sweep=False).lines()[0]
    assert line.startswith("ACCEPT: PASS") and "golden forward through 5 of 8 layers: 0-1, 3, 6-7" in line
    caught = verify(bad, source)
    assert caught.gate(7).status == "fail" and "VERIFY_GOLDEN_LOGITS" in caught.codes(7)
    swept = verify(clean, source, sweep=True).gate(7).evidence
    assert swept["truncated"] is False and swept["layers"] == list(range(8))
