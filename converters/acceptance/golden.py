"""Golden numerics: a numpy reference forward pass of the registered text architectures (Qwen2/Qwen2.5, Qwen3,
Qwen3-VL, Qwen3.5, dense and mixture-of-experts).

``forward(config, params, tokens)`` runs the text model of a *normalised* config (``components.text.config``)
over a few tokens from the logical
parameters of the shared contract (``text/token_embedding``, ``text/layers/{l}/attention/query``,
``text/layers/{l}/gdn/a_log``, …; HF values and HF order) and returns the logits ``[T, V]``;
``compare_logits`` reports top-1 agreement, max absolute error and cosine. ``convert verify`` runs
it on the source weights and on an artifact's decoded bindings (its golden-forward gate). Computation is in
float64 by default so the reference itself adds no rounding worth measuring. The model's conventions come
from its text architecture module (``converters.model.architectures``, found by ``model_type``, else
``architectures``): its ``GOLDEN`` :class:`~converters.model.architectures._family.Family` says which optional
parts the one code path below uses (zero-centred norms, gated query, q/k norms, q/k/v biases, hybrid
layers, the sparse MoE block and its routing defaults). The geometry and layer kinds are the architecture's
``Args`` (strict: a missing or mistyped field is an error, rule ``golden_config``); the config itself gives
only ``rms_norm_eps`` and the RoPE parameters. This module keeps no table of families and reads no config
field with a default of its own: transformers' defaults are applied once, by the config normaliser.

Semantics, as read in transformers (``models/qwen3_5/modeling_qwen3_5.py`` @009e78d6, ``models/qwen3``):

- RMSNorm ``x̂ = x / sqrt(mean(x²) + eps)``: Qwen3 ``w·x̂``; Qwen3.5 zero-centred ``x̂·(1+w)`` for the
  layer norms, final norm and ``q_norm``/``k_norm`` (``Qwen3_5RMSNorm``); the gated delta net's norm is
  ``w·x̂·silu(z)`` per value head (``Qwen3_5RMSNormGated``).
- Decoder layer: ``h += mixer(norm_in(h))``; ``h += down(silu(gate(x))·up(x))`` with
  ``x = norm_post(h)``; logits ``= norm_final(h) @ head.T`` (head = embedding when tied).
- Full attention: q/k/v projections (``x @ Wᵀ + b`` where the family has q/k/v biases), per-head
  ``q_norm``/``k_norm`` on ``head_dim`` (where the family has them), RoPE on the first
  ``rotary_dim = int(head_dim·partial_rotary_factor)`` dims of each head with ``rotate_half``
  (pairs ``i`` and ``i + rotary_dim/2``), ``inv_freq = theta^(-2i/rotary_dim)``; GQA head ``h`` reads
  KV head ``h // (heads/kv_heads)``; causal softmax of ``q·k/sqrt(head_dim)``; Qwen3.5 multiplies the
  result by ``sigmoid(gate)`` (``gate`` = the second half of each head's ``q_proj`` rows) before
  ``o_proj``. A config with ``rope_parameters.mrope_section`` (Qwen3.5, Qwen3-VL) takes its angles from
  interleaved mRoPE over three equal text position streams (:mod:`converters.acceptance.mrope`), which are
  plain RoPE's angles.
- Gated delta net (``Qwen3_5GatedDeltaNet``, ``torch_recurrent_gated_delta_rule``): ``[q|k|v]``
  projections → causal depthwise conv1d (kernel ``k``, left zero padding ``k-1``) → SiLU; ``beta =
  sigmoid(b)``; ``g = -exp(A_log)·softplus(a + dt_bias)``; q and k L2-normalised per head
  (``x·rsqrt(Σx² + 1e-6)``) and repeated so value head ``j`` reads key head ``j // (Hv/Hk)``
  (``repeat_interleave``: grouped value heads); ``q /= sqrt(dk)``; per head with state
  ``S [dk, dv] = 0``: ``S ← S·exp(g_t)``, ``δ = β_t(v_t − Sᵀk_t)``, ``S ← S + k_t δᵀ``, ``o_t = Sᵀq_t``;
  then the gated norm with ``z`` and ``out_proj``. transformers' chunked kernel computes the same
  recurrence.
- Qwen3-Next (``models/qwen3_next/modular_qwen3_next.py`` @043bb8dd) has the Qwen3.5 conventions:
  ``Qwen3NextRMSNorm`` is ``Gemma3RMSNorm`` (zero-centred, also as ``q_norm``/``k_norm``),
  ``Qwen3NextRMSNormGated`` is ``w·x̂·silu(z)``, ``Qwen3NextAttention`` chunks each head's ``q_proj`` rows
  into ``[query | gate]`` and multiplies by ``sigmoid(gate)``, plain partial RoPE (``partial_rotary_factor``
  default 0.25), the same gated delta rule (l2norm eps 1e-6, ``q·dk^-½``, ``g = -exp(A_log)·softplus(a +
  dt_bias)``); only its fused ``in_proj_qkvz``/``in_proj_ba`` differ, split by the mapping into the
  contract's names. Qwen3.5-MoE's mixers are Qwen3.5's (``Qwen3_5MoeGatedDeltaNet``) and Qwen3-Next's.
- Sparse MoE block (transformers ``Qwen3MoeSparseMoeBlock``, ``models/qwen3_moe/modeling_qwen3_moe.py``
  @00d4b3d2; Qwen3-Next: ``Qwen2MoeSparseMoeBlock`` with ``Qwen2MoeTopKRouter``, ``models/qwen2_moe/
  modular_qwen2_moe.py`` @001f85b3; Qwen3.5-MoE: the Qwen3-Next block with ``Qwen3VLMoeTextTopKRouter``,
  ``models/qwen3_5_moe/modular_qwen3_5_moe.py`` @0960594c, ``models/qwen3_vl_moe/modular_qwen3_vl_moe.py``
  @02e8340b): ``p = softmax(x @ routerᵀ)`` over all experts, the ``num_experts_per_tok`` largest kept
  (``torch.topk``; ties here go to the lower expert index), renormalised to sum 1 when ``norm_topk_prob``
  (Qwen3-MoE: config, transformers default False; Qwen3-Next: config, default True; Qwen3.5-MoE: always —
  its config deletes the field and its router divides unconditionally); ``y = Σ_k p_k·SwiGLU_e_k(x)`` with
  each expert's gate/up of ``moe_intermediate_size``; Qwen3-Next and Qwen3.5-MoE add
  ``sigmoid(x @ shared_expert_gateᵀ)·SwiGLU_shared(x)`` (``shared_expert_intermediate_size``). A layer is
  sparse iff it is not in ``mlp_only_layers`` and ``(l + 1) % decoder_sparse_step == 0``
  (``Qwen3MoeDecoderLayer``, ``Qwen3NextDecoderLayer``; the other layers keep the dense MLP of
  ``intermediate_size``, logical ``mlp/*``); every Qwen3.5-MoE layer is sparse
  (``Qwen3_5MoeDecoderLayer``). Only the experts some token is routed to are read, so memory stays near
  one expert's matrices however many experts a layer has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from converters.acceptance import mrope
from converters.errors import ConversionError
from converters.model import architectures
from converters.model.architectures._family import MoeKind

L2NORM_EPS = 1e-6
HEAD_ROWS = 16384


def _config_error(field: str, message: str) -> ConversionError:
    return ConversionError(message, json_path=f"config.{field}", rule="golden_config")


def _number(cfg: Mapping, field: str, where: Mapping | None = None) -> float:
    """``where[field]`` (default: ``cfg``) as a float; a typed error naming the field when absent or not a number."""
    value = (cfg if where is None else where).get(field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _config_error(field, "required field missing" if value is None else f"expected a number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class MoeSpec:
    """The sparse blocks of a mixture-of-experts model: which layers, the experts, and the routing rule."""

    layers: frozenset[int]
    num_experts: int
    top_k: int
    intermediate_size: int
    shared_intermediate_size: int  # 0: no shared expert (Qwen3-MoE)
    norm_topk_prob: bool

    @classmethod
    def from_args(cls, cfg: Mapping, kind: MoeKind, args, sparse: frozenset[int]) -> MoeSpec:
        """The block of an architecture's ``Args`` (experts, widths), its sparse layers and the config's
        ``norm_topk_prob`` (the family's default where the config has none; None: always renormalised)."""
        norm = kind.norm_topk_default
        if norm is not None:
            norm = cfg.get("norm_topk_prob", norm)
            if not isinstance(norm, bool):
                raise _config_error("norm_topk_prob", f"expected a boolean, got {norm!r}")
        return cls(layers=sparse, num_experts=args.num_experts, top_k=args.num_experts_per_tok,
                   intermediate_size=args.moe_intermediate_size,
                   shared_intermediate_size=args.shared_expert_intermediate_size if kind.shared_expert else 0,
                   norm_topk_prob=True if norm is None else norm)


@dataclass(frozen=True)
class TextSpec:
    """The dimensions and conventions the forward pass needs, read from an HF text config."""

    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rotary_dim: int
    tie_word_embeddings: bool
    attn_output_gate: bool
    zero_centred_norms: bool
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    moe: MoeSpec | None = None
    qk_norm: bool = True
    qkv_bias: bool = False
    architecture: str = ""  # the text architecture module (converters.model.architectures) it came from
    mrope_section: tuple[int, ...] = ()  # interleaved mRoPE (rope_parameters.mrope_section), empty: plain RoPE

    def sparse(self, layer: int) -> bool:
        """Whether ``layer``'s feed-forward block is the sparse MoE block (else the dense MLP)."""
        return self.moe is not None and layer in self.moe.layers

    def head_table(self) -> dict[str, tuple[int, list[tuple[int, int]]]]:
        """The architecture's head structure for this geometry (its module's ``heads``); empty when unknown."""
        return architectures.module(self.architecture).heads(self) if self.architecture else {}

    @classmethod
    def from_config(cls, config: Mapping) -> TextSpec:
        """The spec of a normalised text config (``components.text.config``: HF field names, every field the
        converter's config rules fill in): the architecture module by ``model_type`` (else ``architectures``),
        its ``Args`` for the geometry and layer kinds, its ``GOLDEN`` family for the conventions, and from the
        config only ``rms_norm_eps`` and the RoPE parameters. Nothing is defaulted here; an error (rule
        ``golden_config``) names the missing or invalid field."""
        cfg = config.get("text_config") or config
        arch = architectures.for_model_type(cfg.get("model_type", ""), config.get("architectures"))
        if arch is None:
            known = ", ".join(m.NAME for m in architectures.text_modules() if not hasattr(m, "detect"))
            raise _config_error("model_type", f"golden forward supports the text architectures {known}, not "
                                f"{cfg.get('model_type')!r} / {config.get('architectures')!r}")
        try:
            args = arch.Args.from_config(dict(cfg), file="config")
        except ConversionError as exc:
            raise ConversionError(exc.message, json_path=exc.json_path, rule="golden_config") from None
        return cls.from_args(cfg, arch, args)

    @classmethod
    def from_args(cls, cfg: Mapping, arch, args) -> TextSpec:
        """The spec of architecture module ``arch`` with its ``args``; ``cfg`` gives ``rms_norm_eps`` and the RoPE
        theta and rotary fraction (``rope_parameters`` or, as older configs keep them, the top level; the
        family's rotary fraction where neither states one)."""
        fam = arch.GOLDEN
        rope = cfg.get("rope_parameters") or {}
        theta = _number(cfg, "rope_theta", rope if "rope_theta" in rope else cfg)
        partial = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", fam.partial_rotary_factor))
        kinds = list(args.layer_kinds())
        mixers = tuple(k.removesuffix("_moe").removesuffix("_dense") for k in kinds)
        if set(mixers) - {"full_attention", "linear_attention"}:
            raise _config_error("layer_types", f"expected full_attention/linear_attention layers, got {kinds}")
        sparse = frozenset(n for n, k in enumerate(kinds) if fam.moe and not k.endswith("_dense"))
        moe = MoeSpec.from_args(cfg, fam.moe, args, sparse) if fam.moe else None
        head_dim = args.head_dim
        hybrid = {f: getattr(args, f) for f in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                                "linear_value_head_dim", "linear_conv_kernel_dim")
                  if "linear_attention" in mixers}
        spec = cls(
            family=fam.name, architecture=arch.NAME, qk_norm=fam.qk_norm, qkv_bias=fam.qkv_bias,
            vocab_size=args.vocab_size, hidden_size=args.hidden_size, moe=moe,
            intermediate_size=getattr(args, "intermediate_size", 0) if len(sparse) < len(kinds) else 0,
            layer_types=mixers, num_heads=args.num_attention_heads, num_kv_heads=args.num_key_value_heads,
            head_dim=head_dim, rms_norm_eps=_number(cfg, "rms_norm_eps"), rope_theta=theta,
            rotary_dim=int(head_dim * _number({"partial_rotary_factor": partial}, "partial_rotary_factor")),
            tie_word_embeddings=args.tie_word_embeddings, attn_output_gate=fam.attn_output_gate,
            zero_centred_norms=fam.zero_centred_norms, mrope_section=tuple(rope.get("mrope_section") or ()), **hybrid)
        if spec.rotary_dim % 2 or not 0 <= spec.rotary_dim <= head_dim:
            raise _config_error("rope_parameters.partial_rotary_factor", f"rotary dim {spec.rotary_dim} invalid")
        return spec


