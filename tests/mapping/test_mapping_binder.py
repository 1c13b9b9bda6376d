"""The binder: coverage (every tensor consumed, owned by another component or dropped), shapes after the
transform chain, layer kinds cross-checked with the tensors present, tied embeddings."""

from __future__ import annotations

import dataclasses

import pytest

from converters.errors import MappingError
from converters.mapping import bind, load_mapping_for
from converters.model.architectures import qwen3 as A3
from converters.model.architectures import qwen35 as A35
from converters.sources import open_source
from tinymodels import qwen3, qwen35


class EditedSource:
    """A real source with tensors hidden or added under new names (test fixture around the real reader)."""

    def __init__(self, source, *, drop=(), add=None):
        self.kind, self.path = source.kind, source.path
        self.tensors = {n: t for n, t in source.tensors.items() if n not in drop}
        some = next(iter(source.tensors.values()))
        for name, shape in (add or {}).items():
            self.tensors[name] = dataclasses.replace(some, name=name, shape=shape)

    def tensor(self, name):
        return self.tensors[name]


@pytest.fixture(scope="module")
def q35(tmp_path_factory):
    d = tmp_path_factory.mktemp("q35")
    cfg = qwen35.config()
    qwen35.write_gguf(d / "m.gguf", cfg, matrix_type="Q8_0")
    qwen35.write_hf_dir(d / "hf", cfg)
    with open_source(d / "m.gguf") as g, open_source(d / "hf") as h:
        yield cfg, g, h


def bind35(cfg, src, **over):
    args = A35.Args.from_config({**cfg, **over})
    return bind([load_mapping_for("qwen35")], args, {"main": src})


def test_every_tensor_is_consumed(q35):
    cfg, g, h = q35
    for src in (g, h):
        b = bind35(cfg, src)
        assert len(b.parameters) == len(qwen35.logical_parameters(cfg)) and not b.skipped
        assert {p.source.tensor for p in b.parameters if p.source} == set(src.tensors)
    # payload order: globals, then layer by layer
    layers = [p.layer for p in b.parameters if p.layer is not None]
    assert layers == sorted(layers)


def test_leftovers_are_all_reported_sorted(q35):
    cfg, g, _ = q35
    src = EditedSource(g, add={"zzz.weight": (4, 4), "aaa.weight": (4, 4)})
    with pytest.raises(MappingError, match=r"2 source tensor\(s\) are not consumed .*: aaa\.weight, zzz\.weight"):
        bind35(cfg, src)


def test_missing_tensor_names_rule_line(q35):
    cfg, g, _ = q35
    with pytest.raises(MappingError, match=r"qwen35\.yaml:\d+: .*blk\.5\.ssm_out\.weight is missing"):
        bind35(cfg, EditedSource(g, drop={"blk.5.ssm_out.weight"}))


def test_layer_kinds_are_cross_checked_with_tensors(q35):
    cfg, g, h = q35
    kinds = list(cfg["layer_types"])
    kinds[2] = "full_attention"
    for src, probe in ((g, "blk.2.attn_q.weight"), (h, "model.layers.2.self_attn.q_proj.weight")):
        with pytest.raises(MappingError, match=rf"layer 2: the config says full_attention, but {probe} is missing"):
            bind35(cfg, src, layer_types=kinds)


def test_shape_after_transforms_must_match(q35):
    cfg, g, _ = q35
    with pytest.raises(MappingError, match=r"text/layers/0/mlp/gate: blk\.0\.ffn_gate\.weight has shape \[256, 128\], "
                                           r"which the transforms make \[256, 128\]; the mapping expects \[200, 128\]"):
        bind35(cfg, g, intermediate_size=200)
    with pytest.raises(MappingError, match=r"v_heads_tiled_to_grouped: rows \[96, 224\) must end the 256 rows"):
        bind35(cfg, g, linear_key_head_dim=24)  # the chain itself refuses a span that does not fit


def test_tensors_of_unselected_components_are_skipped(q35):
    cfg, g, h = q35
    b = bind35(cfg, EditedSource(g, add={"blk.8.nextn.eh_proj.weight": (128, 256)}))
    assert b.skipped == {"main:blk.8.nextn.eh_proj.weight": "component mtp not selected"}
    b = bind35(cfg, EditedSource(h, add={"mtp.fc.weight": (128, 256), "model.visual.blocks.0.x": (2, 2)}))
    assert set(b.skipped) == {"main:mtp.fc.weight", "main:model.visual.blocks.0.x"}
    with pytest.raises(MappingError, match="has no mapping for component 'mtp'"):
        load_mapping_for("qwen35", "mtp")


def test_tied_head_binds_the_embedding(tmp_path):
    cfg = qwen3.config()
    assert cfg["tie_word_embeddings"]
    qwen3.write_gguf(tmp_path / "m.gguf", cfg)
    with open_source(tmp_path / "m.gguf") as g:
        b = bind([load_mapping_for("qwen3")], A3.Args.from_config(cfg), {"main": g})
    head = b.parameter("text/output_head")
    assert head.source is None and head.tied_to == "text/token_embedding" and head.input == "text/final_hidden"


def test_missing_config_field_is_named():
    cfg = qwen35.config()
    del cfg["linear_num_value_heads"]
    with pytest.raises(Exception, match="config field 'linear_num_value_heads' is missing"):
        A35.Args.from_config(cfg)
