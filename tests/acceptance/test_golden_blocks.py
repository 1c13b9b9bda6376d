"""converters.acceptance.golden building blocks against hand-computed tiny cases (closed forms and scalar loops)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from converters.acceptance import golden
from tests.support.golden_loops import loop_attention, loop_gdn, sig


def spec(**overrides) -> golden.TextSpec:
    cfg = {
        "model_type": "qwen3_5_text", "vocab_size": 6, "hidden_size": 8, "intermediate_size": 4,
        "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 100.0, "partial_rotary_factor": 0.5}, "tie_word_embeddings": False,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 2,
        "linear_value_head_dim": 2, "linear_conv_kernel_dim": 3, "attn_output_gate": True,
    }
    cfg.update(overrides)
    return golden.TextSpec.from_config(cfg)




def test_rms_norms_closed_form():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    w = np.array([0.5, -1.0, 0.0, 2.0])
    r = math.sqrt(7.5 + 1e-6)  # mean of squares = 30 / 4
    plain = [x[i] / r * w[i] for i in range(4)]
    centred = [x[i] / r * (1 + w[i]) for i in range(4)]
    np.testing.assert_allclose(golden.rms_norm(x, w, 1e-6, zero_centred=False), plain, rtol=1e-14)
    np.testing.assert_allclose(golden.rms_norm(x, w, 1e-6, zero_centred=True), centred, rtol=1e-14)
    z = np.array([0.0, 1.0, -2.0, 3.0])
    gated = [x[i] / r * w[i] * z[i] * sig(z[i]) for i in range(4)]
    np.testing.assert_allclose(golden.gated_rms_norm(x, w, z, 1e-6), gated, rtol=1e-14)


def test_l2_normalize_and_swiglu_closed_form():
    np.testing.assert_allclose(golden.l2_normalize(np.array([3.0, 4.0])), [3 / math.sqrt(25 + 1e-6), 4 / math.sqrt(25 + 1e-6)])
    x = np.array([[1.0, -1.0]])
    gate, up, down = np.array([[2.0, 0.0]]), np.array([[0.0, 3.0]]), np.array([[1.0], [-2.0]])
    h = 2.0 * sig(2.0) * -3.0  # silu(2) · (−3)
    np.testing.assert_allclose(golden.swiglu_mlp(x, gate, up, down), [[h, -2 * h]], rtol=1e-14)


def test_partial_rope_rotates_pairs_i_and_i_plus_half():
    x = np.arange(1.0, 2 * 2 * 8 + 1).reshape(2, 2, 8)  # [T, heads, head_dim]
    out = golden.rope(x, np.array([0, 3]), rotary_dim=4, theta=100.0)
    expected = x.copy()
    for t, pos in enumerate([0, 3]):
        for head in range(2):
            for i in range(2):
                angle = pos * 100.0 ** (-2 * i / 4)
                a, b = x[t, head, i], x[t, head, i + 2]
                expected[t, head, i] = a * math.cos(angle) - b * math.sin(angle)
                expected[t, head, i + 2] = b * math.cos(angle) + a * math.sin(angle)
    np.testing.assert_allclose(out, expected, rtol=1e-13)
    np.testing.assert_array_equal(out[0], x[0])  # position 0 is the identity
    np.testing.assert_array_equal(out[..., 4:], x[..., 4:])  # dims past rotary_dim pass through


def test_causal_conv1d_closed_form():
    x = np.array([[1.0], [2.0], [3.0]])
    w = np.array([[10.0, 100.0, 1000.0]])  # taps for x_{t-2}, x_{t-1}, x_t
    np.testing.assert_array_equal(golden.causal_conv1d(x, w)[:, 0], [1000, 100 + 2000, 10 + 200 + 3000])


def test_attention_with_zero_keys_averages_values_and_gates():
    s = spec(hidden_size=8)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8))
    w = {"query": rng.standard_normal((8, 8)), "gate": rng.standard_normal((8, 8)), "key": np.zeros((4, 8)),
         "value": rng.standard_normal((4, 8)), "output": np.eye(8), "query_norm": rng.standard_normal(4),
         "key_norm": rng.standard_normal(4)}
    out = golden.attention(x, w, s, np.arange(2))
    v = x @ w["value"].T  # one KV head shared by both query heads
    gate = 1 / (1 + np.exp(-(x @ w["gate"].T)))
    np.testing.assert_allclose(out[0], np.concatenate([v[0], v[0]]) * gate[0], rtol=1e-12)
    np.testing.assert_allclose(out[1], np.concatenate([(v[0] + v[1]) / 2] * 2) * gate[1], rtol=1e-12)




@pytest.mark.parametrize("family", ["qwen3", "qwen3_5_text"])
def test_attention_matches_scalar_loops(family):
    qwen3 = family == "qwen3"
    s = spec(model_type=family, num_attention_heads=4, num_key_value_heads=2, head_dim=4,
             rope_parameters={"rope_theta": 50.0, **({} if qwen3 else {"partial_rotary_factor": 0.5})})
    assert s.rotary_dim == (4 if qwen3 else 2) and s.attn_output_gate is not qwen3
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 8))
    w = {"query": rng.standard_normal((16, 8)), "gate": rng.standard_normal((16, 8)),
         "key": rng.standard_normal((8, 8)), "value": rng.standard_normal((8, 8)),
         "output": rng.standard_normal((8, 16)), "query_norm": rng.standard_normal(4) * 0.3,
         "key_norm": rng.standard_normal(4) * 0.3}
    expected = loop_attention(x.tolist(), {k: v.tolist() for k, v in w.items()}, 4, 2, 4, s.rotary_dim, 50.0, 1e-6,
                              zero_centred=not qwen3, gated=not qwen3)
    np.testing.assert_allclose(golden.attention(x, w, s, np.arange(3)), expected, rtol=1e-10, atol=1e-12)


def test_delta_rule_two_tokens_closed_form():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 1, 3)), rng.standard_normal((2, 1, 3))
    v = rng.standard_normal((2, 1, 2))
    g, beta = np.array([[-0.3], [-0.7]]), np.array([[0.6], [0.25]])
    out = golden.delta_rule(q, k, v, g, beta)
    q0, q1, k0, k1, v0, v1 = q[0, 0], q[1, 0], k[0, 0], k[1, 0], v[0, 0], v[1, 0]
    o0 = beta[0, 0] * np.dot(k0, q0) * v0  # S₁ = β₀ k₀ v₀ᵀ (decay of the zero state is moot)
    decayed = math.exp(-0.7) * beta[0, 0]  # S ← exp(g₁) S₁
    delta = beta[1, 0] * (v1 - decayed * np.dot(k0, k1) * v0)
    o1 = decayed * np.dot(k0, q1) * v0 + np.dot(k1, q1) * delta
    np.testing.assert_allclose(out[0, 0], o0, rtol=1e-12)
    np.testing.assert_allclose(out[1, 0], o1, rtol=1e-12)


def test_gated_delta_net_one_token_closed_form_and_grouped_value_heads():
    s = spec(hidden_size=8, linear_conv_kernel_dim=4)  # Hk=2, Hv=4, dk=dv=2
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 8))
    w = {"query": rng.standard_normal((4, 8)), "key": rng.standard_normal((4, 8)), "value": rng.standard_normal((8, 8)),
         "z": rng.standard_normal((8, 8)), "b": rng.standard_normal((4, 8)), "a": rng.standard_normal((4, 8)),
         "conv1d": np.tile([0.0, 0.0, 0.0, 1.0], (16, 1)),  # only the current-token tap: conv = identity
         "dt_bias": rng.standard_normal(4), "a_log": rng.standard_normal(4), "norm": np.array([0.7, 1.3]),
         "output": np.eye(8)}
    w["query"][2:] = 0.0  # key head 1 reads nothing: its value heads must output zero
    w["key"][2:] = 0.0
    out = golden.gated_delta_net(x, w, s)[0]

    def silu(e):
        return e * sig(e)

    xs = x[0].tolist()
    qh = [[silu(sum(xs[i] * w["query"][2 * h + d][i] for i in range(8))) for d in range(2)] for h in range(2)]
    kh = [[silu(sum(xs[i] * w["key"][2 * h + d][i] for i in range(8))) for d in range(2)] for h in range(2)]
    for j in range(4):  # value head j reads key head j // 2 (grouped)
        kk = j // 2
        qn = [e / math.sqrt(sum(f * f for f in qh[kk]) + 1e-6) for e in qh[kk]]
        kn = [e / math.sqrt(sum(f * f for f in kh[kk]) + 1e-6) for e in kh[kk]]
        vj = [silu(sum(xs[i] * w["value"][2 * j + d][i] for i in range(8))) for d in range(2)]
        beta = sig(sum(xs[i] * w["b"][j][i] for i in range(8)))
        core = [beta * sum(kn[d] * qn[d] for d in range(2)) / math.sqrt(2) * vj[d] for d in range(2)]
        r = math.sqrt(sum(c * c for c in core) / 2 + 1e-6)
        zj = [sum(xs[i] * w["z"][2 * j + d][i] for i in range(8)) for d in range(2)]
        expected = [w["norm"][d] * core[d] / r * silu(zj[d]) for d in range(2)]
        np.testing.assert_allclose(out[2 * j : 2 * j + 2], expected, rtol=1e-9, atol=1e-15)
        assert (np.abs(out[2 * j : 2 * j + 2]).max() == 0) == (j >= 2)




def test_gated_delta_net_three_tokens_matches_scalar_loops():
    s = spec(hidden_size=6, linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=3,
             linear_value_head_dim=2, linear_conv_kernel_dim=3)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6))
    w = {"query": rng.standard_normal((3, 6)), "key": rng.standard_normal((3, 6)), "value": rng.standard_normal((4, 6)),
         "z": rng.standard_normal((4, 6)), "b": rng.standard_normal((2, 6)), "a": rng.standard_normal((2, 6)),
         "conv1d": rng.standard_normal((10, 3)), "dt_bias": rng.standard_normal(2), "a_log": rng.standard_normal(2),
         "norm": rng.standard_normal(2), "output": rng.standard_normal((6, 4))}
    expected = loop_gdn(x.tolist(), {k: v.tolist() for k, v in w.items()}, 1, 2, 3, 2, 3, 1e-6)
    np.testing.assert_allclose(golden.gated_delta_net(x, w, s), expected, rtol=1e-10, atol=1e-13)


def loop_forward(config, params, tokens):
    """The whole model in scalar loops, composed from the loop blocks above."""
    s = golden.TextSpec.from_config(config)
    p = {k: np.asarray(v, np.float64).tolist() for k, v in params.items()}
    eps, zc = s.rms_norm_eps, s.zero_centred_norms

    def norm(vec, weight):
        r = math.sqrt(sum(e * e for e in vec) / len(vec) + eps)
        return [vec[i] / r * ((1 + weight[i]) if zc else weight[i]) for i in range(len(vec))]

    h = [list(p["text/token_embedding"][t]) for t in tokens]
    for layer, kind in enumerate(s.layer_types):
        pre = f"text/layers/{layer}/"
        x = [norm(row, p[pre + "input_norm"]) for row in h]
        if kind == "full_attention":
            w = {k[len(pre) + 10 :]: v for k, v in p.items() if k.startswith(pre + "attention/")}
            mix = loop_attention(x, w, s.num_heads, s.num_kv_heads, s.head_dim, s.rotary_dim, s.rope_theta, eps, zc,
                                 s.attn_output_gate)
        else:
            w = {k[len(pre) + 4 :]: v for k, v in p.items() if k.startswith(pre + "gdn/")}
            mix = loop_gdn(x, w, s.linear_num_key_heads, s.linear_num_value_heads, s.linear_key_head_dim,
                           s.linear_value_head_dim, s.linear_conv_kernel_dim, eps)
        h = [[h[t][i] + mix[t][i] for i in range(len(h[t]))] for t in range(len(h))]
        x = [norm(row, p[pre + "post_attention_norm"]) for row in h]
        gate, up, down = p[pre + "mlp/gate"], p[pre + "mlp/up"], p[pre + "mlp/down"]
        for t, row in enumerate(x):
            act = []
            for j in range(len(gate)):
                gv = sum(row[i] * gate[j][i] for i in range(len(row)))
                act.append(gv * sig(gv) * sum(row[i] * up[j][i] for i in range(len(row))))
            h[t] = [h[t][o] + sum(act[j] * down[o][j] for j in range(len(act))) for o in range(len(h[t]))]
    head = p.get("text/output_head", p["text/token_embedding"])
    final = [norm(row, p["text/final_norm"]) for row in h]
    return np.array([[sum(row[i] * head[v][i] for i in range(len(row))) for v in range(len(head))] for row in final])


def random_params(config, seed):
    rng = np.random.default_rng(seed)
    shapes = golden.parameter_shapes(golden.TextSpec.from_config(config))
    return {name: rng.standard_normal(shape) * (0.3 if len(shape) == 1 else 1 / math.sqrt(shape[-1]))
            + (1.0 if name.endswith(("norm",)) and config["model_type"] == "qwen3" else 0.0)
            for name, shape in shapes.items()}


@pytest.mark.parametrize("model_type", ["qwen3", "qwen3_5_text"])
def test_small_model_forward_over_two_tokens_matches_scalar_loops(model_type):
    config = {
        "model_type": model_type, "vocab_size": 7, "hidden_size": 8, "intermediate_size": 6,
        "num_hidden_layers": 1 if model_type == "qwen3" else 2, "attn_output_gate": True,
        "layer_types": ["full_attention"] if model_type == "qwen3" else ["linear_attention", "full_attention"],
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 1000.0}, "tie_word_embeddings": model_type == "qwen3",
        "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 4,
        "linear_value_head_dim": 4, "linear_conv_kernel_dim": 4,
    }
    params = random_params(config, 6)
    assert ("text/output_head" in params) is (model_type != "qwen3")
    expected = loop_forward(config, params, [3, 5])
    np.testing.assert_allclose(golden.forward(config, params, [3, 5]), expected, rtol=1e-9, atol=1e-12)
