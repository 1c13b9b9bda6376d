"""``--template``: the template's directory is the skeleton; produced vs borrowed objects (docs/ternary.md §3, §6)."""

from __future__ import annotations

import pytest

from converters.errors import ConversionError
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from tinymodels import qwen35

CFG = qwen35.config()


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
