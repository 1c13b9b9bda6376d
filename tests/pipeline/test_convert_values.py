"""Converted artifacts hold the right values in the right order, per object and per head.

References: ``tinymodels`` (the generator's float values, HF order) and ``expected_parameters`` (the
source's own values after the mapped transforms). A comparison that only looks at sizes or global norms
passes on swapped heads (docs/ternary.md §5), so every head-structured parameter is also checked head by head:
each decoded head must be closest to the reference head of the same index.
"""

from __future__ import annotations

import numpy as np
import pytest

from converters.model.engine import expected_parameters, logical_array
from converters.pipeline.convert import convert
from ninfer_core import open_artifact, validate
from tinymodels import qwen3, qwen35

CFG35 = qwen35.config()
CFG3 = qwen3.config()
REF35 = qwen35.logical_parameters(CFG35)
REF3 = qwen3.logical_parameters(CFG3)
RECIPES = ("bf16", "groupwise-int", "nvfp4", "fp8-row", "exact")
# worst cosine accepted per recipe against the generator's values (tiny uniform random weights)
MIN_COSINE = {"bf16": 0.9995, "exact": 0.9995, "fp8-row": 0.998, "groupwise-int": 0.99, "nvfp4": 0.97}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    qwen35.write_gguf(d / "q35.Q8_0.gguf", CFG35, matrix_type="Q8_0")
    qwen35.write_gguf(d / "q35.F32.gguf", CFG35, matrix_type="F32")
    qwen35.write_hf_dir(d / "q35-hf", CFG35)
    qwen3.write_gguf(d / "q3.Q8_0.gguf", CFG3, matrix_type="Q8_0")
    qwen3.write_hf_dir(d / "q3-hf", CFG3)
    return d


@pytest.fixture(scope="module")
def artifacts(models, tmp_path_factory):
    out = tmp_path_factory.mktemp("artifacts")
    cache = {}

    def get(source: str, recipe: str):
        key = (source, recipe)
        if key not in cache:
            path = out / f"{source}.{recipe}.ninfer"
            cache[key] = (path, convert(models / source, path, recipe=recipe, workers=2))
        return cache[key]

    return get


def heads(name: str, cfg: dict) -> tuple[int, int] | None:
    """(axis, number of heads) of a head-structured logical parameter."""
    kind = name.split("/", 3)[-1]
    table = {
        "attention/query": (0, cfg["num_attention_heads"]), "attention/gate": (0, cfg["num_attention_heads"]),
        "attention/key": (0, cfg["num_key_value_heads"]), "attention/value": (0, cfg["num_key_value_heads"]),
        "attention/output": (1, cfg["num_attention_heads"]),
    }
    if "linear_num_value_heads" in cfg:
        hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        table.update({"gdn/query": (0, hk), "gdn/key": (0, hk), "gdn/value": (0, hv), "gdn/z": (0, hv),
                      "gdn/b": (0, hv), "gdn/a": (0, hv), "gdn/dt_bias": (0, hv), "gdn/a_log": (0, hv),
                      "gdn/output": (1, hv), "gdn/conv1d": (0, 2 * hk + hv)})
    return table.get(kind)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == nb == 0 else float(a @ b / (na * nb))


def head_order_problems(got: np.ndarray, want: np.ndarray, axis: int, n: int) -> list[str]:
    """Heads of ``got`` that are not closest to the same-index head of ``want`` (empty = order right)."""
    g, w = np.split(got, n, axis=axis), np.split(want, n, axis=axis)
    bad = []
    for i, gi in enumerate(g):
        dist = [float(np.linalg.norm(gi.astype(np.float64) - wj)) for wj in w]
        if int(np.argmin(dist)) != i:
            bad.append(f"head {i} is closest to reference head {int(np.argmin(dist))}")
    return bad


