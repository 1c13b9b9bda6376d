"""Bind a mapping to a normalised config and the tensors a source really has.

:func:`bind` evaluates every rule of the selected mappings (symbols, layer count, shapes, transform
arguments), resolves the source tensor names (``{l}``, ``{text}`` …), checks each against the source's
declared shape after its transform chain, cross-checks the config's layer kinds with the probe tensors,
and accounts for every source tensor: consumed by a parameter, owned by another (unselected) component,
or deliberately dropped. Anything else is an error listing all leftovers, sorted — a checkpoint the
mapping does not fully understand is not converted half-way.

The result, :class:`BoundModel`, is immutable and holds no payload: planning reads only shapes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from collections.abc import Mapping as TMapping
from dataclasses import dataclass, field

import numpy as np

from converters.errors import MappingError, TransformError
from converters.mapping import expr, transforms
from converters.mapping.chain import Chain, resolve_chain
from converters.mapping.schema import LAYER_PLACEHOLDER, Mapping, ParameterRule, SourceRule

GGUF_BLOCK_RE = re.compile(r"^blk\.(\d+)\.")
#: How many leftover names an error prints before "and N more".
SHOWN = 20


@dataclass(frozen=True)
class BoundSource:
    """Where a parameter's values come from: one tensor of one input and its resolved chain.

    ``stack``: several tensors of one shape stacked along a new leading axis (``tensor`` is the first);
    the chain's source shape is then ``(len(stack), *shape)``. ``transposed``: a rank-3 ``[E, N, K]`` tensor
    read as ``[E, K, N]`` (:class:`converters.sources.rows.TransposedRows`), the chain's source shape."""

    input: str
    tensor: str
    chain: Chain
    dtype: str
    stack: tuple[str, ...] = ()
    transposed: bool = False

    @property
    def tensors(self) -> tuple[str, ...]:
        return self.stack or (self.tensor,)


@dataclass(frozen=True)
class BoundParameter:
    name: str
    component: str
    role: str
    shape: tuple[int, ...]
    layer: int | None
    kind: str | None
    group: str
    input: str | None
    source: BoundSource | None
    tied_to: str | None
    rule: ParameterRule
    mapping: Mapping
    bank: str | None = None  # object id of the expert bank whose rows this parameter is (index order)

    @property
    def where(self) -> str:
        return f"{self.mapping.file}:{self.rule.line}"


@dataclass(frozen=True)
class BoundModel:
    """Everything planning needs: parameters in mapping order, layer kinds, and the tensor accounting."""

    architecture: str
    source_kind: str
    env: dict[str, int]
    layer_kinds: tuple[str, ...]
    parameters: tuple[BoundParameter, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    mappings: tuple[Mapping, ...] = ()

    def parameter(self, name: str) -> BoundParameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)

    def source_of(self, name: str) -> BoundSource:
        """Where parameter ``name``'s values come from: its own source, or a tied parameter's target's (a tie is
        bound to its final target)."""
        p = self.parameter(name)
        return p.source if p.source is not None else self.parameter(p.tied_to).source

    def names(self) -> list[str]:
        return [p.name for p in self.parameters]


def source_kind_of(source) -> str:
    """The mapping source kind (``gguf``/``hf``) of a :class:`converters.sources.Source`."""
    kind = getattr(source, "kind", "")
    if kind == "gguf":
        return "gguf"
    if kind in ("hf", "safetensors"):
        return "hf"
    raise MappingError(f"no mapping rules for sources of kind {kind!r}", file=str(getattr(source, "path", "")))


def evaluate_symbols(mapping: Mapping, config_env: TMapping[str, object]) -> dict[str, int]:
    env = {k: v for k, v in config_env.items()}
    for name, e in mapping.symbols:
        env[name] = _eval(e, env, mapping, ("symbols", name))
    return env


def _eval(e, env, mapping: Mapping, where) -> int:
    try:
        return expr.evaluate(e, env)
    except expr.ExprError as exc:
        raise MappingError(f"{exc} (at {'.'.join(map(str, where))})", file=mapping.file,
                           rule="expression") from None


