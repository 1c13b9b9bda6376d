"""converters.acceptance.golden on the tinymodels checkpoints: invariance to presentation, sensitivity to order."""

from __future__ import annotations

import json

import ml_dtypes  # noqa: F401  (registers numpy bfloat16 for safetensors' numpy backend)
import numpy as np
import pytest
from safetensors import safe_open

from converters.acceptance import golden
from converters.errors import ConversionError
from tinymodels import qwen3, qwen35

TOKENS = [5, 77, 300, 352, 9, 128]


@pytest.fixture(scope="module")
def q35():
    cfg = qwen35.config()
    params = qwen35.logical_parameters(cfg)
    return cfg, params, golden.forward(cfg, params, TOKENS)


def logical_from_hf_dir(path, cfg) -> dict[str, np.ndarray]:
    """The contract's logical parameters read straight from the HF files (independent of tinymodels)."""
    hf = {}
    for name in set(json.loads((path / "model.safetensors.index.json").read_text())["weight_map"].values()):
        with safe_open(path / name, framework="np") as f:
            hf.update({k: f.get_tensor(k).astype(np.float32) for k in f.keys()})
    nh, hd, kd = cfg["num_attention_heads"], cfg["head_dim"], cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
    out = {"text/token_embedding": hf["model.embed_tokens.weight"], "text/output_head": hf["lm_head.weight"],
           "text/final_norm": hf["model.norm.weight"]}
    for layer, kind in enumerate(cfg["layer_types"]):
        m, q = f"model.layers.{layer}.", f"text/layers/{layer}/"
        out |= {q + "input_norm": hf[m + "input_layernorm.weight"],
                q + "post_attention_norm": hf[m + "post_attention_layernorm.weight"],
                **{q + f"mlp/{p}": hf[m + f"mlp.{p}_proj.weight"] for p in ("gate", "up", "down")}}
        if kind == "full_attention":
            qg = hf[m + "self_attn.q_proj.weight"].reshape(nh, 2 * hd, -1)
            out |= {q + "attention/query": qg[:, :hd].reshape(nh * hd, -1),
                    q + "attention/gate": qg[:, hd:].reshape(nh * hd, -1),
                    **{q + f"attention/{p}": hf[m + f"self_attn.{p[0]}_proj.weight"] for p in ("key", "value", "output")},
                    q + "attention/query_norm": hf[m + "self_attn.q_norm.weight"],
                    q + "attention/key_norm": hf[m + "self_attn.k_norm.weight"]}
        else:
            a = m + "linear_attn."
            qkv = hf[a + "in_proj_qkv.weight"]
            out |= {q + "gdn/query": qkv[:kd], q + "gdn/key": qkv[kd : 2 * kd], q + "gdn/value": qkv[2 * kd :],
                    q + "gdn/z": hf[a + "in_proj_z.weight"], q + "gdn/b": hf[a + "in_proj_b.weight"],
                    q + "gdn/a": hf[a + "in_proj_a.weight"], q + "gdn/conv1d": hf[a + "conv1d.weight"].squeeze(1),
                    q + "gdn/dt_bias": hf[a + "dt_bias"], q + "gdn/a_log": hf[a + "A_log"],
                    q + "gdn/norm": hf[a + "norm.weight"], q + "gdn/output": hf[a + "out_proj.weight"]}
    return out


def test_parameter_names_match_the_generators_contract(q35):
    cfg, params, _ = q35
    assert set(golden.parameter_shapes(golden.TextSpec.from_config(cfg))) == set(params)
    assert all(params[n].shape == s for n, s in golden.parameter_shapes(golden.TextSpec.from_config(cfg)).items())
    q3cfg = qwen3.config()
    q3names = set(golden.parameter_shapes(golden.TextSpec.from_config(q3cfg)))
    assert q3names | {"text/output_head"} == set(qwen3.logical_parameters(q3cfg))  # tied: head optional


def test_forward_is_invariant_to_how_parameters_are_presented(q35, tmp_path):
    cfg, _, logits = q35
    from_hf = golden.forward(cfg, logical_from_hf_dir(qwen35.write_hf_dir(tmp_path / "hf", cfg), cfg), TOKENS)
    np.testing.assert_array_equal(from_hf, logits)
    assert logits.shape == (len(TOKENS), 512) and logits.dtype == np.float64 and np.isfinite(logits).all()
    f32 = golden.compare_logits(logits, golden.forward(cfg, qwen35.logical_parameters(cfg), TOKENS, dtype=np.float32))
    assert f32["top1_agreement"] == 1.0 and f32["cosine"] > 1 - 1e-9 and f32["max_abs_error"] < 1e-4


