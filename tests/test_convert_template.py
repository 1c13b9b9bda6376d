"""``--template``: the template's directory is the skeleton; produced vs borrowed objects (seed 003 §3, §6)."""

from __future__ import annotations

import numpy as np
import pytest

from converters.errors import ConversionError
from converters.pipeline.convert import convert
from ninfer_core import ArtifactWriter, Binding, Component, Use, codecs, open_artifact, validate
from tinymodels import qwen35

CFG = qwen35.config()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("tpl")
    qwen35.write_gguf(d / "m.gguf", CFG, matrix_type="Q8_0")
    qwen35.write_hf_dir(d / "hf", CFG)
    convert(d / "hf", d / "base.ninfer", recipe="groupwise-int")
    convert(d / "hf", d / "fused.ninfer", recipe="nvfp4")
    extra = {"mtp/fc": np.random.default_rng(0).standard_normal((128, 256)).astype(np.float32),
             "vision/patch_embed": np.random.default_rng(1).standard_normal((64, 48)).astype(np.float32)}
    processor = b'{"patch_size": 16}\n'
    with open_artifact(d / "base.ninfer") as base:
        comps = {k: c for k, c in base.components.items()}
        comps["mtp"] = Component({"architectures": ["Qwen3_5MTP"]}, target="text")
        comps["vision"] = Component({"model_type": "qwen3_vl"},
                                    resources={"preprocessor_config.json": "frontend/vision/preprocessor_config.json"})
        bindings = dict(base.bindings)
        bindings["mtp/fc"] = Binding.whole("mtp/fc")
        bindings["mtp/token_embedding"] = base.bindings["text/token_embedding"]  # shared with text, not copied
        bindings["vision/patch_embed"] = Binding.whole("vision/patch_embed")
        uses = [*base.uses, Use("mtp/fc", "mtp/fc_input", "A16Only")]
        with ArtifactWriter(d / "template.ninfer", components=comps, bindings=bindings, uses=uses,
                            metadata=dict(base.metadata), provenance={"made_by": "test"}) as w:
            records = list(base.objects)
            order = records[:5] + [("mtp/fc",)] + records[5:] + [("vision/patch_embed",), ("proc",)]
            for rec in order:
                if rec == ("mtp/fc",) or rec == ("vision/patch_embed",):
                    w.add_tensor(rec[0], extra[rec[0]].shape, "bf16", "contiguous_le_v1")
                elif rec == ("proc",):
                    w.add_resource("frontend/vision/preprocessor_config.json", len(processor))
                elif rec.kind == "tensor":
                    w.add_tensor(rec.id, rec.shape, rec.format, rec.layout, divisors=rec.divisors)
                else:
                    w.add_resource(rec.id, rec.bytes)
            w.plan()
            for rec in records:
                w.write_object(rec.id, bytes(base.read_range(rec.offset, rec.bytes)))
            for oid, arr in extra.items():
                w.write_object(oid, codecs.encode("bf16", "contiguous_le_v1", arr))
            w.write_object("frontend/vision/preprocessor_config.json", processor)
    return d


def test_template_objects_are_produced_or_borrowed(made, tmp_path):
    out = tmp_path / "out.ninfer"
    result = convert(made / "m.gguf", out, template=made / "template.ninfer")  # recipe from the template
    s = result.summary()
    assert s["recipe"] == "groupwise-int"
    assert s["borrowed"]["by_prefix"] == {
        "mtp": {"objects": 1, "bytes": 128 * 256 * 2}, "vision": {"objects": 1, "bytes": 64 * 48 * 2},
        "frontend": {"objects": 1, "bytes": 19}}
    assert s["produced"]["bytes"] + s["borrowed"]["bytes"] == s["total_bytes"]
    assert not [f for f in validate(out) if f.severity == "ERROR"]
    with open_artifact(made / "template.ninfer") as tpl, open_artifact(out) as art:
        assert [o.id for o in art.objects] == [o.id for o in tpl.objects]  # the skeleton's order
        for oid in ("mtp/fc", "vision/patch_embed", "frontend/vision/preprocessor_config.json"):
            assert art.object_bytes(oid) == tpl.object_bytes(oid)  # byte-for-byte
        assert set(art.components) == {"text", "mtp", "vision"} and art.components["mtp"].target == "text"
        assert art.bindings["mtp/token_embedding"] == art.bindings["text/token_embedding"]
        assert any(u.parameter == "mtp/fc" for u in art.uses)
        # text came from the GGUF, not from the template: the Q8_0 embedding is transcoded exactly
        prov = art.provenance["objects"]
        assert prov["text/token_embedding"]["pieces"][0]["source"] == "token_embd.weight"
        assert prov["mtp/fc"]["borrowed_from"].endswith("template.ninfer")


def test_unmappable_template_object_stops_before_writing(made, tmp_path):
    out = tmp_path / "x.ninfer"
    with pytest.raises(ConversionError, match=r"template object text/layers/0/gdn/query_key_value_z is unmapped"):
        convert(made / "m.gguf", out, template=made / "fused.ninfer", recipe="groupwise-int")
    assert list(tmp_path.iterdir()) == []
    # with the template's own recipe the same template maps
    assert convert(made / "m.gguf", out, template=made / "fused.ninfer").summary()["borrowed"]["objects"] == 0


def test_template_of_another_model_is_refused(made, tmp_path):
    other = qwen35.config(intermediate_size=192)
    qwen35.write_gguf(tmp_path / "other.gguf", other, matrix_type="Q8_0")
    with pytest.raises(ConversionError, match="text/layers/0/mlp/gate_up is a tensor \\[512, 128\\], but the "
                                              "source produces a tensor \\[384, 128\\]"):
        convert(tmp_path / "other.gguf", tmp_path / "y.ninfer", template=made / "template.ninfer")
    assert not (tmp_path / "y.ninfer").exists()


def test_only_layer_with_template_borrows_nothing(made, tmp_path):
    result = convert(made / "m.gguf", tmp_path / "l3.ninfer", template=made / "template.ninfer", only_layer=3)
    s = result.summary()
    assert s["borrowed"]["objects"] == 0 and s["only_layer"] == 3
    assert all(r["id"].startswith(("text/layers/3/", "frontend/")) for r in result.object_rows())
