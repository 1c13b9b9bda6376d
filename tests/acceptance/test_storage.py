"""The structure question's reading back (``converters.acceptance.storage``) and the recipes' cost budgets: the
storage conventions are stated independently of the mapping transforms and must agree with them; the
mapping's inverse transforms undo its chains; a recipe's ``golden_budget`` is validated, listed and recorded."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance.golden import TextSpec
from converters.acceptance.storage import fused_rows, tiled_to_grouped, to_logical
from converters.errors import RecipeError
from converters.mapping import transforms
from converters.mapping.catalogue import recipe_rows
from converters.mapping.chain import resolve_chain
from converters.mapping.recipes import load_recipe
from converters.model.architectures import qwen35
from converters.model.architectures._family import LOGICAL
from tinymodels import qwen35 as tiny35


@pytest.mark.parametrize("hk, hv", [(1, 4), (2, 4), (2, 6), (3, 12), (4, 4), (16, 32), (16, 48)])
def test_the_stated_tiled_order_is_the_mappings(hk, hv):
    np.testing.assert_array_equal(tiled_to_grouped(hv, hk), transforms.tiled_to_grouped_heads(hk, hv))


@pytest.mark.parametrize("steps", [
    [("unshift_norm", {})],
    [("a_log_from_ssm_a", {}), ("v_heads_tiled_to_grouped", {"num_k_heads": 2, "num_v_heads": 6, "head_dim": 1,
                                                             "start": 0})],
    [("row_slice", {"start": 8, "stop": 20}), ("v_heads_tiled_to_grouped", {"num_k_heads": 2, "num_v_heads": 4,
                                                                           "head_dim": 3, "start": 0})],
    [("v_head_columns_tiled_to_grouped", {"num_k_heads": 2, "num_v_heads": 4, "head_dim": 2})],
])
def test_source_order_undoes_a_chain(steps, rng=np.random.default_rng(3)):
    rows = 20 if steps[0][0] == "row_slice" else 6
    shape = (rows,) if steps[0][0] != "v_head_columns_tiled_to_grouped" else (5, 8)
    if steps[0][0] == "row_slice":
        shape = (rows, 4)
    source = -rng.uniform(0.5, 2.0, size=shape)  # negative: a valid ssm_a
    chain = resolve_chain(shape, steps)
    ids = chain.row_ids(0, chain.n_rows)
    logical = chain.apply(source.reshape(-1, chain.source_columns)[ids])
    back = chain.source_order(logical)
    expected = source.reshape(-1, chain.source_columns)[np.sort(chain.row_sources())]
    np.testing.assert_allclose(back, expected, rtol=1e-6)


def test_gguf_conventions_undo_what_llama_cpp_wrote():
    cfg = tiny35.config()
    spec = TextSpec.from_config(cfg)
    hk, hv, dv = spec.linear_num_key_heads, spec.linear_num_value_heads, spec.linear_value_head_dim
    grouped = np.arange(hv * dv, dtype=np.float64).reshape(hv * dv, 1)
    tiled = grouped.reshape(hk, hv // hk, dv).transpose(1, 0, 2).reshape(hv * dv, 1)  # llama.cpp: (r, k) order
    storage = qwen35.GGUF_STORAGE
    np.testing.assert_array_equal(to_logical(storage, spec, "text/layers/0/gdn/value", tiled), grouped)
    np.testing.assert_array_equal(to_logical(LOGICAL, spec, "text/layers/0/gdn/value", grouped), grouped)
    w = np.array([0.0, 0.25, -0.5])
    np.testing.assert_allclose(to_logical(storage, spec, "text/layers/3/input_norm", w + 1), w)
    np.testing.assert_allclose(to_logical(storage, spec, "text/final_norm", w + 1), w)
    np.testing.assert_array_equal(to_logical(storage, spec, "text/layers/0/gdn/norm", w), w)  # the gated norm: raw
    a_log = np.array([0.1, -0.3, 0.7, 0.0])
    np.testing.assert_allclose(to_logical(storage, spec, "text/layers/0/gdn/a_log", -np.exp(a_log)[
        np.argsort(tiled_to_grouped(hv, hk))]), a_log)
    q = fused_rows(storage, spec, "text/layers/3/attention/query")
    g = fused_rows(storage, spec, "text/layers/3/attention/gate")
    d = spec.head_dim
    assert q.tolist()[:d] == list(range(d)) and g.tolist()[:d] == list(range(d, 2 * d))
    assert sorted(np.concatenate([q, g]).tolist()) == list(range(2 * d * spec.num_heads))
    assert fused_rows(LOGICAL, spec, "text/layers/3/attention/query") is None
    qkv = [fused_rows(storage, spec, f"text/layers/0/gdn/{p}") for p in ("query", "key", "value")]
    kd = spec.linear_num_key_heads * spec.linear_key_head_dim
    assert [len(r) for r in qkv] == [kd, kd, hv * dv] and np.concatenate(qkv).tolist() == list(range(2 * kd + hv * dv))


def test_recipes_state_their_budget_and_it_is_validated(tmp_path):
    rows = {r["name"]: r for r in recipe_rows()}
    assert rows["bf16"]["golden_budget"] == {"cosine": 0.99, "top1_agreement": 0.75}
    assert rows["exact"]["golden_budget"] == {"cosine": 0.999999999, "top1_agreement": 1.0}
    assert rows["ternary"]["golden_budget"] is None
    assert load_recipe("groupwise-int").to_json()["golden_budget"] == {"cosine": 0.75, "top1_agreement": 0.25}
    base = (tmp_path / "r.yaml")
    for bad in ("{cosine: 0, top1_agreement: 0.5}", "{cosine: 0.9, top1_agreement: 1.5}", "{cosine: 0.9}",
                "{cosine: 0.9, top1_agreement: 0.5, rmse: 1}", "{cosine: true, top1_agreement: 0.5}"):
        base.write_text(f"name: r\ndescription: d\ngolden_budget: {bad}\nroles:\n  '*': {{format: bf16}}\n")
        with pytest.raises(RecipeError) as e:
            load_recipe(base)
        assert "golden_budget" in str(e.value.json_path) and e.value.rule in ("golden_budget", "missing_field",
                                                                               "unknown_key")