def check_against(art, ref: dict, cfg: dict, min_cos: float) -> None:
    assert set(art.bindings) == set(ref), set(art.bindings) ^ set(ref)
    for name, want in ref.items():
        got = logical_array(art, name, want.shape)
        c = cosine(got, want)
        assert c >= min_cos, f"{name}: cosine {c:.6f} < {min_cos}"
        h = heads(name, cfg)
        if h is not None and h[1] > 1:
            assert not head_order_problems(got, want, *h), name


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("source", ["q35.Q8_0.gguf", "q35-hf"])
def test_qwen35_values_per_object_and_head(artifacts, source, recipe):
    path, result = artifacts(source, recipe)
    assert not [f for f in validate(path) if f.severity == "ERROR"]
    with open_artifact(path) as art:
        check_against(art, REF35, CFG35, MIN_COSINE[recipe])
        assert art.provenance["recipe"]["name"] == recipe
        assert art.metadata["identity"]["weights_id"] == recipe
        assert {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                "generation_config.json"} <= set(art.components["text"].resources)
        assert art.components["text"].config["layer_types"] == CFG35["layer_types"]


@pytest.mark.parametrize("recipe", ["groupwise-int", "exact"])
@pytest.mark.parametrize("source", ["q3.Q8_0.gguf", "q3-hf"])
def test_qwen3_dense_values(artifacts, source, recipe):
    path, _ = artifacts(source, recipe)
    with open_artifact(path) as art:
        check_against(art, REF3, CFG3, MIN_COSINE[recipe])
        # tied checkpoint: the head binds the embedding's object, with its own use
        assert art.bindings["text/output_head"] == art.bindings["text/token_embedding"]
        assert any(u.parameter == "text/output_head" and u.input == "text/final_hidden" for u in art.uses)


def test_exact_recipe_is_exact_against_the_source(artifacts, models):
    """exact: every object decodes to the source's own values after the transforms, bit for bit."""
    path, result = artifacts("q35.Q8_0.gguf", "exact")
    counts = result.summary()["exactness"]
    assert "requantized" not in counts
    with open_artifact(path) as art:
        for name, want in expected_parameters(models / "q35.Q8_0.gguf"):
            np.testing.assert_array_equal(logical_array(art, name, want.shape), want, err_msg=name)
        formats = {o.id: o.format for o in art.objects if o.kind == "tensor"}
    assert formats["text/token_embedding"] == "q8_g32_fp16"  # Q8_0 transcoded, not requantized
    assert formats["text/layers/0/gdn/output"] == "q8_g32_fp16"  # V-head columns moved as whole blocks
    assert formats["text/final_norm"] == "fp32"


def test_gguf_and_hf_sources_agree(artifacts):
    """The same model converted from its F32 GGUF and from its HF directory gives the same parameters:
    identical except where llama.cpp's float32 transforms round (norm +1 / -1, -exp / log)."""
    path_g, _ = artifacts("q35.F32.gguf", "bf16")
    path_h, _ = artifacts("q35-hf", "bf16")
    with open_artifact(path_g) as g, open_artifact(path_h) as h:
        assert set(g.bindings) == set(h.bindings)
        for name, want in REF35.items():
            a, b = logical_array(g, name, want.shape), logical_array(h, name, want.shape)
            if name.endswith("a_log"):
                np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=name)
            elif "norm" in name.rsplit("/", 1)[-1] and not name.endswith("gdn/norm"):
                np.testing.assert_allclose(a, b, atol=2 ** -8, err_msg=name)  # one bf16 step at most
            else:
                np.testing.assert_array_equal(a, b, err_msg=name)


def test_a_swapped_head_fails_the_comparison(artifacts):
    """The per-head check catches two swapped V heads although every size and the global norm are right."""
    path, _ = artifacts("q35-hf", "bf16")
    with open_artifact(path) as art:
        got = logical_array(art, "text/layers/0/gdn/value", REF35["text/layers/0/gdn/value"].shape)
    want = REF35["text/layers/0/gdn/value"]
    assert not head_order_problems(got, want, 0, CFG35["linear_num_value_heads"])
    dv = CFG35["linear_value_head_dim"]
    swapped = got.copy()
    swapped[dv:2 * dv], swapped[2 * dv:3 * dv] = got[2 * dv:3 * dv], got[dv:2 * dv]
    assert swapped.shape == want.shape and np.isclose(np.linalg.norm(swapped), np.linalg.norm(want))
    assert head_order_problems(swapped, want, 0, CFG35["linear_num_value_heads"]) == [
        "head 1 is closest to reference head 2", "head 2 is closest to reference head 1"]


