"""converters.acceptance.golden's sparse MoE block (Qwen3-MoE, Qwen3.5-MoE, Qwen3-Next): hand-computed routing and expert
mixes, whole tiny models against scalar loops, config rules, sensitivity to expert order, invariance to how the
parameters are read."""

from __future__ import annotations

import json
import math

import ml_dtypes  # noqa: F401  (registers numpy bfloat16 for safetensors' numpy backend)
import numpy as np
import pytest
from safetensors import safe_open

from converters.acceptance import golden
from converters.errors import ConversionError
from tests.support.golden_loops import loop_attention, loop_gdn, sig
from tests.support.golden_moe import Recording, routed
from tinymodels import qwen3_moe, qwen3_next, qwen35_moe

# --- one block, two tokens, four experts, top-2: routing and weights by hand -----------------------------------

# x @ routerᵀ: token 0 → [1, 1.5, 3, -0.5] (experts 2 then 1), token 1 → [0, 1.5, -3, 1] (experts 1 then 3);
# expert 1 serves both tokens, expert 0 none.
X = np.array([[1.0, 0.5, -0.5, 0.0], [0.0, -1.0, 0.5, 1.0]])
ROUTER = np.array([[1.0, 0.0, 0.0, 0.0], [1.5, 0.0, 0.0, 1.5], [0.0, 0.0, -6.0, 0.0], [0.0, -1.0, 0.0, 0.0]])
ROUTED = [[2, 1], [1, 3]]
LOGITS = [[1.0, 1.5, 3.0, -0.5], [0.0, 1.5, -3.0, 1.0]]