def bind(mappings: Iterable[Mapping], args, sources: TMapping[str, object], *,
         components: Iterable[str] = ("text",), component_args: TMapping[str, object] | None = None) -> BoundModel:
    """Bind ``mappings`` (one per selected component) to ``args`` (the architecture's ``Args``) and
    ``sources`` (input name → Source; the main checkpoint is ``"main"``).

    ``component_args``: component id → the ``Args`` of its own architecture (a vision tower's or a
    drafter's config; layer kinds and expression names of that mapping come from them); a component
    without an entry uses ``args``. ``BoundModel.env`` / ``layer_kinds`` are those of ``args``."""
    mappings = tuple(mappings)
    selected = set(components)
    if not mappings:
        raise MappingError("no mapping selected")
    config_env = _int_fields(args)
    params: list[BoundParameter] = []
    consumed: dict[str, dict[str, str]] = {}
    skipped: dict[str, str] = {}
    source_kind = None
    read: list[str] = []  # the input each mapping reads
    for m in mappings:
        name = next((i for i in m.input_choices() if i in sources), None)
        if name is None:
            raise MappingError(f"component {m.component} reads input {' or '.join(map(repr, m.input_choices()))}, "
                               "which was not given", file=m.file, rule="input_missing")
        read.append(name)
        src = sources[name]
        m_args = (component_args or {}).get(m.component, args)
        layer_kinds = tuple(m_args.layer_kinds())
        kind = source_kind_of(src)
        source_kind = source_kind or kind
        env = evaluate_symbols(m, _int_fields(m_args))
        tensors = src.tensors
        prefixes = _resolve_prefixes(m, kind, tensors)
        used = consumed.setdefault(name, {})
        n_layers = _eval(m.layer_count, env, m, ("layers", "count")) if m.layer_count is not None else 0
        if m.kinds and n_layers != len(layer_kinds):
            raise MappingError(f"layers.count = {n_layers} but the config lists {len(layer_kinds)} layer kinds",
                               file=m.file, rule="layer_count")
        _check_layer_probes(m, kind, tensors, {**prefixes, **env}, layer_kinds[:n_layers] if m.kinds else ())
        # globals first, then layer by layer (each layer's groups in its kind's order): payload order
        order = [(g, None) for g in m.groups if g not in m.layer_groups()]
        for layer in range(n_layers if m.kinds else 0):
            order += [(g, layer) for g in m.kinds[layer_kinds[layer]].groups]
        for group, layer in order:
            for rule in m.groups[group]:
                params += _bind_rule(m, rule, kind, env, layer, layer_kinds, src, prefixes, used, m_args, name)
        _account(m, name, kind, src, env, used, skipped, selected)
    params = _resolve_ties(params)
    leftovers = []
    for input_name in dict.fromkeys(read):
        for name in sources[input_name].tensors:
            if name not in consumed.get(input_name, {}) and f"{input_name}:{name}" not in skipped:
                leftovers.append(name if input_name == "main" else f"{input_name}:{name}")
    if leftovers:
        leftovers = sorted(set(leftovers))
        shown = ", ".join(leftovers[:SHOWN]) + (f" and {len(leftovers) - SHOWN} more" if len(leftovers) > SHOWN else "")
        raise MappingError(f"{len(leftovers)} source tensor(s) are not consumed by any mapping rule, owned "
                           f"by a known component, or dropped: {shown}",
                           file=str(getattr(sources.get("main"), "path", "")), rule="unconsumed_tensors")
    return BoundModel(mappings[0].architecture, source_kind or "", config_env, tuple(args.layer_kinds()),
                      tuple(params), skipped, mappings)


def _resolve_ties(params: list[BoundParameter]) -> list[BoundParameter]:
    """Point every tie at the parameter that has a source: an MTP head tied to ``text/output_head``,
    itself tied to ``text/token_embedding``, binds the embedding's object."""
    by_name = {p.name: p for p in params}
    out = []
    for p in params:
        target, seen = p.tied_to, {p.name}
        while target is not None:
            if target not in by_name:
                raise MappingError(f"{p.name} is tied to {target}, which is not bound", file=p.where,
                                   rule="tied_missing")
            if target in seen:
                raise MappingError(f"{p.name}: ties form a cycle through {target}", file=p.where, rule="tied_cycle")
            seen.add(target)
            if by_name[target].tied_to is None:
                break
            target = by_name[target].tied_to
        out.append(p if target == p.tied_to else dataclasses.replace(p, tied_to=target))
    return out


def _int_fields(args) -> dict[str, int]:
    return {k: v for k, v in vars(args).items() if isinstance(v, int)}


def _resolve_prefixes(m: Mapping, kind: str, tensors) -> dict[str, str]:
    out = {}
    for ph, alternatives in m.prefixes.get(kind, {}).items():
        chosen = next((a for a in alternatives if any(n.startswith(a) for n in tensors)), None)
        if chosen is None:
            raise MappingError(f"no tensor name starts with any {{{ph}}} prefix {list(alternatives)}",
                               file=m.file, rule="prefix")
        out[ph] = chosen
    return out


