"""Hadamard-rotated Ternary Bonsai (``prism.hadamard.*``): rotated ternary bytes kept with the file's
own signs bound per input width, the looked-up embedding un-rotated, a template the project made from an
HF checkpoint with vision and MTP as the skeleton (produced vs borrowed bytes), a wrong-kind template refused,
``--only-layer 3``; and the metadata rules."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from converters.errors import ConversionError
from converters.model.engine import expected_parameters, logical_array
from converters.pipeline.convert import convert
from converters.sources import open_source
from converters.sources.hadamard import read_rotation
from ninfer_core import open_artifact, validate
from tinymodels import bonsai, vision

CFG = bonsai.rotated_config()
CFG4 = bonsai.rotated_config(num_hidden_layers=4, full_attention_interval=4, intermediate_size=1024)  # layer 3: attention


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("rot")
    bonsai.write_gguf(d / "rot.gguf", CFG, rotated=True)
    result = convert(d / "rot.gguf", d / "rot.ninfer", recipe="ternary", workers=1)
    return d, result


@pytest.fixture(scope="module")
def ref():
    """The generator's HF values of ``CFG`` (rotated matrices un-rotated in float64), computed once."""
    return bonsai.logical_parameters(CFG, rotated=True)


def metadata(cfg) -> dict:
    """The prism.hadamard.* values the generator wrote (gguf-py's reader cannot open fork type ids)."""
    return {k: v for k, (v, _, _) in bonsai.rotation_metadata(cfg).items()}


def test_signs_are_the_files_own_and_bound_per_width(made, ref):
    d, _ = made
    meta = metadata(CFG)
    widths = [int(w) for w in meta["prism.hadamard.sign_widths"]]
    shapes = {k: v.shape for k, v in ref.items()}
    with open_artifact(d / "rot.ninfer") as art:
        rec = art.object("text/hadamard_signs")
        assert (rec.format, tuple(rec.shape)) == ("bf16", (sum(widths),))
        raw = np.frombuffer(art.object_bytes("text/hadamard_signs"), dtype="<u2")
        signs = (raw.astype(np.uint32) << 16).view(np.float32)  # bf16 → float32, by hand
        assert np.array_equal(signs, np.asarray(meta["prism.hadamard.sign_values"], dtype=np.float32))
        assert np.frombuffer(art.object_bytes("text/hadamard_widths"), dtype="<i4").tolist() == widths
        offsets = dict(zip(widths, np.cumsum([0, *widths[:-1]]).tolist(), strict=True))
        rotated = set(meta["prism.hadamard.weight_names"])
        source = {pc["parameter"]: pc["source"] for o in art.provenance["objects"].values()
                  for pc in o.get("pieces", [])}
        used = set()
        for use in art.uses:
            aux = use.auxiliaries.get("hadamard_signs")
            assert (aux is not None) == (source[use.parameter] in rotated), use.parameter
            if aux is None:  # ssm_alpha / ssm_beta: BF16, not rotated
                continue
            (part,) = aux.parts
            lo, hi = part.range
            assert part.object == "text/hadamard_signs", use.parameter
            assert hi - lo == shapes[use.parameter][-1] and lo == offsets[hi - lo], use.parameter  # its width
            used.add(hi - lo)
        assert used == set(widths)
        assert not any(u.parameter == "text/token_embedding" for u in art.uses)  # looked up: no use
    assert "token_embd.weight" not in rotated and "output.weight" in rotated