def block_params(shared: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    p = {"moe/router": ROUTER}
    for e in range(4):
        p |= {f"moe/experts/{e}/gate": rng.standard_normal((2, 4)), f"moe/experts/{e}/up": rng.standard_normal((2, 4)),
              f"moe/experts/{e}/down": rng.standard_normal((4, 2))}
    if shared:
        p |= {"moe/shared_expert/gate": rng.standard_normal((3, 4)), "moe/shared_expert/up": rng.standard_normal((3, 4)),
              "moe/shared_expert/down": rng.standard_normal((4, 3)), "moe/shared_expert_gate": rng.standard_normal((1, 4))}
    return p


def loop_swiglu(x, gate, up, down):
    act = []
    for j in range(len(gate)):
        g = sum(x[i] * gate[j][i] for i in range(len(x)))
        act.append(g * sig(g) * sum(x[i] * up[j][i] for i in range(len(x))))
    return [sum(act[j] * down[o][j] for j in range(len(act))) for o in range(len(down))]


def moe_spec(norm: bool, shared: bool) -> golden.MoeSpec:
    return golden.MoeSpec(layers=frozenset({0}), num_experts=4, top_k=2, intermediate_size=2,
                          shared_intermediate_size=3 if shared else 0, norm_topk_prob=norm)


def test_router_logits_of_the_hand_case():
    np.testing.assert_allclose(X @ ROUTER.T, LOGITS, rtol=0, atol=1e-15)


@pytest.mark.parametrize("norm", [True, False])
def test_route_picks_the_top_two_with_softmax_weights(norm):
    experts, weights = golden.route(np.array(LOGITS), 2, norm)
    assert experts.tolist() == ROUTED
    for t, (first, second) in enumerate(ROUTED):
        z = sum(math.exp(v) for v in LOGITS[t])
        p1, p2 = math.exp(LOGITS[t][first]) / z, math.exp(LOGITS[t][second]) / z
        want = [p1 / (p1 + p2), p2 / (p1 + p2)] if norm else [p1, p2]
        np.testing.assert_allclose(weights[t], want, rtol=1e-14)
    assert np.allclose(weights.sum(axis=1), 1.0) is norm


def test_route_breaks_ties_towards_the_lower_expert():
    experts, weights = golden.route(np.array([[0.5, 2.0, 2.0, 2.0]]), 2, True)
    assert experts.tolist() == [[1, 2]] and weights.tolist() == [[0.5, 0.5]]


@pytest.mark.parametrize("norm, shared", [(True, False), (False, False), (True, True)])
def test_sparse_block_matches_the_hand_routed_mix(norm, shared):
    p = block_params(shared)
    out = golden.sparse_moe(X, lambda n: p[n[len("L/"):]], "L/moe/", moe_spec(norm, shared))
    for t in range(2):
        x = X[t].tolist()
        z = sum(math.exp(v) for v in LOGITS[t])
        probs = [math.exp(LOGITS[t][e]) / z for e in ROUTED[t]]
        if norm:
            probs = [q / sum(probs) for q in probs]
        want = [0.0] * 4
        for e, q in zip(ROUTED[t], probs, strict=True):
            y = loop_swiglu(x, *(p[f"moe/experts/{e}/{k}"].tolist() for k in ("gate", "up", "down")))
            want = [want[o] + q * y[o] for o in range(4)]
        if shared:
            s = loop_swiglu(x, *(p[f"moe/shared_expert/{k}"].tolist() for k in ("gate", "up", "down")))
            g = sig(sum(x[i] * p["moe/shared_expert_gate"][0][i] for i in range(4)))
            want = [want[o] + g * s[o] for o in range(4)]
        np.testing.assert_allclose(out[t], want, rtol=1e-12, atol=1e-14)


def test_unrouted_experts_are_never_read():
    p = block_params(shared=False)
    read = []

    def get(name):
        read.append(name)
        return p[name]

    golden.sparse_moe(X, get, "moe/", moe_spec(True, False))
    assert not any(n.startswith("moe/experts/0/") for n in read)
    assert {n.split("/")[2] for n in read if "/experts/" in n} == {"1", "2", "3"}


# --- whole tiny models over two tokens against scalar loops ---------------------------------------------------

BASE = {"vocab_size": 7, "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
        "rms_norm_eps": 1e-6, "rope_parameters": {"rope_theta": 1000.0}, "tie_word_embeddings": False,
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 3, "linear_num_key_heads": 1,
        "linear_num_value_heads": 2, "linear_key_head_dim": 4, "linear_value_head_dim": 4,
        "linear_conv_kernel_dim": 4, "attn_output_gate": True, "layer_types": ["linear_attention", "full_attention"]}
# normalised configs (converters/model/config_normalize.py): decoder_sparse_step is folded into mlp_only_layers
CONFIGS = {
    "qwen3_moe": {**BASE, "model_type": "qwen3_moe", "num_hidden_layers": 1, "norm_topk_prob": False,
                  "intermediate_size": 5, "mlp_only_layers": [], "layer_types": ["full_attention"]},
    "qwen3_next": {**BASE, "model_type": "qwen3_next", "num_hidden_layers": 2, "mlp_only_layers": [0],
                   "intermediate_size": 5, "shared_expert_intermediate_size": 6},
    "qwen3_5_moe_text": {**BASE, "model_type": "qwen3_5_moe_text", "num_hidden_layers": 2,
                         "shared_expert_intermediate_size": 6},
}


def loop_model(config, params, tokens):
    """The whole model in scalar loops; the sparse block routed by sorting the softmax in plain Python."""
    s = golden.TextSpec.from_config(config)
    p = {k: np.asarray(v, np.float64).tolist() for k, v in params.items()}
    eps, zc = s.rms_norm_eps, s.zero_centred_norms

    def norm(vec, weight):
        r = math.sqrt(sum(e * e for e in vec) / len(vec) + eps)
        return [vec[i] / r * ((1 + weight[i]) if zc else weight[i]) for i in range(len(vec))]

    def leaves(prefix):
        return {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}

    h = [list(p["text/token_embedding"][t]) for t in tokens]
    for layer, kind in enumerate(s.layer_types):
        pre = f"text/layers/{layer}/"
        x = [norm(row, p[pre + "input_norm"]) for row in h]
        if kind == "full_attention":
            mix = loop_attention(x, leaves(pre + "attention/"), s.num_heads, s.num_kv_heads, s.head_dim, s.rotary_dim,
                                 s.rope_theta, eps, zc, s.attn_output_gate)
        else:
            mix = loop_gdn(x, leaves(pre + "gdn/"), s.linear_num_key_heads, s.linear_num_value_heads,
                           s.linear_key_head_dim, s.linear_value_head_dim, s.linear_conv_kernel_dim, eps)
        h = [[h[t][i] + mix[t][i] for i in range(len(h[t]))] for t in range(len(h))]
        x = [norm(row, p[pre + "post_attention_norm"]) for row in h]
        for t, row in enumerate(x):
            if pre + "mlp/gate" in p:
                y = loop_swiglu(row, p[pre + "mlp/gate"], p[pre + "mlp/up"], p[pre + "mlp/down"])
            else:
                m = pre + "moe/"
                logits = [sum(row[i] * r[i] for i in range(len(row))) for r in p[m + "router"]]
                z = sum(math.exp(v) for v in logits)
                ranked = sorted(range(len(logits)), key=lambda e: -logits[e])[: config["num_experts_per_tok"]]
                weights = [math.exp(logits[e]) / z for e in ranked]
                if config["model_type"] != "qwen3_moe":  # Qwen3-Next default True, Qwen3.5-MoE always
                    weights = [w / sum(weights) for w in weights]
                y = [0.0] * len(row)
                for e, w in zip(ranked, weights, strict=True):
                    ye = loop_swiglu(row, *(p[f"{m}experts/{e}/{k}"] for k in ("gate", "up", "down")))
                    y = [y[o] + w * ye[o] for o in range(len(y))]
                if m + "shared_expert_gate" in p:
                    g = sig(sum(row[i] * p[m + "shared_expert_gate"][0][i] for i in range(len(row))))
                    ys = loop_swiglu(row, *(p[f"{m}shared_expert/{k}"] for k in ("gate", "up", "down")))
                    y = [y[o] + g * ys[o] for o in range(len(y))]
            h[t] = [h[t][o] + y[o] for o in range(len(h[t]))]
    final = [norm(row, p["text/final_norm"]) for row in h]
    head = p["text/output_head"]
    return np.array([[sum(row[i] * head[v][i] for i in range(len(row))) for v in range(len(head))] for row in final])


def random_params(config, seed):
    rng = np.random.default_rng(seed)
    shapes = golden.parameter_shapes(golden.TextSpec.from_config(config))
    return {name: rng.standard_normal(shape) * (0.3 if len(shape) == 1 else 1 / math.sqrt(shape[-1]))
            + (1.0 if name.endswith("norm") and config["model_type"] == "qwen3_moe" else 0.0)
            for name, shape in shapes.items()}


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_tiny_moe_models_over_two_tokens_match_scalar_loops(model_type):
    config = CONFIGS[model_type]
    params = random_params(config, 7)
    sparse = {n.split("/")[2] for n in params if "/moe/router" in n}
    assert sparse == ({"1"} if model_type == "qwen3_next" else {str(i) for i in range(config["num_hidden_layers"])})
    assert any("shared_expert_gate" in n for n in params) is (model_type != "qwen3_moe")
    expected = loop_model(config, params, [3, 5])
    np.testing.assert_allclose(golden.forward(config, params, [3, 5]), expected, rtol=1e-9, atol=1e-12)


# --- config rules ------------------------------------------------------------------------------------------------

def test_sparse_layers_and_renormalisation_follow_the_family():
    def moe(**cfg):
        six = {"num_hidden_layers": 6, "layer_types": ["linear_attention", "full_attention"] * 3}
        return golden.TextSpec.from_config({**CONFIGS["qwen3_next"], **six, **cfg}).moe

    assert moe().layers == {1, 2, 3, 4, 5} and moe().norm_topk_prob is True  # mlp_only_layers [0]
    assert moe(mlp_only_layers=[0, 2, 4]).layers == {1, 3, 5}  # decoder_sparse_step 2, folded by the normaliser
    assert moe(mlp_only_layers=[]).layers == set(range(6))
    assert moe(norm_topk_prob=False).norm_topk_prob is False
    q3 = golden.TextSpec.from_config({k: v for k, v in CONFIGS["qwen3_moe"].items() if k != "norm_topk_prob"}).moe
    assert q3.norm_topk_prob is False and q3.shared_intermediate_size == 0  # Qwen3MoeConfig default; no shared
    q35 = golden.TextSpec.from_config({**CONFIGS["qwen3_5_moe_text"], "norm_topk_prob": False, "mlp_only_layers": [0]})
    assert q35.moe.norm_topk_prob is True and q35.moe.layers == {0, 1}  # the field does not exist there
    assert q35.intermediate_size == 0 and q35.zero_centred_norms and q35.attn_output_gate
    nxt = golden.TextSpec.from_config({**CONFIGS["qwen3_next"], "rope_parameters": {"rope_theta": 10.0}})
    assert nxt.rotary_dim == 2 and nxt.zero_centred_norms and nxt.attn_output_gate  # partial 0.25 by default
    for arch, kind in (("Qwen3MoeForCausalLM", 0), ("Qwen3NextForCausalLM", 6), ("Qwen3_5MoeForCausalLM", 6)):
        cfg = {**CONFIGS["qwen3_next"], "architectures": [arch], "model_type": "unknown", "mlp_only_layers": []}
        assert golden.TextSpec.from_config(cfg).moe.shared_intermediate_size == kind


@pytest.mark.parametrize("model_type, change, field", [
    ("qwen3_moe", {"num_experts_per_tok": 5}, "config.num_experts_per_tok"),
    ("qwen3_moe", {"num_experts_per_tok": 0}, "config.num_experts_per_tok"),
    ("qwen3_moe", {"moe_intermediate_size": None}, "config.moe_intermediate_size"),
    ("qwen3_moe", {"num_experts": "many"}, "config.num_experts"),
    ("qwen3_moe", {"intermediate_size": None}, "config.intermediate_size"),  # a dense layer's width
    ("qwen3_moe", {"mlp_only_layers": [1]}, "config.mlp_only_layers"),
    ("qwen3_next", {"layer_types": ["full_attention"]}, "config.layer_types"),
    ("qwen3_next", {"norm_topk_prob": "yes"}, "config.norm_topk_prob"),
    ("qwen3_next", {"shared_expert_intermediate_size": None}, "config.shared_expert_intermediate_size"),
])
def test_bad_moe_configs_are_typed_errors_naming_the_field(model_type, change, field):
    with pytest.raises(ConversionError) as info:
        golden.TextSpec.from_config({**CONFIGS[model_type], **change})
    assert info.value.json_path == field and info.value.rule == "golden_config"


def test_a_missing_expert_is_named():
    config = CONFIGS["qwen3_5_moe_text"]
    params = random_params(config, 1)
    del params["text/layers/1/moe/experts/3/down"]
    with pytest.raises(ConversionError, match="text/layers/1/moe/experts/3/down"):
        golden.forward(config, params, [1, 2])


# --- the tinymodels checkpoints: sensitivity to expert order, invariance to presentation -----------------------

TOKENS = [5, 77]
MODELS = {"qwen3_moe": qwen3_moe, "qwen3_next": qwen3_next, "qwen3_5_moe": qwen35_moe}






def swap_experts(params, layer: int, a: int, b: int, router: bool = False) -> dict[str, np.ndarray]:
    """``params`` with experts ``a`` and ``b`` of ``layer`` exchanged (their router rows too when ``router``)."""
    q = f"text/layers/{layer}/moe/"
    out = dict(params)
    for part in ("gate", "up", "down"):
        out[f"{q}experts/{a}/{part}"], out[f"{q}experts/{b}/{part}"] = params[f"{q}experts/{b}/{part}"], \
            params[f"{q}experts/{a}/{part}"]
    if router:
        rows = params[q + "router"].copy()
        rows[[a, b]] = rows[[b, a]]
        out[q + "router"] = rows
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_swapped_experts_change_the_logits_only_when_routed(name):
    mod = MODELS[name]
    cfg = mod.config()
    params = Recording(mod.logical_parameters(cfg))
    logits = golden.forward(cfg, params, TOKENS)
    layer = cfg["num_hidden_layers"] - 1
    used = routed(params, layer)
    unused = [e for e in range(cfg["num_experts"]) if e not in used]
    assert 2 <= len(used) <= len(TOKENS) * cfg["num_experts_per_tok"] and len(unused) >= 2
    hit = golden.forward(cfg, swap_experts(params, layer, used[0], unused[0]), TOKENS)
    assert golden.compare_logits(logits, hit)["max_abs_error"] > 0.05
    both = golden.forward(cfg, swap_experts(params, layer, used[0], used[1]), TOKENS)
    assert golden.compare_logits(logits, both)["max_abs_error"] > 0.05
    miss = golden.forward(cfg, swap_experts(params, layer, unused[0], unused[1]), TOKENS)
    np.testing.assert_array_equal(miss, logits)
    relabelled = golden.forward(cfg, swap_experts(params, layer, used[0], unused[0], router=True), TOKENS)
    np.testing.assert_allclose(relabelled, logits, rtol=0, atol=1e-12)  # experts are a set: renumbering is moot


@pytest.mark.parametrize("name", ["qwen3_next", "qwen3_5_moe"])
def test_shared_expert_gate_and_router_rows_matter(name):
    mod = MODELS[name]
    cfg = mod.config()
    params = Recording(mod.logical_parameters(cfg))
    logits = golden.forward(cfg, params, TOKENS)
    flipped = {**params, "text/layers/0/moe/shared_expert_gate": -params["text/layers/0/moe/shared_expert_gate"]}
    assert golden.compare_logits(logits, golden.forward(cfg, flipped, TOKENS))["max_abs_error"] > 0.05
    used = routed(params, 0)
    a, b = used[0], next(e for e in range(cfg["num_experts"]) if e not in used)
    rows = params["text/layers/0/moe/router"].copy()
    rows[[a, b]] = rows[[b, a]]  # the router's rows out of order with the experts: other experts are chosen
    assert golden.compare_logits(logits, golden.forward(cfg, {**params, "text/layers/0/moe/router": rows},
                                                        TOKENS))["max_abs_error"] > 0.05


def read_hf_dir(path) -> dict[str, np.ndarray]:
    hf = {}
    for name in set(json.loads((path / "model.safetensors.index.json").read_text())["weight_map"].values()):
        with safe_open(path / name, framework="np") as f:
            hf.update({k: f.get_tensor(k).astype(np.float32) for k in f.keys()})
    return hf


def logical_from_hf(hf: dict[str, np.ndarray], cfg) -> dict[str, np.ndarray]:
    """The contract's logical parameters from HF tensors, read the way transformers reads them (independent of
    tinymodels): q_proj rows per head ``[query | gate]`` (gated families), Qwen3-Next's ``in_proj_qkvz`` /
    ``in_proj_ba`` per key head (``fix_query_key_value_ordering``), experts per expert or from the fused
    ``gate_up_proj [E, 2I, H]`` / ``down_proj [E, H, I]``."""
    nh, hd, e_n, im = cfg["num_attention_heads"], cfg["head_dim"], cfg["num_experts"], cfg["moe_intermediate_size"]
    gated = cfg["model_type"] != "qwen3_moe"
    out = {"text/token_embedding": hf["model.embed_tokens.weight"], "text/output_head": hf["lm_head.weight"],
           "text/final_norm": hf["model.norm.weight"]}
    for layer, kind in enumerate(cfg["layer_types"]):
        m, q = f"model.layers.{layer}.", f"text/layers/{layer}/"
        out |= {q + "input_norm": hf[m + "input_layernorm.weight"],
                q + "post_attention_norm": hf[m + "post_attention_layernorm.weight"]}
        if kind == "full_attention":
            qp = hf[m + "self_attn.q_proj.weight"]
            if gated:
                qg = qp.reshape(nh, 2 * hd, -1)
                qp, out[q + "attention/gate"] = qg[:, :hd].reshape(nh * hd, -1), qg[:, hd:].reshape(nh * hd, -1)
            out |= {q + "attention/query": qp, q + "attention/query_norm": hf[m + "self_attn.q_norm.weight"],
                    q + "attention/key_norm": hf[m + "self_attn.k_norm.weight"],
                    **{q + f"attention/{p}": hf[m + f"self_attn.{p[0]}_proj.weight"] for p in ("key", "value", "output")}}
        else:
            a = m + "linear_attn."
            hk, dk, dv = cfg["linear_num_key_heads"], cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
            r = cfg["linear_num_value_heads"] // hk
            if a + "in_proj_qkvz.weight" in hf:
                g = hf[a + "in_proj_qkvz.weight"].reshape(hk, 2 * dk + 2 * r * dv, -1)
                ba = hf[a + "in_proj_ba.weight"].reshape(hk, 2 * r, -1)
                cuts = np.cumsum([0, dk, dk, r * dv, r * dv])
                qq, kk, vv, zz = (g[:, cuts[i]:cuts[i + 1]].reshape(-1, g.shape[-1]) for i in range(4))
                bb, aa = ba[:, :r].reshape(-1, ba.shape[-1]), ba[:, r:].reshape(-1, ba.shape[-1])
            else:
                qkv, kd = hf[a + "in_proj_qkv.weight"], hk * dk
                qq, kk, vv = qkv[:kd], qkv[kd:2 * kd], qkv[2 * kd:]
                zz, bb, aa = hf[a + "in_proj_z.weight"], hf[a + "in_proj_b.weight"], hf[a + "in_proj_a.weight"]
            out |= {q + "gdn/query": qq, q + "gdn/key": kk, q + "gdn/value": vv, q + "gdn/z": zz, q + "gdn/b": bb,
                    q + "gdn/a": aa, q + "gdn/conv1d": hf[a + "conv1d.weight"].squeeze(1), q + "gdn/dt_bias": hf[a + "dt_bias"],
                    q + "gdn/a_log": hf[a + "A_log"], q + "gdn/norm": hf[a + "norm.weight"],
                    q + "gdn/output": hf[a + "out_proj.weight"]}
        if m + "mlp.gate.weight" not in hf:
            out |= {q + f"mlp/{p}": hf[m + f"mlp.{p}_proj.weight"] for p in ("gate", "up", "down")}
            continue
        out[q + "moe/router"] = hf[m + "mlp.gate.weight"]
        fused = m + "mlp.experts.gate_up_proj" in hf
        for e in range(e_n):
            ex = f"{q}moe/experts/{e}/"
            if fused:
                gu = hf[m + "mlp.experts.gate_up_proj"][e]
                out |= {ex + "gate": gu[:im], ex + "up": gu[im:], ex + "down": hf[m + "mlp.experts.down_proj"][e]}
            else:
                out |= {ex + p: hf[f"{m}mlp.experts.{e}.{p}_proj.weight"] for p in ("gate", "up", "down")}
        if m + "mlp.shared_expert_gate.weight" in hf:
            out |= {q + f"moe/shared_expert/{p}": hf[m + f"mlp.shared_expert.{p}_proj.weight"] for p in ("gate", "up", "down")}
            out[q + "moe/shared_expert_gate"] = hf[m + "mlp.shared_expert_gate.weight"]
    return out


@pytest.mark.parametrize("name, layout, dense", [("qwen3_moe", "fused", [1]), ("qwen3_next", "per_expert", [0]),
                                                 ("qwen3_5_moe", "fused", None)])
def test_forward_is_invariant_to_how_parameters_are_presented(tmp_path, name, layout, dense):
    mod = MODELS[name]
    cfg = mod.config(**({"mlp_only_layers": dense} if dense else {}))
    params = mod.logical_parameters(cfg)
    assert set(params) == set(golden.parameter_shapes(golden.TextSpec.from_config(cfg)))
    logits = golden.forward(cfg, params, TOKENS)
    hf = read_hf_dir(mod.write_hf_dir(tmp_path / "hf", cfg, expert_layout=layout))
    from_hf = logical_from_hf(hf, cfg)
    assert set(from_hf) == set(params)
    np.testing.assert_array_equal(golden.forward(cfg, from_hf, TOKENS), logits)
    assert np.isfinite(logits).all() and logits.shape == (len(TOKENS), cfg["vocab_size"])
    f32 = golden.compare_logits(logits, golden.forward(cfg, params, TOKENS, dtype=np.float32))
    assert f32["top1_agreement"] == 1.0 and f32["max_abs_error"] < 1e-4
