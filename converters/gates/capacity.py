"""``validate`` Gate D, capacity (seed 004 §9 Gate D): parameter bytes by component and format, and the
KV-cache and gated-delta-net state bytes for a service context and batch, from the text config.

KV cache (seed 004 §9, "KV BF16 复算")::

    kv_bytes = full_attention_layers × num_key_value_heads × 2 (K, V) × head_dim × context × dtype_bytes × batch

with BF16 (2 bytes) as the seed computes. A Qwen3.5 gated delta net layer keeps, per sequence and
independent of the context, a recurrent state of ``linear_num_value_heads × linear_key_head_dim ×
linear_value_head_dim`` values (FP32: the delta rule accumulates in float32) and a convolution state of
``(linear_conv_kernel_dim − 1) × (2·key_dim + value_dim)`` values (BF16). ``context`` defaults to
``max_position_embeddings`` and ``batch`` to 1.
"""

from __future__ import annotations

from collections import defaultdict

from converters.errors import ConverterError
from converters.gates.codes import Issue
from converters.golden import TextSpec

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


def kv_cache(config, *, context: int | None, batch: int | None) -> tuple[dict, list[Issue]]:
    """The KV-cache and state figures of a text config (``memory`` section) and Gate D issues."""
    issues = []
    try:
        spec = TextSpec.from_config(config)
    except ConverterError as exc:
        return {}, [Issue("NINFER_CAP_CONFIG_INCOMPLETE", f"text config: {exc.message} ({exc.json_path}); KV-cache "
                          "bytes not computed", path="$.components.text.config")]
    cfg = config.get("text_config") or config
    max_pos = cfg.get("max_position_embeddings")
    ctx = context if context is not None else max_pos
    if not isinstance(ctx, int) or ctx <= 0:
        return {}, [Issue("NINFER_CAP_CONFIG_INCOMPLETE", "max_position_embeddings is missing and no --context was "
                          "given; KV-cache bytes not computed", path="$.components.text.config")]
    if context is not None and isinstance(max_pos, int) and context > max_pos:
        issues.append(Issue("NINFER_CAP_CONTEXT_EXCEEDS", f"--context {context} exceeds max_position_embeddings "
                            f"{max_pos}; the service must cap the context", path="$.components.text.config"))
    b = batch or 1
    full = sum(k == "full_attention" for k in spec.layer_types)
    linear = len(spec.layer_types) - full
    kv = full * spec.num_kv_heads * 2 * spec.head_dim * ctx * KV_DTYPE_BYTES * b
    key_dim = spec.linear_num_key_heads * spec.linear_key_head_dim
    value_dim = spec.linear_num_value_heads * spec.linear_value_head_dim
    recurrent = spec.linear_num_value_heads * spec.linear_key_head_dim * spec.linear_value_head_dim * STATE_DTYPE_BYTES
    conv = max(spec.linear_conv_kernel_dim - 1, 0) * (2 * key_dim + value_dim) * CONV_DTYPE_BYTES
    state = linear * (recurrent + conv) * b
    figures = {
        "context": ctx, "batch": b, "kv_dtype_bytes": KV_DTYPE_BYTES,
        "kv_formula": f"{full} full-attention layers x {spec.num_kv_heads} KV heads x 2 x {spec.head_dim} head_dim x "
                      f"{ctx} context x {KV_DTYPE_BYTES} bytes x {b} batch",
        "kv_bytes": kv,
        "gdn_state_bytes": state,
        "gdn_state_formula": f"{linear} gated delta net layers x ({spec.linear_num_value_heads}x"
                             f"{spec.linear_key_head_dim}x{spec.linear_value_head_dim} x {STATE_DTYPE_BYTES} bytes "
                             f"recurrent + {max(spec.linear_conv_kernel_dim - 1, 0)}x{2 * key_dim + value_dim} x "
                             f"{CONV_DTYPE_BYTES} bytes conv) x {b} batch",
        "kv_and_state_bytes": kv + state,
    }
    return figures, issues