def test_rotated_bytes_are_kept_and_decode_to_the_reference(made, ref):
    d, result = made
    stored = bonsai.stored_parameters(CFG, rotated=True)
    with open_artifact(d / "rot.ninfer") as art:
        assert art.metadata["identity"]["architecture"] == "bonsai"
        for name, want in ref.items():
            got = logical_array(art, name, want.shape)  # the use's signs undone: H·D per block
            if name == "text/token_embedding":
                cos = float(np.dot(got.ravel(), want.ravel()) / np.linalg.norm(got) / np.linalg.norm(want))
                assert cos > 0.9999
            elif name.endswith("/gdn/a_log"):
                np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)
            else:
                assert np.array_equal(got, want), name
            if name in stored and name.endswith(("/query", "/key", "/value", "/z", "/gate", "/up", "/down",
                                                 "/output", "output_head")):
                assert np.array_equal(art.binding_array(name).reshape(want.shape), stored[name]), name
        prov = art.provenance
        assert prov["source"]["hadamard"]["widths"] == [1024, 2048, 3072]
        emb = prov["objects"]["text/token_embedding"]
        assert emb["pieces"][0]["hadamard"].startswith("stored rotated by the source; un-rotated")
        assert emb["exactness"] == "requantized" and 0.9999 < emb["measured_error"]["cosine"] < 1
        a_log = prov["objects"]["text/layers/0/gdn/a_log"]["measured_error"]["against_float64"]
        assert a_log["cosine"] > 0.999999 and 0 < a_log["max_abs"] < 1e-6  # log(-a) rounded to fp32
        head = prov["objects"]["text/output_head"]
        assert head["exactness_check"][0]["codes_equal"] and head["exactness_check"][0]["multipliers_equal"]
    assert not [f for f in validate(d / "rot.ninfer") if f.severity == "ERROR"]
    # the expected-value oracle of the gates un-rotates the source the same way
    exp = dict(expected_parameters(d / "rot.gguf", names=["text/layers/1/mlp/down", "text/output_head"]))
    assert np.array_equal(exp["text/output_head"], ref["text/output_head"])
    assert np.array_equal(exp["text/layers/1/mlp/down"], ref["text/layers/1/mlp/down"])


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A template the project makes itself: HF Qwen3.5 with vision and MTP, recipe groupwise-int."""
    d = tmp_path_factory.mktemp("tpl")
    text = bonsai.rotated_config(mtp_num_hidden_layers=1)
    vision.write_hf_dir(d / "hf", text, vision.config(out_hidden_size=text["hidden_size"]))
    convert(d / "hf", d / "tpl.ninfer", recipe="groupwise-int", components=["text", "vision", "mtp"], workers=1)
    convert(d / "hf", d / "fused.ninfer", recipe="nvfp4", workers=1)
    return d


def test_template_produces_text_and_borrows_the_rest(made, template, tmp_path):
    d, _ = made
    out = tmp_path / "bonsai.ninfer"
    result = convert(d / "rot.gguf", out, recipe="ternary", template=template / "tpl.ninfer", workers=1)
    s = result.summary()
    assert set(s["produced"]["by_prefix"]) == {"text"}
    assert set(s["borrowed"]["by_prefix"]) == {"vision", "mtp", "frontend"}
    with open_artifact(out) as art, open_artifact(template / "tpl.ninfer") as tpl:
        payload = sum(o.bytes for o in art.objects)
        assert s["produced"]["bytes"] + s["borrowed"]["bytes"] == s["total_bytes"] == payload
        assert sum(v["bytes"] for v in s["borrowed"]["by_prefix"].values()) == s["borrowed"]["bytes"]
        tpl_ids = [o.id for o in tpl.objects]
        ids = [o.id for o in art.objects]
        assert ids[:len(tpl_ids)] == tpl_ids  # the template is the skeleton, in its order
        assert ids[len(tpl_ids):] == ["text/hadamard_signs", "text/hadamard_widths"]  # appended
        for o in art.objects:
            if o.id.startswith(("vision/", "mtp/", "frontend/")):
                assert art.object_bytes(o.id) == tpl.object_bytes(o.id), o.id
            elif o.id.startswith("text/layers/") and o.id.endswith(("query_key", "gate_up")):
                assert o.format == "t2_g128_fp16" and tpl.object(o.id).format == "q4_g64_fp16"
        assert set(art.components) == {"text", "vision", "mtp"}
        assert art.bindings["mtp/output_head"] == art.bindings["text/output_head"]
        head = {u.parameter: u for u in art.uses}
        # the borrowed MTP head reads the rotated text head: it rotates its input with the same signs
        assert head["mtp/output_head"].auxiliaries["hadamard_signs"] == head["text/output_head"].auxiliaries[
            "hadamard_signs"]
    assert not [f for f in validate(out) if f.severity == "ERROR"]


def test_wrong_kind_template_is_refused_before_writing(made, template, tmp_path):
    d, _ = made
    with pytest.raises(ConversionError, match=r"the template is a nvfp4 artifact; the ternary recipe packs a ternary "
                       r"source onto a groupwise-int template"):
        convert(d / "rot.gguf", tmp_path / "x.ninfer", recipe="ternary", template=template / "fused.ninfer")
    assert list(tmp_path.iterdir()) == []


def test_only_layer_3_is_the_minimal_artifact(tmp_path):
    g = bonsai.write_gguf(tmp_path / "rot4.gguf", CFG4, rotated=True)
    result = convert(g, tmp_path / "layer3.ninfer", recipe="ternary", only_layer=3, workers=1)
    ids = [r["id"] for r in result.object_rows()]
    assert all(i.startswith(("text/layers/3/", "frontend/", "text/hadamard_")) for i in ids)
    assert "text/layers/3/attention/query_key" in ids and "text/hadamard_signs" in ids
    stored = bonsai.stored_parameters(CFG4, rotated=True)
    signs = bonsai.hadamard_signs(CFG4)
    with open_artifact(tmp_path / "layer3.ninfer") as art:
        for name in ("text/layers/3/attention/query", "text/layers/3/mlp/down"):
            w = stored[name]
            want = (bonsai.fwht(w) * signs[w.shape[-1]]).astype(np.float32)  # the generator's un-rotation
            assert np.array_equal(logical_array(art, name, w.shape), want), name
    assert not [f for f in validate(tmp_path / "layer3.ninfer") if f.severity == "ERROR"]


# --- the metadata rules ---------------------------------------------------------------------------------

def write_rotated(path, **changes) -> object:
    """A minimal GGUF: two F32 matrices and prism.hadamard.* (``changes``: key → value, None removes)."""
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(path, "qwen35")
    keys = {"block_size": (1024, gguf.GGUFValueType.UINT32), "transform": ("normalized-sylvester-walsh-hadamard", None),
            "axis": ("input-last-dimension", None), "sign_widths": ([1024, 2048], gguf.GGUFValueType.INT32),
            "sign_values": ([1] * 1024 + [-1] * 2048, gguf.GGUFValueType.INT32),
            "weight_names": (["a.weight", "b.weight"], None), "inverse_weight_names": (["c.weight"], None),
            "gdn_v_grouped": (True, None)}
    for k, v in changes.items():
        keys[k] = (v, keys.get(k, (None, None))[1])
    for k, (v, sub) in keys.items():
        if v is None:
            continue
        if isinstance(v, list):
            w.add_array(f"prism.hadamard.{k}", v) if sub is None else w.add_key_value(
                f"prism.hadamard.{k}", v, gguf.GGUFValueType.ARRAY, sub_type=sub)
        elif isinstance(v, bool):
            w.add_bool(f"prism.hadamard.{k}", v)
        elif isinstance(v, str):
            w.add_string(f"prism.hadamard.{k}", v)
        else:
            w.add_uint32(f"prism.hadamard.{k}", v)
    for name, k in (("a.weight", 1024), ("b.weight", 2048), ("c.weight", 1024)):
        w.add_tensor(name, rng.standard_normal((4, k)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_valid_table(tmp_path):
    src = open_source(write_rotated(tmp_path / "ok.gguf"))
    try:
        rot = read_rotation(src)
        assert rot.widths == (1024, 2048) and rot.offset(2048) == 1024
        assert rot.mode("a.weight") == "forward" and rot.mode("c.weight") == "inverse" and rot.mode("x") is None
        assert np.array_equal(rot.signs_for(2048), -np.ones(2048, np.float32))
        with pytest.raises(ConversionError, match="input width 3072 has no sign vector"):
            rot.signs_for(3072)
    finally:
        src.close()


@pytest.mark.parametrize("changes, rule, text", [
    ({"block_size": 512}, "hadamard_block_size", "512, but storage-layouts §7 rotates 1024-blocks"),
    ({"transform": "dct"}, "hadamard_transform", "'dct', expected 'normalized-sylvester-walsh-hadamard'"),
    ({"sign_values": [1] * 3071}, "hadamard_sign_count", "has 3071 values, sign_widths sum to 3072"),
    ({"sign_values": [1] * 3071 + [0]}, "hadamard_sign_value", "value 3071 is 0, not +1 or -1"),
    ({"sign_widths": [1024, 1000]}, "hadamard_widths", "must be positive multiples of 1024"),
    ({"weight_names": ["a.weight", "zz.weight"]}, "hadamard_names", "names zz.weight, which the file does not have"),
    ({"inverse_weight_names": ["a.weight"]}, "hadamard_names", "a.weight is also in weight_names"),
    ({"sign_widths": [2048, 1024], "weight_names": ["a.weight"]}, None, None),
    ({"weight_names": None}, "hadamard_metadata_missing", "weight_names: is missing"),
    ({"shuffle": "yes"}, "hadamard_metadata_unknown", "shuffle: unknown key"),
])
def test_metadata_rules(tmp_path, changes, rule, text):
    src = open_source(write_rotated(tmp_path / "m.gguf", **changes))
    try:
        if rule is None:
            assert read_rotation(src).offset(1024) == 2048  # order of sign_widths is kept
            return
        with pytest.raises(ConversionError) as err:
            read_rotation(src)
        assert err.value.rule == rule and text in err.value.message
        assert err.value.file.endswith("m.gguf") and err.value.json_path.startswith("metadata.prism.hadamard.")
    finally:
        src.close()


def test_tiled_rotated_gdn_output_is_refused(tmp_path):
    """A rotated file that says gdn_v_grouped = false would need input_columns and hadamard_signs on one
    use: refused when the architecture is detected, naming the key."""
    path = tmp_path / "tiled.gguf"

    def meta(w):
        bonsai.qwen35.add_metadata(w, CFG, None, "tiled")
        for key, (value, vtype, sub) in bonsai.rotation_metadata(CFG).items():
            if key.endswith("gdn_v_grouped"):
                value = False
            w.add_key_value(key, value, vtype, sub_type=sub)

    bonsai.gguf_writer.write_gguf_file(path, "qwen35", meta, bonsai.gguf_tensors(CFG))
    with pytest.raises(ConversionError, match="prism.hadamard.gdn_v_grouped is False") as err:
        convert(path, tmp_path / "x.ninfer", recipe="ternary")
    assert err.value.rule == "bonsai_v_grouped"


def test_a_recipe_cannot_rotate_an_already_rotated_source(made, tmp_path):
    d, _ = made
    recipe = tmp_path / "rotating.yaml"
    recipe.write_text(_ternary_with_hadamard())
    with pytest.raises(ConversionError, match=r"is stored Hadamard-rotated \(prism.hadamard.weight_names\), but "
                                              r"the recipe rotates role mlp.down as well") as err:
        convert(d / "rot.gguf", tmp_path / "x.ninfer", recipe=recipe)
    assert err.value.rule == "hadamard_source" and not (tmp_path / "x.ninfer").exists()


def _ternary_with_hadamard() -> str:
    from converters.mapping.recipes import RECIPES_DIR

    text = (RECIPES_DIR / "ternary.yaml").read_text().replace("name: ternary\n", "name: ternary-rotating\n")
    return text.replace('  norm: {format: bf16}\n', '  norm: {format: bf16}\n'
                        '  mlp.down: {format: t2_g128_fp16, hadamard: true}\n') + "hadamard_seed: 7\n"