# ---- building blocks (each one formula of the module docstring) -----------------------------------

def silu(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) → inf for very negative x: x / inf = −0, the limit
        return x / (1.0 + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float, *, zero_centred: bool) -> np.ndarray:
    normed = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return normed * (1.0 + weight) if zero_centred else normed * weight


def gated_rms_norm(x: np.ndarray, weight: np.ndarray, z: np.ndarray, eps: float) -> np.ndarray:
    return rms_norm(x, weight, eps, zero_centred=False) * silu(z)


def l2_normalize(x: np.ndarray, eps: float = L2NORM_EPS) -> np.ndarray:
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def rope(x: np.ndarray, positions: np.ndarray, rotary_dim: int, theta: float,
         mrope_section: Sequence[int] = ()) -> np.ndarray:
    """Rotate the first ``rotary_dim`` dims of every head of ``x [T, heads, head_dim]`` at text ``positions``
    (with ``mrope_section``: interleaved mRoPE of three equal position streams)."""
    if rotary_dim == 0:
        return x
    half = rotary_dim // 2
    inv_freq = 1.0 / theta ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    if mrope_section:
        freqs = mrope.interleaved_frequencies(np.broadcast_to(positions, (3, len(positions))), inv_freq,
                                              mrope_section)
    else:
        freqs = positions[:, None].astype(np.float64) * inv_freq[None, :]
    cos = np.cos(np.concatenate([freqs, freqs], axis=-1))[:, None, :].astype(x.dtype)  # angles in float64, the
    sin = np.sin(np.concatenate([freqs, freqs], axis=-1))[:, None, :].astype(x.dtype)  # rotation in x's dtype
    rot = x[..., :rotary_dim]
    rotated_half = np.concatenate([-rot[..., half:], rot[..., :half]], axis=-1)
    return np.concatenate([rot * cos + rotated_half * sin, x[..., rotary_dim:]], axis=-1)


