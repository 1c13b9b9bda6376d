"""``convert verify`` gate 7 (golden numerics) on mixture-of-experts artifacts: tiny Qwen3-MoE, Qwen3.5-MoE and
Qwen3-Next GGUFs converted by ``converters.pipeline.convert.convert`` pass; the same artifact with two routed experts of one
layer swapped (written anew with the container writer, as the gates tests build their defects) fails it."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance import golden
from converters.acceptance.gates.numerics import golden_tokens
from converters.acceptance.gates.verify import verify
from ninfer_core import open_artifact
from tests.support.gates import converted, rewrite, swap_blocks
from tests.support.golden_moe import Recording, routed
from tinymodels import qwen3_moe, qwen3_next, qwen35_moe

MODELS = {"qwen3_moe": qwen3_moe, "qwen3_5_moe": qwen35_moe, "qwen3_next": qwen3_next}
LAYER = 0


@pytest.fixture(scope="module", params=sorted(MODELS))
def moe(request, tmp_path_factory):
    """(module, GGUF source, clean bf16 artifact) of one family."""
    mod, d = MODELS[request.param], tmp_path_factory.mktemp(request.param)
    source = mod.write_gguf(d / "moe.Q8_0.gguf", mod.config(), matrix_type="Q8_0")
    return mod, source, converted(source, d / "moe.ninfer", "bf16")


def routed_experts(mod) -> list[int]:
    """The experts of ``LAYER`` the golden tokens are routed to (float reference forward of the generator)."""
    cfg = mod.config()
    params = Recording(mod.logical_parameters(cfg))
    golden.forward(cfg, params, golden_tokens(cfg["vocab_size"]))
    return routed(params, LAYER)


def test_clean_moe_artifact_passes_the_golden_gate(moe):
    _, source, art = moe
    r = verify(art, source)
    assert [g.status for g in r.gates] == ["pass"] * 7 and r.result == "pass"
    ev = r.gate(7).evidence
    assert ev["precision_class"] == "16-bit" and ev["top1_agreement"] == 1.0
    assert 0.9995 <= ev["cosine"] < 1.0  # bf16 of a Q8_0 source: close, not identical


def test_two_swapped_experts_fail_the_golden_gate(moe, tmp_path):
    mod, source, art = moe
    experts = routed_experts(mod)
    assert len(experts) >= 2
    a, b = experts[:2]
    n_experts = mod.config()["num_experts"]
    with open_artifact(art) as clean:
        banks = {o.id: o.shape[0] // n_experts for o in clean.objects
                 if o.id.startswith(f"text/layers/{LAYER}/moe/experts/")}
    assert set(banks) == {f"text/layers/{LAYER}/moe/experts/{p}" for p in ("gate", "up", "down")}
    bad = rewrite(art, tmp_path / "swapped.ninfer",
                  edit={oid: (lambda x, rows=rows: swap_blocks(x, a, b, rows)) for oid, rows in banks.items()})
    with open_artifact(art) as clean, open_artifact(bad) as swapped:  # the defect is exactly the two experts
        g = f"text/layers/{LAYER}/moe/experts/gate"
        rows = banks[g]
        x, y = clean.object_array(g), swapped.object_array(g)
        ra, rb = slice(a * rows, (a + 1) * rows), slice(b * rows, (b + 1) * rows)
        np.testing.assert_array_equal(y[ra], x[rb])
        np.testing.assert_array_equal(y[rb], x[ra])
        others = np.ones(len(x), dtype=bool)
        others[ra] = others[rb] = False
        np.testing.assert_array_equal(y[others], x[others])
        assert not np.array_equal(x[ra], x[rb])
    r = verify(bad, source)
    assert r.gate(7).status == "fail" and r.codes(7) == {"VERIFY_GOLDEN_LOGITS"}
    ev = r.gate(7).evidence
    assert ev["cosine"] < 0.9995 and ev["max_abs_error"] > 0.1
    assert r.gate(5).status == "fail" and r.result == "fail"  # the order probes see it too