def _fill(template: str, values: TMapping[str, object]) -> str:
    """``template`` with each ``{name}`` replaced by its value and each ``{expression}`` evaluated."""
    def one(mo: re.Match) -> str:
        key = mo.group(1)
        if key in values:
            return str(values[key])
        try:
            return str(expr.evaluate(key, values))
        except expr.ExprError as exc:
            raise MappingError(f"{template}: {exc}", rule="expression") from None

    return re.sub(r"\{([^{}]+)\}", one, template)


def _check_layer_probes(m: Mapping, kind: str, tensors, values, layer_kinds) -> None:
    for layer, layer_kind in enumerate(layer_kinds):
        # the config's own kind first: "its probe is missing" is the clearer message
        for k, spec in sorted(m.kinds.items(), key=lambda kv: kv[0] != layer_kind):
            probe = spec.probes.get(kind)
            if probe is None:
                continue
            names = [_fill(p, {**values, LAYER_PLACEHOLDER: layer}) for p in probe]
            missing = [n for n in names if n not in tensors]
            present = not missing
            if present != (k == layer_kind):
                name = missing[0] if missing else " + ".join(names)
                what = "is missing" if not present else "is present"
                raise MappingError(
                    f"layer {layer}: the config says {layer_kind}, but {name} {what} (probe of {k})",
                    file=m.file, json_path=f"layers.kinds.{k}.probe.{kind}", rule="layer_kind_mismatch")


def _bind_rule(m: Mapping, rule: ParameterRule, kind: str, env: dict, layer: int | None, layer_kinds,
               src, prefixes, used: dict[str, str], args, input_name: str) -> list[BoundParameter]:
    out = []
    for indices in _repeat_indices(m, rule, env):
        local = dict(env)
        local.update(indices)
        if layer is not None:
            local[LAYER_PLACEHOLDER] = layer
        name = _fill(rule.name, local)
        shape = tuple(_eval(d, local, m, ("parameters", rule.group, rule.name, "shape", i))
                      for i, d in enumerate(rule.shape))
        if any(d <= 0 for d in shape):
            raise MappingError(f"{name}: shape {list(shape)} has a non-positive dimension",
                               file=f"{m.file}:{rule.line}", rule="shape")
        tied = rule.tied_to is not None and (rule.tied_when is None or bool(getattr(args, rule.tied_when)))
        inp = _fill(rule.input, local) if rule.input else None
        layer_kind = layer_kinds[layer] if layer is not None else None
        source = None
        if tied:
            sr = rule.sources.get(kind)
            for choice in sr.choices() if sr is not None else ():
                tname = _fill(choice.tensor, {**prefixes, **local})
                if tname in src.tensors:
                    used[tname] = f"{name} (tied to {rule.tied_to}: this tensor is ignored)"
        else:
            sr = rule.sources.get(kind)
            if sr is None:
                raise MappingError(f"{name}: the mapping has no {kind} rule", file=f"{m.file}:{rule.line}",
                                   rule="no_source_rule")
            source = _bind_source(m, rule, sr, name, shape, local, prefixes, src, used, input_name)
        out.append(BoundParameter(name=name, component=m.component, role=rule.role, shape=shape, layer=layer,
                                  kind=layer_kind, group=rule.group, input=inp, source=source,
                                  tied_to=_fill(rule.tied_to, local) if tied else None, rule=rule, mapping=m,
                                  bank=_fill(rule.bank, local) if rule.bank else None))
    return out


def rule_columns(p: BoundParameter, kind: str, tensor: str, columns: int,
                 config_env: TMapping[str, object]) -> np.ndarray | None:
    """The column map ``p``'s ``kind`` source rule applies when it reads ``tensor`` of ``columns`` columns
    (logical column ``j`` is source column ``map[j]``), or None when that rule keeps the columns in order.
    Only the rule's column transforms are evaluated: the rows of ``tensor`` need not be known (an importance
    vector of a GGUF tensor, ordered as llama.cpp stores it, read for a parameter bound from another source
    kind: docs/imatrix.md §Name mapping). Raises ``LookupError`` when no ``kind`` rule of ``p`` reads
    ``tensor``. ``config_env``: the integer config fields the binding evaluated its expressions with
    (``BoundModel.env``)."""
    local = evaluate_symbols(p.mapping, config_env)
    if p.layer is not None:
        local[LAYER_PLACEHOLDER] = p.layer
    sr = p.rule.sources.get(kind)
    for choice in sr.choices() if sr is not None else ():
        try:
            if _fill(choice.tensor, local) != tensor:
                continue
        except MappingError:  # a name with placeholders of another binding (a prefix): not this tensor
            continue
        steps = [(st.name, {a: _eval(e, local, p.mapping, ("parameters", p.rule.group, p.rule.name, st.name, a))
                            for a, e in st.args})
                 for st in choice.transforms if transforms.get(st.name).kind == "columns"]
        return resolve_chain((1, columns), steps).columns
    raise LookupError(f"no {kind} rule of {p.name} reads {tensor}")


