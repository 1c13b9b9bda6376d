"""The logical-parameter contract of the text component, from an artifact's config alone.

Used when no source is given (``convert validate``, ``convert verify`` without ``--source``): which
parameters a text model of a registered architecture (:mod:`converters.model.architectures`) must bind, with
which shapes, and the use input of each. Shapes come from :func:`converters.acceptance.golden.parameter_shapes`,
the forward pass's own statement of what it reads, so the coverage check and the golden gate agree on one
list; use inputs come from the architecture's mapping file (its rules' ``input:``,
:mod:`converters.acceptance.gates.declared`). With a source, the mapping's bound parameters are
authoritative instead (:func:`expected_from_bound`); both give :class:`Expected` records. The other
components' lists come from their mappings (:mod:`converters.acceptance.gates.required`); ``text.proposal``'s
from its record (:func:`expected_proposal`, container §9.2).

Also here: the head structure of each parameter (which axis holds heads, and the slice boundaries), used by
the order probes of ``verify``; each architecture module states it (its ``heads``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from converters.acceptance.gates.declared import declared_parameters
from converters.acceptance.golden import TextSpec, parameter_shapes
from converters.errors import ConverterError
from converters.model import architectures
from converters.pipeline.proposal import HEAD as PROPOSAL_HEAD
from converters.pipeline.proposal import HEAD_INPUT as PROPOSAL_INPUT
from converters.pipeline.proposal import proposal_parameters

#: contract objects consumed by name rather than through a binding (the Hadamard widths of a rotated model)
CONTRACT_OBJECTS = frozenset({"text/hadamard_widths"})


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


def use_inputs(config: Mapping, spec: TextSpec) -> dict[str, str | None]:
    """Name → use input (None: no use) of every text parameter the architecture's mapping declares for
    ``config`` (its rules' ``input:``); a :class:`ConverterError` names a config field its ``Args`` lack."""
    from converters.model.components import mapping_for

    mod = architectures.module(spec.architecture)
    args = mod.Args.from_config(dict(config.get("text_config") or config), file="components.text.config")
    return {d.name: d.input for d in declared_parameters(mapping_for(mod, "text"), args).values()}


@dataclass(frozen=True)
class HeadGeometry:
    """The head dimensions :func:`heads` reads, for a component that is not a text model (a drafter's
    attention: its config's ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``), and the
    architecture module whose ``heads`` gives the table."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    architecture: str = ""

    def head_table(self) -> dict[str, tuple[int, list[tuple[int, int]]]]:
        return architectures.module(self.architecture).heads(self) if self.architecture else {}


def head_geometry(component: str, text: TextSpec | None, args=None):
    """The geometry :func:`heads` uses for ``component``'s parameters: the text spec for text and for a
    component whose architecture reads the text config (``TEXT_GEOMETRY``: an MTP layer is a text decoder
    layer), a :class:`HeadGeometry` from another component's ``Args`` when its architecture states ``heads``;
    None when unknown (no head probe)."""
    mods = architectures.for_component(component)
    if component == "text" or any(getattr(m, "TEXT_GEOMETRY", False) for m in mods):
        return text
    mod = next((m for m in mods if isinstance(args, m.Args)), None) if args is not None else None
    if mod is not None and hasattr(mod, "heads"):
        return HeadGeometry(args.num_attention_heads, args.num_key_value_heads, args.head_dim, architecture=mod.NAME)
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
    inputs = use_inputs(config, spec)
    out = {n: Expected(n, tuple(s), inputs.get(n), layer=layer_of(n)) for n, s in shapes.items()}
    if spec.tie_word_embeddings:
        out["text/output_head"] = Expected("text/output_head", shapes["text/token_embedding"],
                                           inputs.get("text/output_head"), optional=True)
    return out


def expected_from_bound(bound) -> dict[str, Expected]:
    """The parameters of a :class:`~converters.mapping.BoundModel` (the source's mapping) as :class:`Expected`."""
    return {p.name: Expected(p.name, tuple(p.shape), p.input, component=p.component, layer=p.layer)
            for p in bound.parameters}


def heads(name: str, spec) -> tuple[int, list[tuple[int, int]]] | None:
    """(axis, [(start, stop), ...]) of the head slices of a head-structured layer parameter, else None;
    ``spec``: the component's geometry (:func:`head_geometry`), whose architecture module's ``heads`` gives
    the table (:mod:`converters.model.architectures._heads` describes the slices)."""
    if spec is None or layer_of(name) is None:
        return None
    return spec.head_table().get(name.split("/", 3)[3])


def unsupported_family(exc: ConverterError) -> bool:
    """Whether a config error says the contract does not cover the model family (Llama, …), rather than that a
    field of a covered family is missing: coverage is then unchecked (INFO), not an invalid config."""
    return exc.json_path == "config.model_type"
