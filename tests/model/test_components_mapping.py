"""The mapping-engine features the components need, refused when misused: ``{expression}`` placeholders
(``blk.{num_hidden_layers + l}``), stacked sources (the mmproj Conv3d halves), ``source`` as a list of
inputs, per-component ``Args`` and ties followed to the parameter that has a source."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from converters.errors import MappingError
from converters.mapping import bind, load_mapping
from converters.model.engine import open_model
from converters.sources import open_gguf
from converters.sources.rows import StackedRows, TensorRows
from tinymodels import qwen3, qwen35, vision

BASE = textwrap.dedent("""\
    architecture: qwen3
    component: text
    doc: a test mapping
    rules:
      join: {transforms: [move_axis], evidence: read somewhere}
    parameters:
      text_globals:
        text/token_embedding:
          shape: [vocab_size, hidden_size]
          role: embedding
          gguf: token_embd.weight
          evidence: by name
    """)


def load(tmp_path, extra: str = "", replace: tuple[str, str] | None = None):
    text = BASE + textwrap.indent(textwrap.dedent(extra), "    ")
    if replace:
        assert replace[0] in text
        text = text.replace(*replace)
    p = tmp_path / "m.yaml"
    p.write_text(text)
    return load_mapping(p)


@pytest.mark.parametrize("extra, replace, rule, needle", [
    ("""\
    text/x:
      shape: [hidden_size]
      role: norm
      gguf: "blk.{num_hidden_layers + l}.x"
      evidence: e
    """, None, "placeholder", "unknown placeholder {l}"),
    ("""\
    text/x:
      shape: [hidden_size]
      role: norm
      gguf: "blk.{num_hidden_layerz + 1}.x"
      evidence: e
    """, None, "expression", "num_hidden_layerz"),
    ("""\
    text/x:
      shape: [hidden_size]
      role: norm
      gguf: {stack: [a.weight]}
      evidence: e
    """, None, "mapping_schema", "at least two"),
    ("""\
    text/x:
      shape: [hidden_size]
      role: norm
      gguf: {tensor: a.weight, stack: [a.weight, b.weight]}
      evidence: e
    """, None, "mapping_schema", "tensor or stack"),
    ("", ("doc: a test mapping\n", "doc: a test mapping\nsource: [main, main]\n"), "mapping_schema", "distinct"),
])
def test_misused_features_name_the_line(tmp_path, extra, replace, rule, needle):
    with pytest.raises(MappingError) as info:
        load(tmp_path, extra, replace)
    assert info.value.rule == rule and needle in info.value.message and "m.yaml:" in str(info.value.file)


def test_expression_placeholder_binds_the_block_after_the_trunk(tmp_path):
    cfg = qwen35.config(num_hidden_layers=4, full_attention_interval=2, mtp_num_hidden_layers=1)
    path = qwen35.write_gguf(tmp_path / "q35.gguf", cfg, matrix_type="F32")
    with open_model(path, components=("text", "mtp")) as model:
        bound = model.bound
    assert bound.parameter("mtp/layers/0/attention/key").source.tensor == "blk.4.attn_k.weight"
    assert bound.parameter("mtp/fc").source.tensor == "blk.4.nextn.eh_proj.weight"
    assert bound.parameter("mtp/layers/0/attention/key").layer == 0  # the MTP layer index, not the block
    assert bound.layer_kinds == tuple(cfg["layer_types"])  # the text's kinds, not the MTP component's


def test_stacked_rows_read_members_in_order(tmp_path):
    path = vision.write_mmproj(tmp_path / "mmproj.gguf")
    with open_gguf(path) as src:
        halves = [TensorRows(src, n) for n in ("v.patch_embd.weight", "v.patch_embd.weight.1")]
        stacked = StackedRows(halves)
        per = halves[0].storage.rows
        assert stacked.storage.rows == 2 * per
        ids = np.array([per + 3, 0, 2 * per - 1, 5])
        want = np.concatenate([halves[1].floats(np.array([3])), halves[0].floats(np.array([0])),
                               halves[1].floats(np.array([per - 1])), halves[0].floats(np.array([5]))])
        np.testing.assert_array_equal(stacked.floats(ids), want)
        np.testing.assert_array_equal(stacked.raw(slice(per - 1, per + 1)),
                                      np.concatenate([halves[0].raw(slice(per - 1, per)), halves[1].raw(slice(0, 1))]))


def test_stack_members_must_agree(tmp_path):
    """A stack of tensors of different shapes is refused when binding (not read as garbage)."""
    from converters.mapping.binder import _stacked_shape
    from converters.model.architectures import qwen3_5_vision

    path = vision.write_mmproj(tmp_path / "mmproj.gguf")
    with open_gguf(path) as src:
        assert _stacked_shape("x", ("v.patch_embd.weight", "v.patch_embd.weight.1"), src, "w") == (2, 64, 3, 8, 8)
        with pytest.raises(MappingError) as info:
            _stacked_shape("x", ("v.patch_embd.weight", "v.position_embd.weight"), src, "w")
        assert info.value.rule == "stack_shape"
        with pytest.raises(MappingError) as info:
            _stacked_shape("x", ("v.patch_embd.weight", "v.patch_embd.weight.2"), src, "w")
        assert info.value.rule == "source_tensor_missing"
    assert qwen3_5_vision.LAYER_KINDS == ("vision_block",)


def test_vision_mapping_reads_the_first_input_given(tmp_path):
    """``source: [mmproj, main]``: the HF checkpoint's tower when no mmproj is given, else the mmproj."""
    hf = vision.write_hf_dir(tmp_path / "vl")
    mmproj = vision.write_mmproj(tmp_path / "mmproj.gguf")
    text = qwen35.write_hf_dir(tmp_path / "text")
    with open_model(hf, components=("text", "vision")) as model:
        p = model.bound.parameter("vision/patch_embedding")
        assert (p.source.input, p.source.tensor, p.source.stack) == ("main", "model.visual.patch_embed.proj.weight", ())
    with open_model(text, components=("text", "vision"), inputs={"mmproj": mmproj}) as model:
        p = model.bound.parameter("vision/patch_embedding")
        assert (p.source.input, p.source.stack) == ("mmproj", ("v.patch_embd.weight", "v.patch_embd.weight.1"))
        assert p.source.chain.source_shape == (2, 64, 3, 8, 8) and p.shape == (64, 3, 2, 8, 8)


def test_tie_cycles_are_refused(tmp_path):
    m = load(tmp_path, """\
    text/a:
      shape: [hidden_size]
      role: norm
      tied_to: {parameter: text/b}
      evidence: e
    text/b:
      shape: [hidden_size]
      role: norm
      tied_to: {parameter: text/a}
      evidence: e
    """)
    from converters.model.architectures import qwen3 as arch

    cfg = qwen3.config(num_hidden_layers=1)
    with open_gguf(qwen3.write_gguf(tmp_path / "q3.gguf", cfg, matrix_type="F32")) as src:
        with pytest.raises(MappingError) as info:
            bind([m], arch.Args.from_config(cfg), {"main": src})
    assert info.value.rule == "tied_cycle"