def attention(x: np.ndarray, w: Mapping[str, np.ndarray], spec: TextSpec, positions: np.ndarray) -> np.ndarray:
    """Causal (gated) GQA attention of ``x [T, H]``; ``w`` keyed by the ``attention/*`` leaf names."""
    t, nh, nkv, hd = x.shape[0], spec.num_heads, spec.num_kv_heads, spec.head_dim
    zc, eps = spec.zero_centred_norms, spec.rms_norm_eps

    def project(name: str, heads: int) -> np.ndarray:
        y = x @ w[name].T + w[name + "_bias"] if spec.qkv_bias else x @ w[name].T
        return y.reshape(t, heads, hd)

    q, k, v = project("query", nh), project("key", nkv), project("value", nkv)
    if spec.qk_norm:
        q = rms_norm(q, w["query_norm"], eps, zero_centred=zc)
        k = rms_norm(k, w["key_norm"], eps, zero_centred=zc)
    q = rope(q, positions, spec.rotary_dim, spec.rope_theta, spec.mrope_section)
    k = rope(k, positions, spec.rotary_dim, spec.rope_theta, spec.mrope_section)
    k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
    scores = np.einsum("thd,shd->hts", q, k) / math.sqrt(hd)  # a Python float keeps x's dtype
    scores = np.where(np.tri(t, dtype=bool)[None], scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = np.einsum("hts,shd->thd", probs, v).reshape(t, nh * hd)
    if spec.attn_output_gate:
        out = out * sigmoid(x @ w["gate"].T)
    return out @ w["output"].T


def causal_conv1d(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Depthwise causal conv of ``x [T, C]`` with ``weight [C, k]``: ``y_t = Σ_j w_j · x_{t-k+1+j}``."""
    t, k = x.shape[0], weight.shape[1]
    padded = np.concatenate([np.zeros((k - 1, x.shape[1]), x.dtype), x], axis=0)
    return sum(weight[:, j][None, :] * padded[j : j + t] for j in range(k))


def delta_rule(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Gated delta rule over time for ``q, k [T, Hv, dk]``, ``v [T, Hv, dv]``, ``g, beta [T, Hv]``."""
    state = np.zeros((q.shape[1], q.shape[2], v.shape[2]), dtype=v.dtype)
    out = np.empty_like(v)
    for t in range(q.shape[0]):
        state = state * np.exp(g[t])[:, None, None]
        delta = (v[t] - np.einsum("hkv,hk->hv", state, k[t])) * beta[t][:, None]
        state = state + k[t][:, :, None] * delta[:, None, :]
        out[t] = np.einsum("hkv,hk->hv", state, q[t])
    return out


def gated_delta_net(x: np.ndarray, w: Mapping[str, np.ndarray], spec: TextSpec) -> np.ndarray:
    """The Qwen3.5 linear-attention mixer of ``x [T, H]``; ``w`` keyed by the ``gdn/*`` leaf names."""
    t = x.shape[0]
    hk, hv = spec.linear_num_key_heads, spec.linear_num_value_heads
    dk, dv = spec.linear_key_head_dim, spec.linear_value_head_dim
    mixed = np.concatenate([x @ w["query"].T, x @ w["key"].T, x @ w["value"].T], axis=1)
    mixed = silu(causal_conv1d(mixed, w["conv1d"]))
    q = l2_normalize(mixed[:, : hk * dk].reshape(t, hk, dk))
    k = l2_normalize(mixed[:, hk * dk : 2 * hk * dk].reshape(t, hk, dk))
    v = mixed[:, 2 * hk * dk :].reshape(t, hv, dv)
    q = np.repeat(q, hv // hk, axis=1) / math.sqrt(dk)
    k = np.repeat(k, hv // hk, axis=1)
    beta = sigmoid(x @ w["b"].T)
    g = -np.exp(w["a_log"]) * np.logaddexp(0.0, x @ w["a"].T + w["dt_bias"])
    core = delta_rule(q, k, v, g, beta)
    z = (x @ w["z"].T).reshape(t, hv, dv)
    return gated_rms_norm(core, w["norm"], z, spec.rms_norm_eps).reshape(t, hv * dv) @ w["output"].T


def swiglu_mlp(x: np.ndarray, gate, up, down) -> np.ndarray:
    """``down(silu(gate(x))·up(x))``; each weight an array or a function giving it, called when the product
    needs it (so that one of the three matrices is in memory at a time)."""
    a = silu(x @ _value(gate).T)
    a *= x @ _value(up).T
    return a @ _value(down).T


def _value(w) -> np.ndarray:
    return w() if callable(w) else w


def route(logits: np.ndarray, top_k: int, normalise: bool) -> tuple[np.ndarray, np.ndarray]:
    """(experts ``[T, k]``, weights ``[T, k]``): softmax over the router logits ``[T, E]``, the ``k`` most probable
    experts in descending order (ties: lower index first), their probabilities renormalised when ``normalise``."""
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    experts = np.argsort(-probs, axis=-1, kind="stable")[:, :top_k]
    weights = np.take_along_axis(probs, experts, axis=-1)
    return experts, (weights / weights.sum(axis=-1, keepdims=True) if normalise else weights)


def sparse_moe(x: np.ndarray, p: Callable[[str], np.ndarray], prefix: str, moe: MoeSpec) -> np.ndarray:
    """The sparse MoE block of ``x [T, H]``; ``p(name)`` gives ``{prefix}router``, ``{prefix}experts/{e}/*``, … ."""
    experts, weights = route(x @ p(prefix + "router").T, moe.top_k, moe.norm_topk_prob)
    out = np.zeros_like(x)
    for e in np.unique(experts):  # only routed experts are read; a token takes each expert at most once
        tokens, slot = np.nonzero(experts == e)
        w = f"{prefix}experts/{e}/"
        out[tokens] += weights[tokens, slot][:, None] * swiglu_mlp(x[tokens], *_getters(p, w))
    if moe.shared_intermediate_size:
        shared = swiglu_mlp(x, *_getters(p, prefix + "shared_expert/"))
        out += sigmoid(x @ p(prefix + "shared_expert_gate").T) * shared
    return out


def _getters(p: Callable[[str], np.ndarray], prefix: str) -> tuple[Callable[[], np.ndarray], ...]:
    """The ``gate``, ``up`` and ``down`` weights under ``prefix``, each read when called."""
    return tuple((lambda n=prefix + leaf: p(n)) for leaf in ("gate", "up", "down"))


# ---- the model -------------------------------------------------------------------------------------

def parameter_shapes(spec: TextSpec) -> dict[str, tuple[int, ...]]:
    """Every logical parameter the forward pass reads, with its expected shape."""
    v, h, i = spec.vocab_size, spec.hidden_size, spec.intermediate_size
    nh, nkv, hd = spec.num_heads, spec.num_kv_heads, spec.head_dim
    shapes: dict[str, tuple[int, ...]] = {"text/token_embedding": (v, h), "text/final_norm": (h,)}
    if not spec.tie_word_embeddings:
        shapes["text/output_head"] = (v, h)
    for layer, kind in enumerate(spec.layer_types):
        p = f"text/layers/{layer}"
        shapes |= {f"{p}/input_norm": (h,), f"{p}/post_attention_norm": (h,)}
        if spec.sparse(layer):
            shapes |= moe_shapes(spec, f"{p}/moe")
        else:
            shapes |= {f"{p}/mlp/gate": (i, h), f"{p}/mlp/up": (i, h), f"{p}/mlp/down": (h, i)}
        if kind == "full_attention":
            a = f"{p}/attention"
            shapes |= {f"{a}/query": (nh * hd, h), f"{a}/key": (nkv * hd, h), f"{a}/value": (nkv * hd, h),
                       f"{a}/output": (h, nh * hd)}
            if spec.qk_norm:
                shapes |= {f"{a}/query_norm": (hd,), f"{a}/key_norm": (hd,)}
            if spec.qkv_bias:
                shapes |= {f"{a}/query_bias": (nh * hd,), f"{a}/key_bias": (nkv * hd,), f"{a}/value_bias": (nkv * hd,)}
            if spec.attn_output_gate:
                shapes[f"{a}/gate"] = (nh * hd, h)
        else:
            g = f"{p}/gdn"
            hk, hv = spec.linear_num_key_heads, spec.linear_num_value_heads
            kd, vd = hk * spec.linear_key_head_dim, hv * spec.linear_value_head_dim
            shapes |= {f"{g}/query": (kd, h), f"{g}/key": (kd, h), f"{g}/value": (vd, h), f"{g}/z": (vd, h),
                       f"{g}/b": (hv, h), f"{g}/a": (hv, h), f"{g}/conv1d": (2 * kd + vd, spec.linear_conv_kernel_dim),
                       f"{g}/dt_bias": (hv,), f"{g}/a_log": (hv,), f"{g}/norm": (spec.linear_value_head_dim,),
                       f"{g}/output": (h, vd)}
    return shapes


def moe_shapes(spec: TextSpec, prefix: str) -> dict[str, tuple[int, ...]]:
    """The parameters of one sparse block under ``prefix`` (``text/layers/{l}/moe``) with their shapes."""
    h, moe = spec.hidden_size, spec.moe
    i, si = moe.intermediate_size, moe.shared_intermediate_size
    shapes = {f"{prefix}/router": (moe.num_experts, h)}
    for e in range(moe.num_experts):
        shapes |= {f"{prefix}/experts/{e}/gate": (i, h), f"{prefix}/experts/{e}/up": (i, h),
                   f"{prefix}/experts/{e}/down": (h, i)}
    if si:
        shapes |= {f"{prefix}/shared_expert/gate": (si, h), f"{prefix}/shared_expert/up": (si, h),
                   f"{prefix}/shared_expert/down": (h, si), f"{prefix}/shared_expert_gate": (1, h)}
    return shapes


class _Parameters:
    """Checked, converted access to the logical parameters, one at a time (a layer's worth in memory)."""

    def __init__(self, params: Mapping[str, np.ndarray], spec: TextSpec, dtype: np.dtype) -> None:
        self.params, self.dtype, self.shapes = params, dtype, parameter_shapes(spec)
        missing = [name for name in self.shapes if name not in params]
        if missing:
            raise ConversionError(f"logical parameter missing ({len(missing)} in all)", json_path=missing[0],
                                  rule="golden_parameter")
        if spec.tie_word_embeddings and "text/output_head" not in params:
            self.shapes["text/output_head"] = self.shapes["text/token_embedding"]
            self.params = {**params, "text/output_head": params["text/token_embedding"]}
        elif "text/output_head" in params:
            self.shapes["text/output_head"] = self.shapes["text/token_embedding"]

    def raw(self, name: str) -> np.ndarray:
        value = self.params[name]
        if tuple(value.shape) != self.shapes[name]:
            raise ConversionError(f"shape {list(value.shape)}, expected {list(self.shapes[name])}", json_path=name,
                                  rule="golden_parameter")
        return value

    def __call__(self, name: str) -> np.ndarray:
        return np.asarray(self.raw(name)).astype(self.dtype, copy=False)

    def leaves(self, prefix: str) -> dict[str, np.ndarray]:
        return {name[len(prefix):]: self(name) for name in self.shapes if name.startswith(prefix)}


def forward(config: Mapping, params: Mapping[str, np.ndarray], tokens: Sequence[int],
            *, dtype: type = np.float64, layers: Sequence[int] | None = None,
            progress: Callable[[int], None] | None = None,
            observe: Callable[[int, np.ndarray], None] | None = None) -> np.ndarray:
    """Logits ``[len(tokens), vocab_size]`` of the text model at positions ``0..T-1``.

    ``layers``: run only these decoder layers, in this order (a truncated forward, docs/acceptance.md §Golden
    at scale: the embedding, the listed layers, the final norm and the head); default every layer.
    ``progress(n)`` is called after each layer and after the head with the number of steps done;
    ``observe(layer, h)`` after each layer with its output hidden states ``[T, H]``."""
    spec = TextSpec.from_config(config)
    run = range(len(spec.layer_types)) if layers is None else list(layers)
    if any(not 0 <= n < len(spec.layer_types) for n in run):
        raise ConversionError(f"layers {list(run)} outside 0..{len(spec.layer_types) - 1}", json_path="layers",
                              rule="golden_layers")
    p = _Parameters(params, spec, np.dtype(dtype))
    ids = np.asarray(tokens, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= spec.vocab_size:
        raise ConversionError(f"tokens must be 1..n ids in [0, {spec.vocab_size})", json_path="tokens",
                              rule="golden_tokens")
    positions = np.arange(ids.size)
    zc, eps = spec.zero_centred_norms, spec.rms_norm_eps
    h = np.asarray(p.raw("text/token_embedding")[ids]).astype(p.dtype)
    for done, layer in enumerate(run, 1):
        kind, pre = spec.layer_types[layer], f"text/layers/{layer}/"
        x = rms_norm(h, p(pre + "input_norm"), eps, zero_centred=zc)
        if kind == "full_attention":
            h = h + attention(x, p.leaves(pre + "attention/"), spec, positions)
        else:
            h = h + gated_delta_net(x, p.leaves(pre + "gdn/"), spec)
        x = rms_norm(h, p(pre + "post_attention_norm"), eps, zero_centred=zc)
        if spec.sparse(layer):
            h = h + sparse_moe(x, p, pre + "moe/", spec.moe)
        else:
            h = h + swiglu_mlp(x, *_getters(p, pre + "mlp/"))
        if observe is not None:
            observe(layer, h)
        if progress is not None:
            progress(done)
    h = rms_norm(h, p("text/final_norm"), eps, zero_centred=zc)
    head = p.raw("text/output_head")
    logits = np.empty((ids.size, spec.vocab_size), dtype=p.dtype)
    for start in range(0, spec.vocab_size, HEAD_ROWS):  # bounded memory for large vocabularies
        logits[:, start : start + HEAD_ROWS] = h @ np.asarray(head[start : start + HEAD_ROWS]).astype(p.dtype,
                                                                                                     copy=False).T
    if progress is not None:
        progress(len(run) + 1)
    return logits


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two arrays seen as flat vectors, in float64 (two zero arrays: 1.0; one: 0.0)."""
    a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    denom = np.linalg.norm(a64) * np.linalg.norm(b64)
    return float(np.dot(a64, b64) / denom) if denom > 0 else float(np.array_equal(a64, b64))


def compare_logits(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """``top1_agreement`` (fraction of positions whose argmax agrees), ``max_abs_error``, ``cosine``."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape or a64.ndim != 2:
        raise ValueError(f"logits must be two [T, V] arrays of one shape, got {a64.shape} and {b64.shape}")
    return {
        "top1_agreement": float(np.mean(a64.argmax(axis=-1) == b64.argmax(axis=-1))),
        "max_abs_error": float(np.max(np.abs(a64 - b64))),
        "cosine": cosine(a64, b64),
    }
