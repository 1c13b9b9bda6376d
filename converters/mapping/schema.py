"""The mapping file schema (``mappings/<architecture>[.<component>].yaml``) and its strict loader.

A mapping file states, as data, how one component of one architecture is read from its sources. Its
top-level keys (the original ternary packer's MAPPING concepts, docs/ternary.md §2, in parentheses):

``architecture``  the architecture module (``converters/model/architectures/<name>.py``) whose ``Args``
                  fields are the config names expressions may use.
``component``     the component id the parameters belong to (``text``, ``mtp``, ``vision`` …).
``source``        optional: which input carries the tensors (``main``, default; ``mmproj`` …), or a
                  list of inputs tried in order, the first one given being read (``[mmproj, main]``:
                  an mmproj when one is given, else the main checkpoint).
``doc``           one paragraph for the generated tables.
``prefixes``      optional: per source kind, placeholders with alternatives (``{text}`` → the first of
                  ``model.language_model.``, ``model.`` that names a tensor).
``symbols``       optional: derived integers (``key_dim: linear_num_key_heads * linear_key_head_dim``),
                  each an expression over config fields and earlier symbols.
``layers``        optional (``_layers``): ``count`` expression and, per layer kind the architecture
                  derives from the config, the parameter ``groups`` it has and a ``probe`` per source
                  kind — a tensor name, or a list of names that are all present — whose presence must
                  agree with the kind (cross-check).
``rules``         (``_rules``) named rules: the ``transforms`` that implement each, ``evidence``, and
                  ``inferred`` (true = read from upstream code, not measured on upstream output;
                  printed ``INFERRED``). Every transform a parameter uses must belong to a rule.
``parameters``    group name (``text_globals``, ``per_layer``, ``per_layer_gdn`` …) → logical
                  parameter name template → rule: ``shape`` (expressions), ``role`` (what recipes key
                  on), optional ``input`` (the use's input, container §8), per source kind (``gguf``,
                  ``hf``) a tensor name, ``{tensor, transforms}`` or ``{stack: [t0, t1 …], transforms}``
                  (tensors of one shape stacked along a new leading axis before the transforms: a
                  Conv3d split in time by its converter), ``{tensor, transpose: true, transforms}`` (a
                  rank-3 ``[E, N, K]`` read as ``[E, K, N]``: experts saved transposed) — or a list of
                  those: alternatives,
                  the first whose tensor the source has is bound (one checkpoint format written two
                  ways by different converter versions) —, optional ``tied_to``
                  (``{parameter, when}``: bind another parameter's object — always, or when the boolean
                  config field ``when`` is true; e.g. an MTP head sharing the text embedding),
                  optional ``repeat`` (``{e: num_experts}``: one parameter per index), optional
                  ``bank`` (with ``repeat``: the object id template — ``{l}`` only — of one rank-2
                  parent in which the repeated parameters are stacked by rows in index order,
                  container §7.2 "expert bank"), ``evidence`` and optional ``inferred``. Groups named
                  by a layer kind are per layer (names contain ``{l}``); the others are global
                  (``_counts`` are derived: see ``counts``).
``other_components``  tensors owned by another component (regex per source kind, or for GGUF every
                  ``blk.N.*`` with ``N >= gguf_from_layer``): skipped unless that component is selected.
``drop``          tensors deliberately not converted: regex per source kind and ``evidence``.
``counts``        optional (``_counts``): per scope — ``global`` and each layer kind — the number of
                  ``parameters`` and of source tensors (``gguf_tensors`` / ``hf_tensors``) the rules
                  above define; the loader derives them (:meth:`Mapping.derived_counts`) and refuses a
                  file whose declared numbers differ (e.g. Ternary Bonsai: 14 GGUF tensors per gated
                  delta net layer, 11 per attention layer, 3 global → 851 for 48 + 16 layers).
``unresolved``    (``_unresolved``) open questions, printed with the tables.

Name templates use ``{placeholder}`` (``{l}``, a repeat index, a prefix) or ``{expression}`` over those
and the config names and symbols (``blk.{num_hidden_layers + l}``: a block numbered after the trunk).

Unknown keys, missing fields, unknown transforms or arguments, and expressions that do not evaluate are
:class:`~converters.errors.MappingError` naming ``file:line`` (the loader: :mod:`.loader`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from converters import ROOT
from converters.mapping import expr

MAPPINGS_DIR = ROOT / "mappings"
SOURCE_KINDS = ("gguf", "hf")
LAYER_PLACEHOLDER = "l"
ROLE_RE = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")
NAME_RE = re.compile(r"^[a-z0-9_]+(/([a-z0-9_]+|\{[a-z]+\}))*$")
PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")
#: an ``{expression}`` placeholder: braces around anything that is not a plain lower-case name
EXPR_PLACEHOLDER_RE = re.compile(r"\{([^{}]*[^a-z_{}][^{}]*)\}")


@dataclass(frozen=True)
class TransformStep:
    """One transform of a chain: registered name and argument expressions."""

    name: str
    args: tuple[tuple[str, str | int], ...]
    line: int


@dataclass(frozen=True)
class SourceRule:
    """Where a parameter is read from; ``alternatives`` are tried in order when ``tensor`` is absent."""

    tensor: str
    transforms: tuple[TransformStep, ...]
    line: int
    alternatives: tuple[SourceRule, ...] = ()
    stack: tuple[str, ...] = ()  # tensors stacked along a new leading axis (``tensor`` is the first)
    transpose: bool = False  # a rank-3 ``[E, N, K]`` tensor read as ``[E, K, N]`` (converters.sources.rows)

    def choices(self) -> tuple[SourceRule, ...]:
        return (self, *self.alternatives)


@dataclass(frozen=True)
class ParameterRule:
    name: str
    group: str
    shape: tuple[str | int, ...]
    role: str
    input: str | None
    sources: dict[str, SourceRule]
    tied_to: str | None
    tied_when: str | None
    repeat: tuple[tuple[str, str | int], ...]
    evidence: str
    inferred: bool
    line: int
    bank: str | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    transforms: tuple[str, ...]
    evidence: str
    inferred: bool
    line: int


@dataclass(frozen=True)
class LayerKind:
    """A layer kind: its parameter groups and, per source kind, the probe tensors (all present iff
    a layer has this kind)."""

    name: str
    groups: tuple[str, ...]
    probes: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class OtherComponent:
    component: str
    patterns: dict[str, str]
    gguf_from_layer: str | int | None
    evidence: str


@dataclass(frozen=True)
class Drop:
    patterns: dict[str, str]
    evidence: str


@dataclass(frozen=True)
class Mapping:
    """A loaded, validated mapping file (immutable; one per file)."""

    file: str
    sha256: str
    architecture: str
    component: str
    source: str
    doc: str
    prefixes: dict[str, dict[str, tuple[str, ...]]]
    symbols: tuple[tuple[str, str | int], ...]
    layer_count: str | int | None
    kinds: dict[str, LayerKind]
    rules: dict[str, Rule]
    groups: dict[str, tuple[ParameterRule, ...]]
    other_components: tuple[OtherComponent, ...]
    drops: tuple[Drop, ...]
    unresolved: tuple[str, ...]
    inputs: tuple[str, ...] = ()  # ``source`` and its alternatives, in order (empty: ``(source,)``)
    counts: dict[str, dict[str, int]] | None = None  # declared ``counts`` (equal to derived_counts())
    stored_like: dict[str, str] = field(default_factory=dict)  # new role -> the role it is stored as

    def input_choices(self) -> tuple[str, ...]:
        return self.inputs or (self.source,)

    def layer_groups(self) -> set[str]:
        return {g for k in self.kinds.values() for g in k.groups}

    def parameters(self) -> list[ParameterRule]:
        return [p for rules in self.groups.values() for p in rules]

    def rule_for_transform(self, name: str) -> Rule | None:
        return next((r for r in self.rules.values() if name in r.transforms), None)

    def derived_counts(self) -> dict[str, dict[str, int]]:
        """Per scope (``global``, then each layer kind): parameter rules and the distinct source tensors
        (first alternative) they read, per source kind (``gguf_tensors``, ``hf_tensors``). Repeated
        parameters count once per rule."""
        scopes = {"global": [g for g in self.groups if g not in self.layer_groups()]}
        scopes.update({k.name: list(k.groups) for k in self.kinds.values()})
        out = {}
        for scope, groups in scopes.items():
            rules = [r for g in groups for r in self.groups[g]]
            entry = {"parameters": len(rules)}
            for sk in SOURCE_KINDS:
                names = {r.sources[sk].tensor for r in rules if sk in r.sources}
                if names:
                    entry[f"{sk}_tensors"] = len(names)
            out[scope] = entry
        return out


def template_names(text: str) -> set[str]:
    """The names a name template reads: its ``{placeholder}`` names and the names its expressions use."""
    names = set(PLACEHOLDER_RE.findall(text))
    for e in EXPR_PLACEHOLDER_RE.findall(text):
        names |= expr.names(e)
    return names
