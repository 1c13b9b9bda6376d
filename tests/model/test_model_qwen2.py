"""Qwen2 / Qwen2.5 (``Qwen2ForCausalLM``, GGUF ``qwen2``) end to end: registry, config rules from GGUF and HF,
conversions with ``exact`` and ``groupwise-int`` that decode to the generator's values (q/k/v biases included),
``verify --sweep`` on every gate, seeded defects caught by the gate meant for them, and the golden forward
with biases against a scalar-loop reference. Two configs: Qwen2-like (tied head, ``rope_parameters`` theta 1e6)
and Qwen2.5-like (untied, top-level ``rope_theta`` 1e4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from converters.acceptance import golden
from converters.acceptance.gates.decode import ArtifactRows
from converters.acceptance.gates.verify import verify
from converters.model import architectures
from converters.model.components import supported_by
from converters.model.config_normalize import normalize_text_config
from converters.sources import open_source
from ninfer_core import open_artifact
from tests.support.gates import converted, rewrite, swap_blocks
from tinymodels import qwen2

CFG2 = qwen2.config()
CFG25 = qwen2.config_qwen25()
HD = qwen2.head_dim(CFG2)
BIASES = ("query_bias", "key_bias", "value_bias")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2")
    return {"q2_gguf": qwen2.write_gguf(d / "q2.gguf", CFG2, seed=1),
            "q2_hf": qwen2.write_hf_dir(d / "q2-hf", CFG2, seed=1),
            "q25_gguf": qwen2.write_gguf(d / "q25.Q8_0.gguf", CFG25, seed=2, matrix_type="Q8_0"),
            "q25_hf": qwen2.write_hf_dir(d / "q25-hf", CFG25, seed=2, dtype="f32")}


@pytest.fixture(scope="module")
def arts(src, tmp_path_factory):
    d = tmp_path_factory.mktemp("qwen2-arts")
    return {(name, recipe): converted(src[name], d / f"{name}-{recipe}.ninfer", recipe)
            for name in src for recipe in ("exact", "groupwise-int")}


def reference(name: str) -> dict[str, np.ndarray]:
    return qwen2.logical_parameters(CFG2 if name.startswith("q2_") else CFG25, seed=1 if name.startswith("q2_") else 2)


# --- registry and config ---------------------------------------------------------------------------------------

def test_the_registry_finds_qwen2_by_hf_architecture_gguf_architecture_and_model_type():
    mod = architectures.module("qwen2")
    assert "qwen2" in architectures.ARCHITECTURE_MODULES
    assert architectures.for_config(CFG2) is mod
    assert architectures.for_config({}, gguf_architecture="qwen2") is mod
    assert architectures.for_model_type("qwen2") is mod
    assert supported_by(mod) == ()
    assert mod.GOLDEN.qkv_bias and not mod.GOLDEN.qk_norm and not mod.GOLDEN.zero_centred_norms


@pytest.mark.parametrize("name", ["q2_gguf", "q2_hf", "q25_gguf", "q25_hf"])
def test_config_rules_read_qwen2_and_qwen25_from_gguf_and_hf(src, name):
    cfg = CFG2 if name.startswith("q2_") else CFG25
    with open_source(src[name]) as s:
        got = normalize_text_config(s)
    assert got["architectures"] == ["Qwen2ForCausalLM"] and got["model_type"] == "qwen2"
    assert got["head_dim"] == HD == 32  # no head_dim in the config: hidden_size / num_attention_heads
    assert got["tie_word_embeddings"] is cfg["tie_word_embeddings"]
    assert got["rope_parameters"]["rope_theta"] == (1e6 if name.startswith("q2_") else 1e4)
    for field in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                  "num_key_value_heads", "vocab_size"):
        assert got[field] == cfg[field], field


# --- conversions -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["exact", "groupwise-int"])
@pytest.mark.parametrize("name", ["q2_gguf", "q2_hf", "q25_gguf", "q25_hf"])
def test_decoded_values_equal_the_generator_biases_included(arts, name, recipe):
    ref = reference(name)
    with open_artifact(arts[name, recipe]) as art:
        bound = set(art.directory.to_json()["bindings"])
        assert {f"text/layers/{n}/attention/{b}" for n in range(3) for b in BIASES} <= bound
        assert "text/layers/0/attention/query_norm" not in bound
        if CFG2["tie_word_embeddings"] and name.startswith("q2_") and "text/output_head" not in bound:
            del ref["text/output_head"]  # a tied head may be left out (it reads the embedding)
        for pname, want in ref.items():
            got = ArtifactRows(art, pname, want.shape).array()
            # bf16-exact generator values: kept exactly unless a matrix is quantised (Q8_0 source, groupwise-int)
            if want.ndim == 1 or (recipe == "exact" and name != "q25_gguf"):
                np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=pname)
            else:
                cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
                assert cos > 0.99, pname


@pytest.mark.parametrize("name", ["q2_gguf", "q2_hf", "q25_gguf", "q25_hf"])
def test_verify_sweep_passes_every_gate(src, arts, name):
    for recipe in ("exact", "groupwise-int"):
        r = verify(arts[name, recipe], src[name], sweep=True)
        assert [(g.number, g.status) for g in r.gates] == [(n, "pass") for n in range(1, 8)], (name, recipe)
        assert r.layers == [0, 1, 2]


def test_verify_without_source_covers_the_biases(arts):
    r = verify(arts["q25_hf", "groupwise-int"])
    assert [r.gate(n).status for n in (1, 2, 3)] == ["pass"] * 3


def failing(report) -> dict[int, set[str]]:
    return {g.number: {i.code for i in g.issues if i.severity == "ERROR"} for g in report.gates if g.status == "fail"}


@pytest.mark.parametrize("oid", ["text/layers/0/attention/key_bias", "text/layers/2/attention/query_bias"])
def test_swapped_bias_heads_are_an_order_failure(src, arts, tmp_path, oid):
    bad = rewrite(arts["q25_hf", "exact"], tmp_path / "bias.ninfer", edit={oid: lambda x: swap_blocks(x, 0, 1, HD)})
    r = verify(bad, src["q25_hf"])
    assert "VERIFY_HEAD_ORDER" in failing(r)[5]
    moved = next(i for i in r.gate(5).issues if i.code == "VERIFY_HEAD_ORDER")
    assert moved.path == oid
    assert {(m["head"], m["matches"]) for m in moved.detail["moved"]} == {(0, 1), (1, 0)}
    assert set(failing(r)) <= {4, 5, 7}


def test_swapped_query_heads_fail_order_and_golden_numerics(src, arts, tmp_path):
    oid = "text/layers/0/attention/query"
    bad = rewrite(arts["q2_hf", "exact"], tmp_path / "q.ninfer", edit={oid: lambda x: swap_blocks(x, 0, 1, HD)})
    r = verify(bad, src["q2_hf"])
    fails = failing(r)
    assert "VERIFY_HEAD_ORDER" in fails[5] and fails[7] == {"VERIFY_GOLDEN_LOGITS"}
    assert set(fails) <= {4, 5, 7}


# --- golden forward with biases ----------------------------------------------------------------------------------

def loop_qwen2(cfg, p, tokens):
    """Qwen2 in scalar loops: plain RMSNorm, q/k/v with bias, full NEOX RoPE, GQA, SwiGLU, tied or untied head."""
    eps, nh, nkv = cfg["rms_norm_eps"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta"))
    hd = cfg["hidden_size"] // nh
    p = {k: np.asarray(v, np.float64).tolist() for k, v in p.items()}

    def norm(vec, w):
        r = math.sqrt(sum(e * e for e in vec) / len(vec) + eps)
        return [vec[i] / r * w[i] for i in range(len(vec))]

    def lin(vec, m, b=None):
        return [sum(vec[i] * row[i] for i in range(len(vec))) + (b[o] if b else 0.0) for o, row in enumerate(m)]

    def rotate(vec, pos):
        out = list(vec)
        for i in range(hd // 2):
            ang = pos * theta ** (-2 * i / hd)
            a, b = vec[i], vec[i + hd // 2]
            out[i], out[i + hd // 2] = a * math.cos(ang) - b * math.sin(ang), b * math.cos(ang) + a * math.sin(ang)
        return out

    h = [list(p["text/token_embedding"][t]) for t in tokens]
    for layer in range(cfg["num_hidden_layers"]):
        a = f"text/layers/{layer}/attention/"
        x = [norm(row, p[f"text/layers/{layer}/input_norm"]) for row in h]
        q = [lin(r, p[a + "query"], p[a + "query_bias"]) for r in x]
        k = [lin(r, p[a + "key"], p[a + "key_bias"]) for r in x]
        v = [lin(r, p[a + "value"], p[a + "value_bias"]) for r in x]
        q = [[rotate(q[t][j * hd:(j + 1) * hd], t) for j in range(nh)] for t in range(len(x))]
        k = [[rotate(k[t][j * hd:(j + 1) * hd], t) for j in range(nkv)] for t in range(len(x))]
        for t in range(len(x)):
            cat = []
            for j in range(nh):
                g = j // (nh // nkv)
                s = [sum(q[t][j][d] * k[u][g][d] for d in range(hd)) / math.sqrt(hd) for u in range(t + 1)]
                e = [math.exp(z - max(s)) for z in s]
                cat += [sum(e[u] / sum(e) * v[u][g * hd + d] for u in range(t + 1)) for d in range(hd)]
            h[t] = [h[t][i] + o for i, o in enumerate(lin(cat, p[a + "output"]))]
        m = f"text/layers/{layer}/mlp/"
        for t in range(len(h)):
            y = norm(h[t], p[f"text/layers/{layer}/post_attention_norm"])
            gate, up = lin(y, p[m + "gate"]), lin(y, p[m + "up"])
            act = [gv / (1 + math.exp(-gv)) * u for gv, u in zip(gate, up, strict=True)]
            h[t] = [h[t][i] + o for i, o in enumerate(lin(act, p[m + "down"]))]
    head = p["text/output_head"] if "text/output_head" in p else p["text/token_embedding"]
    return np.array([lin(norm(row, p["text/final_norm"]), head) for row in h])


@pytest.mark.parametrize("cfg", [CFG2, CFG25], ids=["qwen2-tied", "qwen25-untied"])
def test_golden_forward_with_biases_matches_a_scalar_loop(cfg):
    small = {**cfg, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "vocab_size": 11,
             "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8}  # normalised: head_dim stated
    shapes = golden.parameter_shapes(golden.TextSpec.from_config(small))
    assert {n for n in shapes if n.endswith("_bias")} == {f"text/layers/{i}/attention/{b}" for i in (0, 1)
                                                          for b in BIASES}
    assert not any(n.endswith("_norm") and "/attention/" in n for n in shapes)
    rng = np.random.default_rng(5)
    params = {n: rng.standard_normal(s) * (0.5 if n.endswith("_bias") else 0.1 if len(s) == 1 else 1 / math.sqrt(s[-1]))
              + (1.0 if n.endswith("norm") else 0.0) for n, s in shapes.items()}
    tokens = [3, 7, 1]
    want = loop_qwen2(small, params, tokens)
    np.testing.assert_allclose(golden.forward(small, params, tokens), want, rtol=1e-9, atol=1e-12)
    no_bias = {n: (np.zeros_like(v) if n.endswith("_bias") else v) for n, v in params.items()}
    assert golden.compare_logits(want, golden.forward(small, no_bias, tokens))["max_abs_error"] > 0.05