def test_provenance_records_sources_transforms_and_error(artifacts):
    path, result = artifacts("q35.Q8_0.gguf", "groupwise-int")
    with open_artifact(path) as art:
        prov = art.provenance
        assert prov["converter"]["name"] == "ninfer-convert" and prov["source"]["kind"] == "gguf"
        assert len(prov["recipe"]["sha256"]) == 64
        value_z = prov["objects"]["text/layers/0/gdn/value_z"]
        assert [p["parameter"] for p in value_z["pieces"]] == ["text/layers/0/gdn/value", "text/layers/0/gdn/z"]
        assert value_z["pieces"][0]["source"] == "blk.0.attn_qkv.weight"
        assert value_z["pieces"][0]["transforms"][1].startswith("v_heads_tiled_to_grouped(")
        assert value_z["exactness"] == "requantized" and 0.99 < value_z["measured_error"]["cosine"] < 1
        emb = prov["objects"]["text/token_embedding"]
        assert emb["exactness"] == "bit-exact" and emb["pieces"][0]["method"] == "transcode"
        norm = prov["objects"]["text/final_norm"]
        assert norm["pieces"][0]["transforms"] == ["unshift_norm()"]
        assert prov["frontend"]["tokenizer.json"]["origin"] == "rebuilt"
        # the query|key parent is bound through row ranges
        qk = art.bindings["text/layers/3/attention/query"].parts[0]
        assert qk.object == "text/layers/3/attention/query_key" and qk.range[0] == 0


def test_nvfp4_falls_back_where_the_shape_does_not_allow_it(artifacts):
    path, result = artifacts("q35-hf", "nvfp4")
    with open_artifact(path) as art:
        objs = {o.id: o for o in art.objects}
        assert objs["text/layers/3/attention/query_key_gate_value"].format == "nvfp4"
        assert objs["text/layers/0/gdn/a_b_projection"].format == "bf16"  # N = 8 rows
        notes = art.provenance["objects"]["text/layers/0/gdn/a_b_projection"]["notes"]
        assert "fallback bf16" in notes[0]


def test_a_mapping_without_the_v_head_rule_is_caught(models, tmp_path):
    """Dropping the tiled → grouped rule from one mapping entry keeps every size right; only the per-head
    comparison notices (the docs/ternary.md §5 failure mode)."""
    from converters.mapping import MAPPINGS_DIR, bind, load_mapping
    from converters.model.architectures import qwen35 as arch
    from converters.model.engine import parameter_values
    from converters.sources import open_source

    rule = ('tensor: "blk.{l}.attn_gate.weight"\n        transforms:\n          - v_heads_tiled_to_grouped: '
            '{num_k_heads: linear_num_key_heads, num_v_heads: linear_num_value_heads, '
            'head_dim: linear_value_head_dim, start: 0}')
    text = (MAPPINGS_DIR / "qwen35.yaml").read_text()
    assert rule in text
    (tmp_path / "qwen35.yaml").write_text(text.replace(rule, 'tensor: "blk.{l}.attn_gate.weight"'))
    with open_source(models / "q35.F32.gguf") as src:
        for mapping, broken in ((load_mapping(MAPPINGS_DIR / "qwen35.yaml"), False),
                                (load_mapping(tmp_path / "qwen35.yaml"), True)):
            bound = bind([mapping], arch.Args.from_config(CFG35), {"main": src})
            z = parameter_values({"main": src}, bound.parameter("text/layers/0/gdn/z"))
            want = REF35["text/layers/0/gdn/z"]
            assert z.shape == want.shape
            problems = head_order_problems(z, want, 0, CFG35["linear_num_value_heads"])
            assert bool(problems) == broken, problems
