"""The logical parameters a component requires, from the artifact's configs alone (no source).

``convert validate`` and ``convert verify`` without ``--source`` check binding coverage of every component
an artifact declares (container §4.2). The text component has its contract (:mod:`.contract`, the golden
forward's own list); the other components (``mtp``, ``vision``, ``dflash``, ``dflash2``) have only their
mapping files. :func:`required_parameters` reads those: the component's architecture module
(``COMPONENT``), its ``Args`` from the component's ``config`` (the MTP head's geometry from the text
config: its record only names ``Qwen3_5MTP``, container §4.2), and the mapping's rules — symbols, layer
count and kinds, ``repeat``, shapes, ``input``, ``tied_to``/``when`` — in :func:`converters.mapping.bind`'s
order: globals first, then layer by layer in each kind's group order. A tied parameter (the MTP head's
embedding and output head, bound to the text objects) is listed like the others.
:func:`expected_from_artifact` puts every component's list together with ``text.proposal``'s.

Why not :func:`~converters.mapping.bind` itself: it resolves every rule against a source's tensors
(prefixes, probes, source shapes, the accounting of every tensor) and cannot run without one. The rule
fields read here do not depend on the source kind (a rule's name, shape and input are the same for its
``gguf`` and ``hf`` readings), and the expression evaluator and symbol evaluation are the engine's own
(:mod:`converters.mapping.expr`, :func:`converters.mapping.binder.evaluate_symbols`). A test keeps this list
equal to ``bind``'s for every tiny component checkpoint.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType

from converters.acceptance.gates.codes import Issue
from converters.acceptance.gates.contract import (
    Expected,
    expected_proposal,
    expected_text,
    layer_of,
    unsupported_family,
)
from converters.acceptance.gates.proposal import proposal_record
from converters.errors import ConverterError, MappingError
from converters.mapping import expr
from converters.mapping.binder import evaluate_symbols
from converters.mapping.schema import LAYER_PLACEHOLDER, ParameterRule
from converters.model import architectures

#: components whose Args are the text config's (their record holds only ``architectures``)
TEXT_GEOMETRY = ("mtp",)


def component_architecture(component: str, config: Mapping | None = None) -> ModuleType:
    """The architecture module of component ``component``.

    Several modules can serve one component (``mtp``: ``qwen35_mtp`` for dense Qwen3.5, ``qwen35_moe_mtp``
    for Qwen3.5-MoE), so the component record's ``config["architectures"][0]`` picks the module whose
    ``CONFIG_ARCHITECTURE`` it names; without a match, the first module whose ``COMPONENT`` is ``component``.
    """
    named = (config or {}).get("architectures") if isinstance(config, Mapping) else None
    wanted = named[0] if isinstance(named, list) and named else None
    candidates = [mod for mod in map(architectures.module, architectures.ARCHITECTURE_MODULES)
                  if getattr(mod, "COMPONENT", None) == component]
    for mod in candidates:
        if wanted is not None and getattr(mod, "CONFIG_ARCHITECTURE", None) == wanted:
            return mod
    if candidates:
        return candidates[0]
    raise ConverterError(f"component {component!r} has no architecture module", rule="component_unknown")


def component_args(component: str, config: Mapping, text_config: Mapping):
    """The component architecture's ``Args`` (a :class:`ConverterError` names a missing or invalid field)."""
    mod = component_architecture(component, config)
    source = text_config if component in TEXT_GEOMETRY else config
    return mod.Args.from_config(dict(source), file=f"components.{component}.config")