def _swap_heads(x: np.ndarray, head_rows: int, i: int, j: int, axis: int = 0) -> np.ndarray:
    moved = np.moveaxis(x, axis, 0).copy()
    a, b = moved[i * head_rows : (i + 1) * head_rows].copy(), moved[j * head_rows : (j + 1) * head_rows].copy()
    moved[i * head_rows : (i + 1) * head_rows], moved[j * head_rows : (j + 1) * head_rows] = b, a
    return np.moveaxis(moved, 0, axis)


DEFECTS = {
    "gdn value heads swapped": lambda p: {"text/layers/0/gdn/value": _swap_heads(p["text/layers/0/gdn/value"], 32, 0, 1)},
    "gdn value heads left tiled": lambda p: {
        "text/layers/4/gdn/value": qwen35.grouped_to_tiled(p["text/layers/4/gdn/value"], 0, 2, 2, 32)},
    "gdn out_proj columns tiled": lambda p: {
        "text/layers/1/gdn/output": qwen35.grouped_to_tiled(p["text/layers/1/gdn/output"], 1, 2, 2, 32)},
    "attention query heads swapped": lambda p: {
        "text/layers/3/attention/query": _swap_heads(p["text/layers/3/attention/query"], 32, 1, 2)},
    "query and gate not de-interleaved": lambda p: {
        "text/layers/7/attention/query": np.concatenate([p["text/layers/7/attention/query"][:64],
                                                         p["text/layers/7/attention/gate"][:64]])},
    "norm shift left in": lambda p: {"text/layers/2/input_norm": p["text/layers/2/input_norm"] + 1},
    "ssm_norm shifted": lambda p: {"text/layers/2/gdn/norm": p["text/layers/2/gdn/norm"] - 1},
    "ssm_a not inverted": lambda p: {"text/layers/5/gdn/a_log": -np.exp(p["text/layers/5/gdn/a_log"])},
    "mlp rows swapped": lambda p: {"text/layers/6/mlp/up": _swap_heads(p["text/layers/6/mlp/up"], 1, 3, 4)},
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_forward_is_sensitive_to_each_seeded_defect(q35, defect):
    cfg, params, logits = q35
    changed = golden.forward(cfg, {**params, **DEFECTS[defect](params)}, TOKENS)
    report = golden.compare_logits(logits, changed)
    assert report["max_abs_error"] > 0.05, report


def test_qwen3_tied_head_may_be_omitted():
    cfg = qwen3.config()
    params = qwen3.logical_parameters(cfg)
    with_head = golden.forward(cfg, params, TOKENS)
    without = golden.forward(cfg, {k: v for k, v in params.items() if k != "text/output_head"}, TOKENS)
    np.testing.assert_array_equal(with_head, without)
    swapped = golden.forward(cfg, {**params, "text/layers/0/attention/key": _swap_heads(
        params["text/layers/0/attention/key"], 32, 0, 1)}, TOKENS)
    assert golden.compare_logits(with_head, swapped)["max_abs_error"] > 0.05


def test_compare_logits_known_values():
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    b = np.array([[0.5, 0.0], [1.0, 0.0]])
    report = golden.compare_logits(a, b)
    assert report["top1_agreement"] == 0.5 and report["max_abs_error"] == 1.0
    assert report["cosine"] == pytest.approx(0.5 / (np.sqrt(2) * np.sqrt(1.25)))
    assert golden.compare_logits(a, a) == {"top1_agreement": 1.0, "max_abs_error": 0.0, "cosine": pytest.approx(1.0)}
    with pytest.raises(ValueError, match="shape"):
        golden.compare_logits(a, a[:1])


def test_bad_inputs_are_typed_errors_naming_the_field(q35):
    cfg, params, _ = q35
    missing = {k: v for k, v in params.items() if k != "text/layers/4/gdn/a_log"}
    with pytest.raises(ConversionError, match="text/layers/4/gdn/a_log"):
        golden.forward(cfg, missing, TOKENS)
    bad_shape = {**params, "text/layers/3/attention/gate": params["text/layers/3/attention/gate"][:-1]}
    with pytest.raises(ConversionError, match="attention/gate: shape"):
        golden.forward(cfg, bad_shape, TOKENS)
    with pytest.raises(ConversionError, match="tokens"):
        golden.forward(cfg, params, [0, 512])
    with pytest.raises(ConversionError, match="config.model_type"):
        golden.forward({**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}, params, TOKENS)
    with pytest.raises(ConversionError, match="config.linear_num_value_heads"):
        golden.forward({k: v for k, v in cfg.items() if k != "linear_num_value_heads"}, params, TOKENS)
