"""The logical-parameter contract of the text component, from an artifact's config alone.

Used when no source is given (``convert validate``, ``convert verify`` without ``--source``): which
parameters a Qwen3 / Qwen3.5 text model, dense or MoE (Qwen3-MoE, Qwen3.5-MoE, Qwen3-Next), must bind, with
which shapes, and the use input of each (helper-brief "Contract: logical parameter names, inputs, config").
Shapes come from :func:`converters.acceptance.golden.parameter_shapes`, the forward pass's own statement of what it
reads, so the coverage check and the golden gate agree on one list. With a source, the mapping's bound
parameters are authoritative instead (:func:`expected_from_bound`); both give :class:`Expected` records.
The other components' lists come from their mappings (:mod:`converters.acceptance.gates.required`); ``text.proposal``'s
from its record (:func:`expected_proposal`, container §9.2).

Also here: the head structure of each parameter (which axis holds heads, and the slice boundaries), used by
the order probes of ``verify`` gate 5.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from converters.acceptance.golden import TextSpec, parameter_shapes
from converters.errors import ConverterError
from converters.pipeline.proposal import HEAD as PROPOSAL_HEAD
from converters.pipeline.proposal import HEAD_INPUT as PROPOSAL_INPUT
from converters.pipeline.proposal import proposal_parameters

#: contract objects consumed by name rather than through a binding (helper-brief "Hadamard")
CONTRACT_OBJECTS = frozenset({"text/hadamard_widths"})

# logical-name suffix (after text/layers/{l}/) -> use input suffix (helper-brief "Use inputs")
LAYER_INPUTS = {
    **dict.fromkeys(("attention/query", "attention/key", "attention/value", "attention/gate", "gdn/query", "gdn/key",
                     "gdn/value", "gdn/z", "gdn/a", "gdn/b"), "mixer_input"),
    "attention/output": "attention/output_input",
    "gdn/output": "gdn/output_input",
    "mlp/gate": "mlp_input",
    "mlp/up": "mlp_input",
    "mlp/down": "mlp/product",
    # sparse MoE blocks (mappings/qwen3_moe.yaml, qwen35_moe.yaml, qwen3_next.yaml); {e} = the expert index
    **dict.fromkeys(("moe/router", "moe/experts/{e}/gate", "moe/experts/{e}/up", "moe/shared_expert/gate",
                     "moe/shared_expert/up", "moe/shared_expert_gate"), "mlp_input"),
    "moe/experts/{e}/down": "moe/experts/{e}/product",
    "moe/shared_expert/down": "moe/shared_expert/product",
}
GLOBAL_INPUTS = {"text/output_head": "text/final_hidden"}
#: components with head-structured layers: text and MTP (an MTP layer is a text decoder layer) with the text
#: config's geometry, the DFlash drafters with their own (:func:`head_geometry`)
HEAD_COMPONENTS = ("text", "mtp", "dflash", "dflash2")


@dataclass(frozen=True)
class Expected:
    """A logical parameter an artifact must bind: shape, use input (None: no use), and whether it may be absent
    (``text/output_head`` of a tied model may be bound to the embedding's object or left out)."""

    name: str
    shape: tuple[int, ...]
    input: str | None
    optional: bool = False
    component: str = "text"
    layer: int | None = None


def layer_of(name: str) -> int | None:
    parts = name.split("/")
    if len(parts) > 2 and parts[1] == "layers" and parts[2].isdigit():
        return int(parts[2])
    return None


def use_input(name: str) -> str | None:
    """The contract's use input of a text parameter (None when it has no use)."""
    if name in GLOBAL_INPUTS:
        return GLOBAL_INPUTS[name]
    layer = layer_of(name)
    if layer is None:
        return None
    suffix = name.split("/", 3)[3]
    expert = re.fullmatch(r"moe/experts/(\d+)/(gate|up|down)", suffix)
    inp = LAYER_INPUTS.get(f"moe/experts/{{e}}/{expert[2]}" if expert else suffix)
    if inp is None:
        return None
    return f"text/layers/{layer}/" + (inp.replace("{e}", expert[1]) if expert else inp)


@dataclass(frozen=True)
class HeadGeometry:
    """The head dimensions :func:`heads` reads, for a component that is not a text model (a drafter's
    attention: its config's ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``)."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0


def head_geometry(component: str, text: TextSpec | None, args=None):
    """The geometry :func:`heads` uses for ``component``'s parameters: the text spec for text and MTP, a
    :class:`HeadGeometry` from a drafter's ``Args``; None when unknown (no head probe)."""
    if component in ("text", "mtp"):
        return text
    if component in HEAD_COMPONENTS and args is not None:
        return HeadGeometry(args.num_attention_heads, args.num_key_value_heads, args.head_dim)
    return None


def expected_proposal(config: Mapping, record: Mapping | None) -> dict[str, Expected]:
    """``proposal/head`` (use input ``text/final_hidden``) and, for ``indexed``, ``proposal/token_ids`` of a
    ``text.proposal`` record (container §9.2; :func:`converters.pipeline.proposal.proposal_parameters`)."""
    for key in ("hidden_size", "vocab_size"):
        value = config.get(key)
        if record and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConverterError(f"text.proposal needs the text config's {key} (a positive integer), got {value!r}",
                                 json_path=f"config.{key}", section="§9.2", rule="proposal_config")
    shapes = proposal_parameters(dict(config), dict(record) if record else None)
    return {n: Expected(n, tuple(s), PROPOSAL_INPUT if n == PROPOSAL_HEAD else None) for n, s in shapes.items()}


def text_spec(config: Mapping) -> TextSpec:
    """The text spec of a config; a :class:`ConverterError` (rule ``golden_config``) names a missing field."""
    return TextSpec.from_config(config)


def expected_text(config: Mapping) -> dict[str, Expected]:
    """Every text parameter the contract requires of ``config`` (name → :class:`Expected`)."""
    spec = text_spec(config)
    shapes = parameter_shapes(spec)
    out = {n: Expected(n, tuple(s), use_input(n), layer=layer_of(n)) for n, s in shapes.items()}
    if spec.tie_word_embeddings:
        out["text/output_head"] = Expected("text/output_head", shapes["text/token_embedding"],
                                           GLOBAL_INPUTS["text/output_head"], optional=True)
    return out


def expected_from_bound(bound) -> dict[str, Expected]:
    """The parameters of a :class:`~converters.mapping.BoundModel` (the source's mapping) as :class:`Expected`."""
    return {p.name: Expected(p.name, tuple(p.shape), p.input, component=p.component, layer=p.layer)
            for p in bound.parameters}


def heads(name: str, spec) -> tuple[int, list[tuple[int, int]]] | None:
    """(axis, [(start, stop), ...]) of the head slices of a head-structured parameter of a component in
    :data:`HEAD_COMPONENTS`, else None; ``spec``: the component's geometry (:func:`head_geometry`).

    Attention heads are ``head_dim`` rows (query, gate, key, value, a drafter's context key/value) or columns
    (output); gated delta net key heads ``linear_key_head_dim`` rows, value heads ``linear_value_head_dim``
    rows (value, z) or columns (output) or one element (a, b, dt_bias, a_log); ``conv1d`` channels are q, k
    and v heads in order."""
    layer = layer_of(name)
    if layer is None or name.split("/", 1)[0] not in HEAD_COMPONENTS:
        return None
    suffix = name.split("/", 3)[3]
    hd, nh, nkv = spec.head_dim, spec.num_heads, spec.num_kv_heads
    hk, hv = spec.linear_num_key_heads, spec.linear_num_value_heads
    dk, dv = spec.linear_key_head_dim, spec.linear_value_head_dim

    def even(n: int, size: int) -> list[tuple[int, int]]:
        return [(i * size, (i + 1) * size) for i in range(n)]

    table = {
        "attention/query": (0, even(nh, hd)), "attention/gate": (0, even(nh, hd)),
        "attention/key": (0, even(nkv, hd)), "attention/value": (0, even(nkv, hd)),
        "attention/context_key": (0, even(nkv, hd)), "attention/context_value": (0, even(nkv, hd)),
        "attention/output": (1, even(nh, hd)),
    }
    if hv:
        conv = even(2 * hk, dk) + [(2 * hk * dk + s, 2 * hk * dk + e) for s, e in even(hv, dv)]
        table.update({
            "gdn/query": (0, even(hk, dk)), "gdn/key": (0, even(hk, dk)), "gdn/value": (0, even(hv, dv)),
            "gdn/z": (0, even(hv, dv)), "gdn/output": (1, even(hv, dv)), "gdn/conv1d": (0, conv),
            **dict.fromkeys(("gdn/a", "gdn/b", "gdn/dt_bias", "gdn/a_log"), (0, even(hv, 1))),
        })
    return table.get(suffix)


def unsupported_family(exc: ConverterError) -> bool:
    """Whether a config error says the contract does not cover the model family (Llama, …), rather than that a
    field of a covered family is missing: coverage is then unchecked (INFO), not an invalid config."""
    return exc.json_path == "config.model_type"
