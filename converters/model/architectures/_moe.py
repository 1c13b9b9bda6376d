"""Config checks shared by the mixture-of-experts architectures (:mod:`.qwen3_moe`, :mod:`.qwen35_moe`,
:mod:`.qwen3_next`) and the hybrid schedule they share with :mod:`.qwen35`: consistency rules a config
must meet before any mapping expression uses it."""

from __future__ import annotations

from converters.model.architectures._args import fail, require_multiple

HYBRID_KINDS = ("linear_attention", "full_attention")


def check_moe(a, dense: tuple[int, ...], file: str | None) -> None:
    """Top-k within the experts; attention heads a multiple of KV heads; dense layers inside the model."""
    if a.num_experts_per_tok > a.num_experts:
        fail(f"num_experts_per_tok {a.num_experts_per_tok} exceeds num_experts {a.num_experts}",
             field="num_experts_per_tok", file=file)
    require_multiple(a, "num_attention_heads", "num_key_value_heads", field="num_key_value_heads", file=file)
    bad = [n for n in dense if not 0 <= n < a.num_hidden_layers]
    if bad or len(set(dense)) != len(dense):
        fail(f"mlp_only_layers {list(dense)} must be distinct layers in 0..{a.num_hidden_layers - 1}",
             field="mlp_only_layers", file=file)


def check_hybrid(a, file: str | None) -> None:
    """``layer_types`` one known kind per layer; value heads a multiple of key heads (gated delta net)."""
    if len(a.layer_types) != a.num_hidden_layers:
        fail(f"layer_types has {len(a.layer_types)} entries for {a.num_hidden_layers} layers", field="layer_types",
             file=file)
    for i, kind in enumerate(a.layer_types):
        if kind not in HYBRID_KINDS:
            fail(f"layer_types[{i}] = {kind!r} is not one of {HYBRID_KINDS}", field="layer_types", file=file)
    require_multiple(a, "linear_num_value_heads", "linear_num_key_heads", field="linear_num_value_heads", file=file)
