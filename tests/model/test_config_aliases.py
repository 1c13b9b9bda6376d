"""transformers' ``attribute_map`` aliases (docs/architectures.md §Config aliases): a config.json that
holds a field under either name of a declared pair normalises to the same config, per recorded pair; the
recorded data is the classes' real maps (transformers 5.x: ``Qwen3MoeConfig`` and ``Qwen3VLMoeTextConfig``
map ``num_experts`` to ``num_local_experts``)."""

from __future__ import annotations

import json

import pytest

from converters.model.config_aliases import aliased_key, attribute_maps
from converters.model.config_normalize import explain_text_config, normalize_text_config
from converters.sources import open_hf_dir
from tinymodels import qwen3_moe

PAIRS = [(mt, alias, stored) for mt, amap in sorted(attribute_maps().items()) for alias, stored in amap.items()]


def test_recorded_maps_are_transformers_5():
    assert attribute_maps()["qwen3_moe"] == {"num_experts": "num_local_experts"}
    assert attribute_maps()["qwen3_vl_moe_text"] == {"num_experts": "num_local_experts"}
    assert attribute_maps()["qwen3_next"] == {} and attribute_maps()["qwen3_5_moe_text"] == {}


@pytest.mark.parametrize(("model_type", "alias", "stored"), PAIRS)
def test_each_pair_is_honoured_both_ways(model_type, alias, stored):
    saved_by_5x = {"model_type": model_type, stored: 7}
    saved_by_4x = {"model_type": model_type, alias: 7}
    assert aliased_key(alias, saved_by_5x, saved_by_5x) == stored
    assert aliased_key(stored, saved_by_4x, saved_by_4x) == alias
    assert aliased_key(alias, {"model_type": "qwen3", stored: 7}, {}) is None  # another class: no alias
    nested = {stored: 7}  # a text_config saved without its model_type: the root's <type> / <type>_text
    root = {"model_type": model_type.removesuffix("_text"), "text_config": nested}
    assert aliased_key(alias, nested, root) == stored


@pytest.fixture(scope="module")
def hf_moe(tmp_path_factory):
    return qwen3_moe.write_hf_dir(tmp_path_factory.mktemp("alias") / "hf")


def test_transformers_5_qwen3_moe_config_is_accepted(hf_moe):
    with open_hf_dir(hf_moe) as src:
        reference = normalize_text_config(src)
    cfg = json.loads((hf_moe / "config.json").read_text())
    cfg["num_local_experts"] = cfg.pop("num_experts")
    (hf_moe / "config.json").write_text(json.dumps(cfg))
    with open_hf_dir(hf_moe) as src:
        explained = explain_text_config(src)
    assert explained.config == reference
    assert "num_local_experts" in explained.evidence["num_experts"]
    assert "attribute_map" in explained.evidence["num_experts"]
