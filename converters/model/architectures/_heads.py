"""Head structure of head-structured parameters: building blocks for an architecture's ``heads(geometry)``.

``heads(geometry)`` returns, per logical-name suffix after ``<component>/layers/{l}/``, the axis that holds
heads and the ``(start, stop)`` slice of every head; ``verify``'s order probes compare a parameter head by
head with it. ``geometry`` is anything with the head fields of the golden spec (``num_heads``,
``num_kv_heads``, ``head_dim`` and, for a gated delta net, ``linear_*``).

Attention heads are ``head_dim`` rows (query, gate, key, value, a drafter's context key/value) or
columns (output); gated delta net key heads ``linear_key_head_dim`` rows, value
heads ``linear_value_head_dim`` rows (value, z) or columns (output) or one element (a, b, dt_bias, a_log);
``conv1d`` channels are q, k and v heads in order.
"""

from __future__ import annotations

Slices = list[tuple[int, int]]
HeadTable = dict[str, tuple[int, Slices]]


def even(n: int, size: int) -> Slices:
    """``n`` consecutive slices of ``size``."""
    return [(i * size, (i + 1) * size) for i in range(n)]


def attention(g) -> HeadTable:
    """Full attention: query, gate and output by attention head, key and value by KV head."""
    nh, nkv, hd = g.num_heads, g.num_kv_heads, g.head_dim
    return {"attention/query": (0, even(nh, hd)), "attention/gate": (0, even(nh, hd)),
            "attention/key": (0, even(nkv, hd)), "attention/value": (0, even(nkv, hd)),
            "attention/output": (1, even(nh, hd))}


def context_attention(g) -> HeadTable:
    """A drafter's context key/value projections, by KV head."""
    nkv, hd = g.num_kv_heads, g.head_dim
    return {"attention/context_key": (0, even(nkv, hd)), "attention/context_value": (0, even(nkv, hd))}


def gated_delta_net(g) -> HeadTable:
    """Gated delta net projections, convolution channels and per-value-head scalars."""
    hk, hv, dk, dv = g.linear_num_key_heads, g.linear_num_value_heads, g.linear_key_head_dim, g.linear_value_head_dim
    if not hv:
        return {}
    conv = even(2 * hk, dk) + [(2 * hk * dk + s, 2 * hk * dk + e) for s, e in even(hv, dv)]
    return {"gdn/query": (0, even(hk, dk)), "gdn/key": (0, even(hk, dk)), "gdn/value": (0, even(hv, dv)),
            "gdn/z": (0, even(hv, dv)), "gdn/output": (1, even(hv, dv)), "gdn/conv1d": (0, conv),
            **dict.fromkeys(("gdn/a", "gdn/b", "gdn/dt_bias", "gdn/a_log"), (0, even(hv, 1)))}


def hybrid(g) -> HeadTable:
    """Full attention and gated delta net layers (Qwen3.5, Qwen3-Next and their MTP heads)."""
    return attention(g) | gated_delta_net(g)