def required_parameters(component: str, config: Mapping, text_config: Mapping) -> dict[str, Expected]:
    """Name → :class:`Expected` of every parameter ``component``'s mapping binds for ``config``."""
    from converters.model.components import mapping_for

    mod = component_architecture(component, config)
    m = mapping_for(mod, component)
    args = component_args(component, config, text_config)
    env = evaluate_symbols(m, {k: v for k, v in vars(args).items() if isinstance(v, int)})
    kinds = tuple(args.layer_kinds())
    n_layers = _eval(m.layer_count, env, m.file) if m.layer_count is not None else 0
    if m.kinds and n_layers != len(kinds):
        raise MappingError(f"layers.count = {n_layers} but the config lists {len(kinds)} layer kinds", file=m.file,
                           rule="layer_count")
    order = [(g, None) for g in m.groups if g not in m.layer_groups()]
    for layer in range(n_layers if m.kinds else 0):
        order += [(g, layer) for g in m.kinds[kinds[layer]].groups]
    out: dict[str, Expected] = {}
    for group, layer in order:
        for rule in m.groups[group]:
            for e in _expand(rule, env, layer, m.file):
                out[e.name] = Expected(e.name, e.shape, e.input, component=component, layer=layer)
    return out


def _expand(rule: ParameterRule, env: dict, layer: int | None, file: str) -> Iterator[Expected]:
    combos: list[dict[str, int]] = [{}]
    for placeholder, count in rule.repeat:
        combos = [{**c, placeholder: i} for c in combos for i in range(_eval(count, env, file))]
    for indices in combos:
        local = {**env, **indices}
        if layer is not None:
            local[LAYER_PLACEHOLDER] = layer
        name = _fill(rule.name, local, file)
        shape = tuple(_eval(d, local, file) for d in rule.shape)
        yield Expected(name, shape, _fill(rule.input, local, file) if rule.input else None, layer=layer_of(name))


def _eval(e, env: Mapping, file: str) -> int:
    try:
        return expr.evaluate(e, env)
    except expr.ExprError as exc:
        raise MappingError(str(exc), file=file, rule="expression") from None


def _fill(template: str, env: Mapping, file: str) -> str:
    """``template`` with each ``{name}`` / ``{expression}`` replaced by its integer value."""
    return re.sub(r"\{([^{}]+)\}", lambda mo: str(env[mo[1]] if mo[1] in env else _eval(mo[1], env, file)),
                  template)


@dataclass
class ArtifactExpectation:
    """What an artifact must bind, from its configs alone: ``expected`` parameters; ``unchecked``:
    component → why its list is unknown; ``issues``: invalid configs; ``sources``: component → where its
    list came from (evidence)."""

    expected: dict[str, Expected] = field(default_factory=dict)
    unchecked: dict[str, str] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def expected_from_artifact(art) -> ArtifactExpectation:
    """Every component's required parameters (text: the contract; others: :func:`required_parameters`) and
    the ``text.proposal``'s (:func:`~converters.acceptance.gates.contract.expected_proposal`)."""
    out = ArtifactExpectation()
    text = art.components.get("text")
    if text is None:
        out.issues.append(Issue("NINFER_CONFIG_INVALID", "the artifact has no text component", path="$.components"))
        return out
    config = dict(text.config)
    try:
        out.expected.update(expected_text(config))
        out.sources["text"] = "text contract"
    except ConverterError as exc:
        if unsupported_family(exc):
            out.unchecked["text"] = f"the text contract does not cover it ({exc.message})"
        else:
            out.issues.append(_invalid("text", exc))
    record = proposal_record(art)
    if record is not None and "text" in out.sources:
        out.expected.update(expected_proposal(config, record))
        out.sources["proposal"] = f"text.proposal ({record['domain']})"
    elif record is not None:
        out.unchecked["proposal"] = "the text parameters are not known"  # proposal/* judged with text
    for cid, comp in art.components.items():
        if cid == "text":
            continue
        try:
            mod = component_architecture(cid, comp.config)
        except ConverterError:
            out.unchecked[cid] = "no architecture module maps this component"
            continue
        try:
            out.expected.update(required_parameters(cid, comp.config, config))
            out.sources[cid] = f"mapping {mod.MAPPINGS[cid]}"
        except ConverterError as exc:
            out.unchecked[cid] = f"its config does not give its parameter list ({exc.message})"
            out.issues.append(_invalid(cid if cid not in TEXT_GEOMETRY else "text", exc))
    return out


def _invalid(component: str, exc: ConverterError) -> Issue:
    where = f" ({exc.json_path})" if exc.json_path else ""
    return Issue("NINFER_CONFIG_INVALID", f"components.{component}.config: {exc.message}{where}",
                 path=f"$.components.{component}.config")
