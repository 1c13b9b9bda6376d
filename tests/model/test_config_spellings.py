"""Every spelling of a config that released checkpoints and transformers 5 ``save_pretrained`` write is read to
the same normalised config (docs/architectures.md §Config spellings).

For each real config of ``tinymodels/real_configs`` a tiny checkpoint is generated at the real head counts
(truncated layers, widths shrunk) and saved three ways: tinymodels' own transformers-5 config, the published
``config.json`` spelling and the spelling transformers 5.23 re-saves (committed data, made by
``python -m tinymodels.resave_configs``). All three normalise to the same text (and vision) config.
"""

from __future__ import annotations

import pytest

from converters.model.config_normalize import normalize_text_config, normalize_vision_config
from converters.sources import open_source
from tinymodels import real

#: name -> (layers, shrink): the first full-attention layer of the hybrids, Qwen3-VL's three deepstack layers
GEOMETRY = {"qwen2.5-0.5b": (2, 8), "qwen2.5-7b": (2, 16), "qwen3-0.6b": (2, 8), "qwen3-8b": (2, 32),
            "qwen3-30b-a3b": (2, 16), "qwen3-next-80b-a3b": (4, 16), "qwen3-vl-2b": (3, 16),
            "qwen3.5-0.8b": (4, 8)}
EXPERTS = {"qwen3-next-80b-a3b": 16}  # 512 real experts: a smaller bank keeps the test fast


def _normalised(path):
    source = open_source(path)
    text = normalize_text_config(source)
    tower = normalize_vision_config(source) if "vision_config" in (source.config or {}) else None
    return text, tower


@pytest.fixture(scope="module", params=sorted(GEOMETRY))
def spelled(request, tmp_path_factory):
    name = request.param
    layers, shrink = GEOMETRY[name]
    cfg = real.geometry(name, layers=layers, shrink=shrink, vocab=512, experts=EXPERTS.get(name))
    d = tmp_path_factory.mktemp(name)
    real.write_canonical_hf_dir(d / "canonical", name, cfg, shards=1)
    for spelling in real.SPELLINGS:
        real.write_hf_dir(d / spelling, name, cfg, spelling, shards=1)
    return name, cfg, {s: _normalised(d / s) for s in ("canonical", *real.SPELLINGS)}


def test_every_spelling_reads_to_the_same_config(spelled):
    name, cfg, read = spelled
    assert read["published"] == read["canonical"], name
    assert read["resaved"] == read["canonical"], name


def test_the_normalised_config_keeps_the_real_geometry(spelled):
    name, cfg, read = spelled
    text, tower = read["resaved"]
    real_text = real.published(name).get("text_config", real.published(name))
    for key in ("num_attention_heads", "num_key_value_heads", "rms_norm_eps", "max_position_embeddings"):
        assert text[key] == real_text[key], (name, key)
    assert text["num_hidden_layers"] == GEOMETRY[name][0]
    assert text["hidden_size"] * GEOMETRY[name][1] == real_text["hidden_size"]
    assert text["tie_word_embeddings"] == real.published(name).get("tie_word_embeddings",
                                                                     real_text.get("tie_word_embeddings"))
    if "num_experts" in real_text:
        assert text["num_experts"] == EXPERTS.get(name, real_text["num_experts"])
        assert text["num_experts_per_tok"] == min(real_text["num_experts_per_tok"], text["num_experts"])
    assert (tower is None) == ("vision_config" not in real.published(name))


def test_the_resaved_files_differ_from_the_published_ones_where_transformers_5_respells():
    """The committed re-saved data carry the spellings this test file exists for (a stale or hand-edited
    re-save would make the equality above vacuous)."""
    moe = real.published("qwen3-30b-a3b", "resaved")
    assert "num_local_experts" in moe and "num_experts" not in moe
    assert real.published("qwen3-30b-a3b")["num_experts"] == moe["num_local_experts"] == 128
    vl = real.published("qwen3-vl-2b", "resaved")
    assert vl["vision_config"]["model_type"] == "qwen3_vl_vision"
    assert "rope_parameters" in vl["text_config"] and "rope_scaling" not in vl["text_config"]
    assert vl["text_config"]["rope_parameters"]["mrope_section"] == [24, 20, 20]
    nxt = real.published("qwen3-next-80b-a3b", "resaved")
    assert "full_attention_interval" not in nxt and len(nxt["layer_types"]) == 48
    assert nxt["rope_parameters"]["partial_rotary_factor"] == 0.25 and "partial_rotary_factor" not in nxt
    assert real.published("qwen3.5-0.8b", "resaved")["vision_config"]["model_type"] == "qwen3_5_vision"
    for name in real.names():
        saved = real.published(name, "resaved")
        assert saved["transformers_version"] == real.TRANSFORMERS_VERSION
        assert "torch_dtype" not in saved and "rope_theta" not in saved.get("text_config", saved)


@pytest.mark.parametrize("model_type", ["qwen3_vl", "qwen3_vl_vision"])
def test_a_qwen3_vl_tower_is_read_under_either_model_type(tmp_path, model_type):
    cfg = real.geometry("qwen3-vl-2b", layers=3, shrink=16, vocab=512)
    path = real.write_hf_dir(tmp_path / "m", "qwen3-vl-2b", cfg, "published", shards=1)
    import json

    doc = json.loads((path / "config.json").read_text())
    doc["vision_config"]["model_type"] = model_type
    (path / "config.json").write_text(json.dumps(doc))
    assert normalize_vision_config(open_source(path))["deepstack_visual_indexes"] == [5, 11, 17]
