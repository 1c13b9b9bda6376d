"""The Qwen3.5 MTP head as a component: HF ``mtp.*`` and GGUF ``blk.{L+i}`` (``nextn.*``) sources decoded
against the generator's float reference (:mod:`tinymodels.mtp`), its record (``Qwen3_5MTP``, target text),
and its embedding and head bound to the text objects — no copy, no shared parent with text parameters."""

from __future__ import annotations

import numpy as np
import pytest

from converters.model.engine import expected_parameters, logical_array
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from tests.support.components import check_separation, cosine
from tinymodels import qwen35

CFG = qwen35.config(mtp_num_hidden_layers=1)
REF = qwen35.logical_parameters(CFG)
MTP = {k: v for k, v in REF.items() if k.startswith("mtp/")}
SHARED = {"mtp/token_embedding": "text/token_embedding", "mtp/output_head": "text/output_head"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("mtp")
    qwen35.write_gguf(d / "q8.gguf", CFG, matrix_type="Q8_0")
    qwen35.write_gguf(d / "f32.gguf", CFG, matrix_type="F32")
    qwen35.write_hf_dir(d / "hf", CFG)
    tied = qwen35.config(mtp_num_hidden_layers=1, tie_word_embeddings=True)
    qwen35.write_gguf(d / "tied.gguf", tied, matrix_type="F32")
    return d


@pytest.mark.parametrize("source, recipe, floor", [
    ("f32.gguf", "exact", 1.0),       # norms un-shifted in float64 (fp32): equal to the reference after rounding
    ("hf", "bf16", 1.0),              # bf16 source copied bit for bit
    ("q8.gguf", "bf16", 0.9999),
    ("q8.gguf", "groupwise-int", 0.99),
])
def test_mtp_values_match_the_generator(sources, tmp_path, source, recipe, floor):
    out = tmp_path / "m.ninfer"
    convert(sources / source, out, recipe=recipe, components=["text", "mtp"], workers=1)
    assert validate(out) == []
    with open_artifact(out) as a:
        assert a.components["mtp"].to_json() == {"config": {"architectures": ["Qwen3_5MTP"]}, "target": "text"}
        names = {n for n in a.bindings if n.startswith("mtp/")}
        assert names == set(MTP) | set(SHARED)
        for name, want in MTP.items():
            got = logical_array(a, name, want.shape)
            if floor == 1.0:
                np.testing.assert_allclose(got, want, rtol=0, atol=np.abs(want).max() * 2.0 ** -8, err_msg=name)
            else:
                assert cosine(got, want) >= floor, name
        # the gated query: per-head de-interleave applied to blk.8.attn_q too (swapped halves would fail)
        q, g = (logical_array(a, f"mtp/layers/0/attention/{k}", MTP[f"mtp/layers/0/attention/{k}"].shape)
                for k in ("query", "gate"))
        assert cosine(q, MTP["mtp/layers/0/attention/query"]) > 0.99 > abs(cosine(q, MTP["mtp/layers/0/attention/gate"]))
        assert cosine(g, MTP["mtp/layers/0/attention/gate"]) > 0.99
        check_separation(a, SHARED)
        ids = [o.id for o in a.objects]
        assert len(ids) == len(set(ids))
        vh = (CFG["vocab_size"], CFG["hidden_size"])  # no second copy of the embedding or head
        assert not [o.id for o in a.objects if o.id.startswith("mtp/") and "/layers/" not in o.id
                    and tuple(o.shape) == vh]
        assert [o.id for o in a.objects if o.id.endswith(("/token_embedding", "/output_head"))] == [
            "text/token_embedding", "text/output_head"]
        uses = {(u.parameter, u.input) for u in a.uses}
        assert ("mtp/output_head", "mtp/final_hidden") in uses and ("text/output_head", "text/final_hidden") in uses
        assert ("mtp/fc", "mtp/fc_input") in uses


def test_tied_text_head_is_the_mtp_head_too(sources, tmp_path):
    out = tmp_path / "t.ninfer"
    convert(sources / "tied.gguf", out, recipe="bf16", components=["text", "mtp"], workers=1)
    with open_artifact(out) as a:
        for name in ("text/output_head", "mtp/token_embedding", "mtp/output_head"):
            assert a.bindings[name].to_json() == {"object": "text/token_embedding"}, name
        assert "text/output_head" not in {o.id for o in a.objects}


def test_grouped_recipe_keeps_mtp_parents_apart(sources, tmp_path):
    out = tmp_path / "g.ninfer"
    convert(sources / "hf", out, recipe="groupwise-int", components=["text", "mtp"], workers=1)
    with open_artifact(out) as a:
        assert a.bindings["mtp/layers/0/attention/query"].parts[0].object == "mtp/layers/0/attention/query_key"
        assert a.bindings["text/layers/3/attention/query"].parts[0].object == "text/layers/3/attention/query_key"
        check_separation(a, SHARED)


def test_expected_parameters_names_mtp(sources):
    got = dict(expected_parameters(sources / "f32.gguf", components=("text", "mtp"),
                                   names=["mtp/fc", "mtp/norm", "mtp/output_head"]))
    np.testing.assert_allclose(got["mtp/fc"], MTP["mtp/fc"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(got["mtp/norm"], MTP["mtp/norm"], rtol=0, atol=1e-6)  # written as w + 1, undone
    np.testing.assert_array_equal(got["mtp/output_head"], dict(expected_parameters(
        sources / "f32.gguf", names=["text/output_head"]))["text/output_head"])


def test_only_layer_declares_no_component(sources, tmp_path):
    out = tmp_path / "l.ninfer"
    convert(sources / "hf", out, recipe="bf16", components=["text", "mtp"], only_layer=3, workers=1)
    with open_artifact(out) as a:
        assert set(a.components) == {"text"}
        assert not any(n.startswith("mtp/") for n in a.bindings)