def _repeat_indices(m: Mapping, rule: ParameterRule, env: dict) -> list[dict[str, int]]:
    combos: list[dict[str, int]] = [{}]
    for ph, count in rule.repeat:
        n = _eval(count, env, m, ("parameters", rule.group, rule.name, "repeat", ph))
        combos = [{**c, ph: i} for c in combos for i in range(n)]
    return combos


def _bind_source(m: Mapping, rule: ParameterRule, sr: SourceRule, name: str, shape: tuple[int, ...],
                 local: dict, prefixes: dict, src, used: dict[str, str], input_name: str) -> BoundSource:
    names = [_fill(c.tensor, {**prefixes, **local}) for c in sr.choices()]
    found = next((i for i, n in enumerate(names) if n in src.tensors), None)
    if found is None:
        what = f"source tensor {names[0]} is" if len(names) == 1 else f"none of the source tensors {', '.join(names)} is"
        raise MappingError(f"{name}: {what} missing",
                           file=f"{m.file}:{sr.line}", rule="source_tensor_missing")
    sr, tname = sr.choices()[found], names[found]
    where = f"{m.file}:{sr.line}"
    t = src.tensors[tname]
    stack = tuple(_fill(x, {**prefixes, **local}) for x in sr.stack)
    source_shape = tuple(t.shape)
    if stack:
        source_shape = _stacked_shape(name, stack, src, where)
    if sr.transpose:
        if len(source_shape) != 3:
            raise MappingError(f"{name}: {tname} {list(source_shape)} is read transposed, which needs rank 3",
                               file=where, rule="transpose_shape")
        source_shape = (source_shape[0], source_shape[2], source_shape[1])
    steps = []
    for step in sr.transforms:
        args = {a: _eval(e, local, m, ("parameters", rule.group, rule.name, step.name, a)) for a, e in step.args}
        steps.append((step.name, args))
    try:
        chain = resolve_chain(source_shape, steps)
    except TransformError as exc:
        raise MappingError(f"{name}: {tname} {list(source_shape)}: {exc.message}", file=where,
                           rule="transform_shape") from None
    if chain.shape != shape:
        held = f" (in {t.file.name})" if t.file != src.path else ""  # a shard of the source
        raise MappingError(f"{name}: {tname}{held} has shape {list(source_shape)}, which the transforms make "
                           f"{list(chain.shape)}; the mapping expects {list(shape)}", file=where,
                           rule="shape_mismatch")
    for member in stack or (tname,):
        used.setdefault(member, name)
    return BoundSource(input_name, tname, chain, t.read_type or t.dtype, stack, sr.transpose)


def _stacked_shape(name: str, stack: tuple[str, ...], src, where: str) -> tuple[int, ...]:
    """``(len(stack), *shape)`` of tensors that all exist with one shape and one type."""
    missing = [x for x in stack if x not in src.tensors]
    if missing:
        raise MappingError(f"{name}: stacked source tensor {missing[0]} is missing", file=where,
                           rule="source_tensor_missing")
    first = src.tensors[stack[0]]
    for x in stack[1:]:
        t = src.tensors[x]
        if tuple(t.shape) != tuple(first.shape) or (t.read_type or t.dtype) != (first.read_type or first.dtype):
            raise MappingError(f"{name}: stacked tensors {stack[0]} {list(first.shape)} {first.dtype} and {x} "
                               f"{list(t.shape)} {t.dtype} differ in shape or type", file=where, rule="stack_shape")
    return (len(stack), *first.shape)


def _account(m: Mapping, input_name: str, kind: str, src, env: dict, used: dict[str, str], skipped: dict[str, str],
             selected: set[str]) -> None:
    """Mark tensors owned by other components or dropped (a selected other component must claim its own)."""
    for name in src.tensors:
        if name in used:
            continue
        key = f"{input_name}:{name}"
        for other in m.other_components:
            if other.component in selected:
                continue
            pat = other.patterns.get(kind)
            hit = bool(pat and re.search(pat, name))
            if not hit and kind == "gguf" and other.gguf_from_layer is not None:
                mo = GGUF_BLOCK_RE.match(name)
                hit = bool(mo) and int(mo.group(1)) >= _eval(other.gguf_from_layer, env, m,
                                                             ("other_components", other.component))
            if hit:
                skipped[key] = f"component {other.component} not selected"
                break
        else:
            for drop in m.drops:
                pat = drop.patterns.get(kind)
                if pat and re.search(pat, name):
                    skipped[key] = f"dropped: {drop.evidence}"
                    break
