"""The logical parameters a component requires, from the artifact's configs alone (no source).

``convert validate`` and ``convert verify`` without ``--source`` check binding coverage of every component
an artifact declares (container §4.2). The text component has its contract (:mod:`.contract`, the golden
forward's own list); the other components (``mtp``, ``vision``, ``dflash``, ``dflash2``) have only their
mapping files. :func:`required_parameters` reads those: the component's architecture module
(``COMPONENT``), its ``Args`` from the component's ``config`` (from the text config when the module says
``TEXT_GEOMETRY``: the MTP head's record only names ``Qwen3_5MTP``, container §4.2), and the mapping's rules
(:func:`converters.acceptance.gates.declared.declared_parameters`). :func:`expected_from_artifact` puts
every component's list together with ``text.proposal``'s. A test keeps this list equal to ``bind``'s for
every tiny component checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType

from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.contract import (
    Expected,
    expected_proposal,
    expected_text,
    unsupported_family,
)
from converters.acceptance.gates.declared import declared_parameters
from converters.acceptance.gates.proposal import proposal_record
from converters.acceptance.report import Finding
from converters.errors import ConverterError
from converters.model import architectures

#: components whose Args are the text config's (their record holds only ``architectures``): those whose
#: architecture modules say ``TEXT_GEOMETRY``
TEXT_GEOMETRY = tuple(dict.fromkeys(m.COMPONENT for m in architectures.all_modules()
                                    if getattr(m, "TEXT_GEOMETRY", False)))


def component_architecture(component: str, config: Mapping | None = None) -> ModuleType:
    """The architecture module of component ``component``.

    Several modules can serve one component (``mtp``: ``qwen35_mtp`` for dense Qwen3.5, ``qwen35_moe_mtp``
    for Qwen3.5-MoE), so the component record's ``config["architectures"][0]`` picks the module whose
    ``CONFIG_ARCHITECTURE`` it names; without a match, the first module whose ``COMPONENT`` is ``component``.
    """
    named = (config or {}).get("architectures") if isinstance(config, Mapping) else None
    wanted = named[0] if isinstance(named, list) and named else None
    candidates = architectures.for_component(component)
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

    m = mapping_for(component_architecture(component, config), component)
    args = component_args(component, config, text_config)
    return {d.name: Expected(d.name, d.shape, d.input, component=component, layer=d.layer)
            for d in declared_parameters(m, args).values()}


NGRAM_ONLY = frozenset({"ngram"})  # the component set of a stand-alone n-gram table (container §4.2)


@dataclass
class ArtifactExpectation:
    """What an artifact must bind, from its configs alone: ``expected`` parameters; ``unchecked``:
    component → why its list is unknown; ``issues``: invalid configs; ``sources``: component → where its
    list came from (evidence)."""

    expected: dict[str, Expected] = field(default_factory=dict)
    unchecked: dict[str, str] = field(default_factory=dict)
    issues: list[Finding] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def expected_from_artifact(art) -> ArtifactExpectation:
    """Every component's required parameters (text: the contract; others: :func:`required_parameters`) and
    the ``text.proposal``'s (:func:`~converters.acceptance.gates.contract.expected_proposal`)."""
    out = ArtifactExpectation()
    text = art.components.get("text")
    if text is None and art.components and set(art.components) <= NGRAM_ONLY:
        # container §4.2: an artifact of only an n-gram table has no text; its rows are the n-gram loader's,
        # the framing checks its resources' references and ranges (§9.1 hot_profile)
        out.unchecked["ngram"] = "an n-gram table artifact: its rows are interpreted by the n-gram loader"
        out.sources["ngram"] = "container §4.2 (n-gram table, no text)"
        return out
    if text is None:
        out.issues.append(finding("NINFER_CONFIG_INVALID", "the artifact has no text component", path="$.components"))
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


def _invalid(component: str, exc: ConverterError) -> Finding:
    where = f" ({exc.json_path})" if exc.json_path else ""
    return finding("NINFER_CONFIG_INVALID", f"components.{component}.config: {exc.message}{where}",
                 path=f"$.components.{component}.config")
