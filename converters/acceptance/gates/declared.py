"""The parameters a mapping file declares for an architecture's ``Args``, read without a source.

Acceptance without a source (``convert validate``, ``convert verify`` without ``--source``) still needs each
parameter's name, shape and use ``input:``; the mapping is where they live, so they are read from its rules
here rather than kept in a table of their own: symbols, layer count and kinds, ``repeat``, shapes, ``input``
and ``tied_to``/``when``, in :func:`converters.mapping.bind`'s order (globals first, then layer by layer in
each kind's group order). A tied parameter (the MTP head's embedding and output head, bound to the text
objects) is listed like the others.

Why not :func:`~converters.mapping.bind` itself: it resolves every rule against a source's tensors
(prefixes, probes, source shapes, the accounting of every tensor) and cannot run without one. The rule
fields read here do not depend on the source kind (a rule's name, shape and input are the same for its
``gguf`` and ``hf`` readings), and the expression evaluator and symbol evaluation are the engine's own
(:mod:`converters.mapping.expr`, :func:`converters.mapping.binder.evaluate_symbols`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from converters.errors import MappingError
from converters.mapping import expr
from converters.mapping.binder import evaluate_symbols
from converters.mapping.schema import LAYER_PLACEHOLDER, ParameterRule


@dataclass(frozen=True)
class Declared:
    """One parameter a mapping declares: logical name, shape, use input (None: no use) and layer."""

    name: str
    shape: tuple[int, ...]
    input: str | None
    layer: int | None


def declared_parameters(m, args) -> dict[str, Declared]:
    """Name → :class:`Declared` of every parameter mapping ``m`` binds for ``args`` (the architecture's
    ``Args``: its integer fields are the symbols' inputs, ``layer_kinds()`` the layers)."""
    env = evaluate_symbols(m, {k: v for k, v in vars(args).items() if isinstance(v, int)})
    kinds = tuple(args.layer_kinds())
    n_layers = _eval(m.layer_count, env, m.file) if m.layer_count is not None else 0
    if m.kinds and n_layers != len(kinds):
        raise MappingError(f"layers.count = {n_layers} but the config lists {len(kinds)} layer kinds", file=m.file,
                           rule="layer_count")
    order = [(g, None) for g in m.groups if g not in m.layer_groups()]
    for layer in range(n_layers if m.kinds else 0):
        order += [(g, layer) for g in m.kinds[kinds[layer]].groups]
    out: dict[str, Declared] = {}
    for group, layer in order:
        for rule in m.groups[group]:
            for d in _expand(rule, env, layer, m.file):
                out[d.name] = d
    return out


def _expand(rule: ParameterRule, env: dict, layer: int | None, file: str) -> Iterator[Declared]:
    combos: list[dict[str, int]] = [{}]
    for placeholder, count in rule.repeat:
        combos = [{**c, placeholder: i} for c in combos for i in range(_eval(count, env, file))]
    for indices in combos:
        local = {**env, **indices}
        if layer is not None:
            local[LAYER_PLACEHOLDER] = layer
        name = _fill(rule.name, local, file)
        shape = tuple(_eval(d, local, file) for d in rule.shape)
        yield Declared(name, shape, _fill(rule.input, local, file) if rule.input else None, layer)


def _eval(e, env: Mapping, file: str) -> int:
    try:
        return expr.evaluate(e, env)
    except expr.ExprError as exc:
        raise MappingError(str(exc), file=file, rule="expression") from None


def _fill(template: str, env: Mapping, file: str) -> str:
    """``template`` with each ``{name}`` / ``{expression}`` replaced by its integer value."""
    return re.sub(r"\{([^{}]+)\}", lambda mo: str(env[mo[1]] if mo[1] in env else _eval(mo[1], env, file)),
                  template)
