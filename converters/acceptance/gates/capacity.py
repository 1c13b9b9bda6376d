"""``validate`` Gate D, capacity (docs/calbin.md §9 Gate D): parameter bytes by component and format, and the
KV-cache and gated-delta-net state bytes for a service context and batch, from the text config.

KV cache (docs/calbin.md §9 Gate D, the BF16 KV recomputation)::

    kv_bytes = full_attention_layers × num_key_value_heads × 2 (K, V) × head_dim × context × dtype_bytes × batch

with BF16 (2 bytes) as docs/calbin.md §9 Gate D computes. A Qwen3.5 gated delta net layer keeps, per sequence and
independent of the context, a recurrent state of ``linear_num_value_heads × linear_key_head_dim ×
linear_value_head_dim`` values (FP32: the delta rule accumulates in float32) and a convolution state of
``(linear_conv_kernel_dim − 1) × (2·key_dim + value_dim)`` values (BF16). ``context`` defaults to
``max_position_embeddings`` and ``batch`` to 1.
"""

from __future__ import annotations

from collections import defaultdict

from converters.acceptance.gates.codes import finding
from converters.acceptance.report import Finding

KV_DTYPE_BYTES = 2  # BF16
STATE_DTYPE_BYTES = 4  # FP32 recurrent state
CONV_DTYPE_BYTES = 2  # BF16 convolution state


def component_of(art, object_id: str) -> str:
    """The component an object belongs to: its ID's first segment when that is a component, else the
    component whose resource table names it, else ``other``."""
    head = object_id.split("/", 1)[0]
    if head in art.components:
        return head
    for cid, comp in art.components.items():
        if object_id in comp.resources.values():
            return cid
    return "other"


def parameter_bytes(art) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for obj in art.objects:
        out[component_of(art, obj.id)][obj.format or "resource"] += obj.bytes
    return {c: dict(sorted(f.items())) for c, f in sorted(out.items())}


def _int(cfg, name: str) -> int:
    v = cfg.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise KeyError(name)
    return v


def _layer_types(cfg) -> list[str]:
    """``layer_types`` as stated, else every ``full_attention_interval``-th layer full attention when the config
    has linear-attention fields (Qwen3.5, Qwen3-Next), else all full attention (Qwen3, Qwen3-MoE)."""
    n = _int(cfg, "num_hidden_layers")
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and len(kinds) == n:
        return [str(k) for k in kinds]
    if "linear_num_value_heads" in cfg:
        every = _int(cfg, "full_attention_interval")
        return ["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)]
    return ["full_attention"] * n


def kv_cache(config, *, context: int | None, batch: int | None) -> tuple[dict, list[Finding]]:
    """The KV-cache and state figures of a text config (``memory`` section) and Gate D issues.

    Read from the config's HF fields directly (not through an architecture), so every text model with
    full-attention and gated-delta-net layers is sized, dense or MoE."""
    cfg = config.get("text_config") or config
    try:
        kinds = _layer_types(cfg)
        nkv = _int(cfg, "num_key_value_heads")
        hd = cfg.get("head_dim") or _int(cfg, "hidden_size") // _int(cfg, "num_attention_heads")
        linear = kinds.count("linear_attention")
        hk = _int(cfg, "linear_num_key_heads") if linear else 0
        hv = _int(cfg, "linear_num_value_heads") if linear else 0
        dk = _int(cfg, "linear_key_head_dim") if linear else 0
        dv = _int(cfg, "linear_value_head_dim") if linear else 0
        kernel = _int(cfg, "linear_conv_kernel_dim") if linear else 1
    except (KeyError, ZeroDivisionError) as exc:
        return {}, [finding("NINFER_CAP_CONFIG_INCOMPLETE", f"text config field {exc.args[0] if exc.args else ''!s} is "
                          "missing or not a non-negative integer; KV-cache bytes not computed",
                          path="$.components.text.config")]
    issues = []
    max_pos = cfg.get("max_position_embeddings")
    ctx = context if context is not None else max_pos
    if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx <= 0:
        return {}, [finding("NINFER_CAP_CONFIG_INCOMPLETE", "max_position_embeddings is missing and no --context was "
                          "given; KV-cache bytes not computed", path="$.components.text.config")]
    if context is not None and isinstance(max_pos, int) and context > max_pos:
        issues.append(finding("NINFER_CAP_CONTEXT_EXCEEDS", f"--context {context} exceeds max_position_embeddings "
                            f"{max_pos}; the service must cap the context", path="$.components.text.config"))
    b = batch or 1
    full = kinds.count("full_attention")
    kv = full * nkv * 2 * hd * ctx * KV_DTYPE_BYTES * b
    channels = 2 * hk * dk + hv * dv
    recurrent = hv * dk * dv * STATE_DTYPE_BYTES
    conv = (kernel - 1) * channels * CONV_DTYPE_BYTES
    state = linear * (recurrent + conv) * b
    figures = {
        "context": ctx, "batch": b, "kv_dtype_bytes": KV_DTYPE_BYTES,
        "kv_formula": f"{full} full-attention layers x {nkv} KV heads x 2 x {hd} head_dim x {ctx} context x "
                      f"{KV_DTYPE_BYTES} bytes x {b} batch",
        "kv_bytes": kv,
        "gdn_state_bytes": state,
        "gdn_state_formula": f"{linear} gated delta net layers x ({hv}x{dk}x{dv} x {STATE_DTYPE_BYTES} bytes recurrent "
                             f"+ {kernel - 1}x{channels} x {CONV_DTYPE_BYTES} bytes conv) x {b} batch",
        "kv_and_state_bytes": kv + state,
    }
    return figures, issues
