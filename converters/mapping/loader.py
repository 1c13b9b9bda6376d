"""Loading mapping files: the strict validator behind :func:`load_mapping` (schema: :mod:`.schema`).

Every value is checked where it is read — unknown keys, missing fields, unknown transforms and
arguments, placeholders, names in expressions — and every error is a
:class:`~converters.errors.MappingError` naming ``file:line`` (from :mod:`.located`). Loaded mappings
are immutable and cached by path and content hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from functools import cache
from pathlib import Path

from converters.errors import MappingError
from converters.mapping import expr
from converters.mapping import transforms as transform_registry
from converters.mapping.located import MAX_FILE_BYTES, Located, LocatedError, load_located
from converters.mapping.schema import (
    EXPR_PLACEHOLDER_RE,
    LAYER_PLACEHOLDER,
    MAPPINGS_DIR,
    NAME_RE,
    PLACEHOLDER_RE,
    ROLE_RE,
    SOURCE_KINDS,
    Drop,
    LayerKind,
    Mapping,
    OtherComponent,
    ParameterRule,
    Rule,
    SourceRule,
    TransformStep,
    template_names,
)
from converters.model.architectures import ARCHITECTURE_MODULES
from converters.model.architectures import module as architecture_module
from converters.sources.fileio import read_bounded, resolved


def mapping_path(architecture: str, component: str) -> Path:
    mod = architecture_module(architecture)
    try:
        return MAPPINGS_DIR / mod.MAPPINGS[component]
    except KeyError:
        raise MappingError(f"architecture {architecture} has no mapping for component {component!r} "
                           f"(it maps: {', '.join(sorted(mod.MAPPINGS))})", rule="component_mapping") from None


def load_mapping_for(architecture: str, component: str = "text") -> Mapping:
    return load_mapping(mapping_path(architecture, component))


def load_mapping(path: str | Path) -> Mapping:
    """Load and validate one mapping file (cached by resolved path and content hash)."""
    path = resolved(path)
    data = read_bounded(path, MAX_FILE_BYTES, what="mapping")
    return _load_cached(str(path), hashlib.sha256(data).hexdigest())


def parameter_roles(path: str | Path) -> set[str]:
    """The ``role`` of every parameter a mapping file lists (``parameters: GROUP: NAME: role``), read without
    validating the rest of the file: a recipe's role names are checked against every shipped mapping's
    before the source is read, while a conversion binds — and :func:`load_mapping` validates whole — only
    the mappings of its source (docs/io-speed.md §Fixed costs). A valid mapping gives the roles of its
    :meth:`~converters.mapping.schema.Mapping.parameters`."""
    path = resolved(path)
    try:
        doc = load_located(path)
    except LocatedError as exc:
        raise MappingError(str(exc), file=f"{path}:{exc.line}", rule="yaml") from None
    except OSError as exc:
        raise MappingError(f"cannot read the mapping file: {exc.strerror}", file=str(path)) from None
    except UnicodeDecodeError:
        raise MappingError("not UTF-8", file=str(path), rule="yaml") from None
    groups = doc.data.get("parameters") if isinstance(doc.data, dict) else None
    return {spec["role"] for params in (groups.values() if isinstance(groups, dict) else ())
            if isinstance(params, dict) for spec in params.values()
            if isinstance(spec, dict) and isinstance(spec.get("role"), str)}


@cache
def _load_cached(path: str, sha256: str) -> Mapping:
    try:
        doc = load_located(path)
    except LocatedError as exc:
        raise MappingError(str(exc), file=f"{path}:{exc.line}", rule="yaml") from None
    except UnicodeDecodeError:
        raise MappingError("not UTF-8", file=path, rule="yaml") from None
    return _Loader(doc, sha256).load()


class _Loader:
    """Validates a :class:`Located` document field by field, raising with ``file:line``."""

    TOP = {"architecture": True, "component": True, "doc": True, "rules": True, "parameters": True,
           "source": False, "prefixes": False, "symbols": False, "layers": False, "other_components": False,
           "drop": False, "unresolved": False, "counts": False, "roles": False}
    PARAM = {"shape": True, "role": True, "evidence": True, "input": False, "gguf": False, "hf": False,
             "tied_to": False, "inferred": False, "repeat": False, "bank": False}

    def __init__(self, doc: Located, sha256: str) -> None:
        self.doc = doc
        self.sha256 = sha256
        self.config_names: set[str] = set()
        self.bool_names: set[str] = set()
        self.used_transforms: dict[str, tuple] = {}

    def fail(self, path: tuple, message: str, rule: str = "mapping_schema") -> MappingError:
        return MappingError(message, file=self.doc.where(path), json_path=".".join(map(str, path)) or None,
                            rule=rule)

    def fields(self, value, path: tuple, spec: dict[str, bool], what: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"{what} must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in spec:
                raise self.fail((*path, key), f"unknown key {key!r} in {what} (allowed: {', '.join(spec)})",
                                rule="unknown_key")
        for key, required in spec.items():
            if required and key not in value:
                raise self.fail(path, f"{what} lacks the required field {key!r}", rule="missing_field")
        return value

    def string(self, value, path: tuple, what: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, f"{what} must be a non-empty string")
        return value

    def boolean(self, value, path: tuple, what: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"{what} must be true or false")
        return value

    def expression(self, value, path: tuple, allowed: set[str]) -> str | int:
        try:
            used = expr.names(value)
        except expr.ExprError as exc:
            raise self.fail(path, str(exc), rule="expression") from None
        unknown = sorted(used - allowed)
        if unknown:
            raise self.fail(path, f"expression {value!r} uses unknown name(s) {', '.join(unknown)}",
                            rule="expression")
        return value

    def load(self) -> Mapping:
        top = self.fields(self.doc.data, (), self.TOP, "the mapping file")
        arch = self.string(top["architecture"], ("architecture",), "architecture")
        if arch not in ARCHITECTURE_MODULES:
            raise self.fail(("architecture",), f"unknown architecture {arch!r} "
                            f"(known: {', '.join(ARCHITECTURE_MODULES)})", rule="unknown_architecture")
        mod = architecture_module(arch)
        for f in dataclasses.fields(mod.Args):
            (self.bool_names if f.type in (bool, "bool") else self.config_names).add(f.name)
        prefixes = self.load_prefixes(top.get("prefixes", {}))
        symbols = self.load_symbols(top.get("symbols", {}))
        names = self.config_names | {s for s, _ in symbols}
        groups = self.load_parameters(top["parameters"], names, prefixes)
        layer_count, kinds = self.load_layers(top.get("layers"), names, mod, groups, prefixes)
        self.check_layer_placeholders(groups, kinds)
        rules = self.load_rules(top["rules"])
        for t, path in self.used_transforms.items():
            if not any(t in r.transforms for r in rules.values()):
                raise self.fail(path, f"transform {t!r} is used but no rule in 'rules' cites it (evidence)",
                                rule="transform_without_rule")
        inputs = self.load_inputs(top.get("source", "main"))
        m = Mapping(
            file=self.doc.file, sha256=self.sha256, architecture=arch,
            component=self.string(top["component"], ("component",), "component"),
            source=inputs[0], inputs=inputs,
            doc=self.string(top["doc"], ("doc",), "doc"),
            prefixes=prefixes, symbols=symbols, layer_count=layer_count, kinds=kinds, rules=rules,
            groups=groups,
            other_components=self.load_others(top.get("other_components", []), names),
            drops=self.load_drops(top.get("drop", [])),
            unresolved=self.load_unresolved(top.get("unresolved", [])),
            stored_like=self.load_roles(top.get("roles", {}), groups),
        )
        if "counts" in top:
            m = dataclasses.replace(m, counts=self.check_counts(top["counts"], m.derived_counts()))
        return m

    def load_roles(self, value, groups) -> dict[str, str]:
        """``roles: {ROLE: {stored_like: OTHER}}``: a role this mapping introduces is stored as a recipe stores
        OTHER unless the recipe names it (docs/recipes.md §Roles), so shipped recipes need no edit."""
        if not isinstance(value, dict):
            raise self.fail(("roles",), "roles must be a mapping of role: {stored_like: role}")
        used = {p.role for rules in groups.values() for p in rules}
        out = {}
        for role, spec in value.items():
            path = ("roles", role)
            spec = self.fields(spec, path, {"stored_like": True}, f"role {role}")
            if role not in used:
                raise self.fail(path, f"role {role!r} is not the role of any parameter of this mapping",
                                rule="unknown_role")
            like = self.string(spec["stored_like"], (*path, "stored_like"), "stored_like")
            if like == role:
                raise self.fail((*path, "stored_like"), f"role {role!r} cannot be stored like itself")
            out[role] = like
        return out

    def check_counts(self, value, derived: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        """Declared ``counts`` (docs/ternary.md §2) must equal what the rules define."""
        value = self.fields(value, ("counts",), dict.fromkeys(derived, False), "counts")
        for scope, declared in value.items():
            path = ("counts", scope)
            declared = self.fields(declared, path, dict.fromkeys(derived[scope], False), f"counts of {scope}")
            for key, n in declared.items():
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise self.fail((*path, key), f"{key} must be a non-negative integer")
                if n != derived[scope][key]:
                    raise self.fail((*path, key), f"declares {n} {key.replace('_', ' ')} for {scope}, but the "
                                    f"rules define {derived[scope][key]}", rule="counts_mismatch")
        return {scope: dict(v) for scope, v in value.items()}

    def load_prefixes(self, value) -> dict[str, dict[str, tuple[str, ...]]]:
        out: dict[str, dict[str, tuple[str, ...]]] = {}
        kinds = self.fields(value, ("prefixes",), dict.fromkeys(SOURCE_KINDS, False), "prefixes")
        for kind, table in kinds.items():
            if not isinstance(table, dict):
                raise self.fail(("prefixes", kind), "prefixes per source kind must be a mapping")
            out[kind] = {}
            for name, alts in table.items():
                path = ("prefixes", kind, name)
                if not re.fullmatch(r"[a-z_]+", name) or name == LAYER_PLACEHOLDER:
                    raise self.fail(path, f"placeholder name {name!r} must be lower-case letters and not 'l'")
                if not isinstance(alts, list) or not alts or not all(isinstance(a, str) for a in alts):
                    raise self.fail(path, "a prefix is a non-empty list of alternatives (strings)")
                out[kind][name] = tuple(alts)
        return out

    def load_symbols(self, value) -> tuple[tuple[str, str | int], ...]:
        if not isinstance(value, dict):
            raise self.fail(("symbols",), "symbols must be a mapping of name: expression")
        known = set(self.config_names)
        out = []
        for name, e in value.items():
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or name in known or name == LAYER_PLACEHOLDER:
                raise self.fail(("symbols", name), f"symbol {name!r} is not a new lower-case name")
            out.append((name, self.expression(e, ("symbols", name), known)))
            known.add(name)
        return tuple(out)

    def load_layers(self, value, names: set[str], mod, groups: dict, prefixes) -> tuple:
        if value is None:
            return None, {}
        layers = self.fields(value, ("layers",), {"count": True, "kinds": True}, "layers")
        count = self.expression(layers["count"], ("layers", "count"), names)
        kinds_in = layers["kinds"]
        if not isinstance(kinds_in, dict) or not kinds_in:
            raise self.fail(("layers", "kinds"), "kinds must be a non-empty mapping")
        kinds = {}
        for kind, spec in kinds_in.items():
            path = ("layers", "kinds", kind)
            if kind not in mod.LAYER_KINDS:
                raise self.fail(path, f"layer kind {kind!r} is not one of {mod.__name__}.LAYER_KINDS "
                                f"{mod.LAYER_KINDS}", rule="unknown_layer_kind")
            spec = self.fields(spec, path, {"groups": True, "probe": True}, f"layer kind {kind}")
            gs = spec["groups"]
            if not isinstance(gs, list) or not gs:
                raise self.fail((*path, "groups"), "groups must be a non-empty list")
            for g in gs:
                if g not in groups:
                    raise self.fail((*path, "groups"), f"group {g!r} is not under 'parameters'",
                                    rule="unknown_group")
            probes = self.fields(spec["probe"], (*path, "probe"), dict.fromkeys(SOURCE_KINDS, False), "probe")
            loaded = {}
            for sk, t in probes.items():
                names_ = t if isinstance(t, list) and t else [t]
                loaded[sk] = tuple(self.template(n, (*path, "probe", sk), {LAYER_PLACEHOLDER} | set(prefixes.get(sk, {})),
                                                 names | {LAYER_PLACEHOLDER}) for n in names_)
            kinds[kind] = LayerKind(kind, tuple(gs), loaded)
        return count, kinds

    def template(self, text, path: tuple, allowed: set[str], expr_names: set[str] = frozenset()) -> str:
        """A name template: ``{placeholder}`` from ``allowed`` or ``expr_names``; ``{expression}`` over
        ``expr_names`` (integers: the config names, symbols and index placeholders) where any are given."""
        text = self.string(text, path, "a name template")
        for ph in PLACEHOLDER_RE.findall(text):
            if ph not in allowed and ph not in expr_names:
                raise self.fail(path, f"unknown placeholder {{{ph}}} (allowed here: "
                                f"{', '.join(sorted(allowed)) or 'none'})", rule="placeholder")
        for e in EXPR_PLACEHOLDER_RE.findall(text):
            if not expr_names:
                raise self.fail(path, f"{{{e}}}: expressions are not allowed in this template", rule="placeholder")
            self.expression(e, path, expr_names)
        return text

    def load_inputs(self, value) -> tuple[str, ...]:
        """``source``: one input name, or a non-empty list of distinct names tried in order."""
        items = value if isinstance(value, list) else [value]
        if not items or len(set(map(str, items))) != len(items):
            raise self.fail(("source",), "source is an input name or a non-empty list of distinct input names")
        return tuple(self.string(v, ("source",), "source") for v in items)

    def load_rules(self, value) -> dict[str, Rule]:
        if not isinstance(value, dict) or not value:
            raise self.fail(("rules",), "rules must be a non-empty mapping of name: rule")
        out = {}
        for name, spec in value.items():
            path = ("rules", name)
            spec = self.fields(spec, path, {"transforms": True, "evidence": True, "inferred": False}, f"rule {name}")
            ts = spec["transforms"]
            if not isinstance(ts, list):
                raise self.fail((*path, "transforms"), "transforms must be a list (possibly empty)")
            for t in ts:
                if t not in transform_registry.REGISTRY:
                    raise self.fail((*path, "transforms"), f"unknown transform {t!r}", rule="unknown_transform")
            out[name] = Rule(name, tuple(ts), self.string(spec["evidence"], (*path, "evidence"), "evidence"),
                             self.boolean(spec.get("inferred", False), (*path, "inferred"), "inferred"),
                             self.doc.line(path))
        return out

    def load_parameters(self, value, names: set[str], prefixes) -> dict[str, tuple[ParameterRule, ...]]:
        if not isinstance(value, dict) or not value:
            raise self.fail(("parameters",), "parameters must be a non-empty mapping of group: parameters")
        out: dict[str, tuple[ParameterRule, ...]] = {}
        seen: set[str] = set()
        for group, params in value.items():
            if not isinstance(params, dict) or not params:
                raise self.fail(("parameters", group), "a parameter group must be a non-empty mapping")
            rules = []
            for name, spec in params.items():
                path = ("parameters", group, name)
                if not NAME_RE.fullmatch(name):
                    raise self.fail(path, f"parameter name {name!r} is not a path of lower-case segments")
                if name in seen:
                    raise self.fail(path, f"parameter {name!r} is defined twice", rule="duplicate_parameter")
                seen.add(name)
                rules.append(self.load_parameter(name, group, spec, path, names, prefixes))
            out[group] = tuple(rules)
        return out

    def load_parameter(self, name: str, group: str, spec, path: tuple, names: set[str], prefixes) -> ParameterRule:
        spec = self.fields(spec, path, self.PARAM, f"parameter {name}")
        repeat: list[tuple[str, str | int]] = []
        if "repeat" in spec:
            rep = spec["repeat"]
            if not isinstance(rep, dict) or not rep:
                raise self.fail((*path, "repeat"), "repeat must map a placeholder to a count expression")
            for ph, count in rep.items():
                if not re.fullmatch(r"[a-k,m-z]", ph):
                    raise self.fail((*path, "repeat", ph), f"repeat placeholder {ph!r} must be one letter, not 'l'")
                repeat.append((ph, self.expression(count, (*path, "repeat", ph), names)))
        placeholders = {LAYER_PLACEHOLDER} | {ph for ph, _ in repeat}
        local = names | placeholders
        for ph in PLACEHOLDER_RE.findall(name):
            if ph not in placeholders:
                raise self.fail(path, f"unknown placeholder {{{ph}}} in parameter name", rule="placeholder")
        shape = spec["shape"]
        if not isinstance(shape, list) or len(shape) > 16:
            raise self.fail((*path, "shape"), "shape must be a list of at most 16 expressions")
        shape = tuple(self.expression(d, (*path, "shape", i), local) for i, d in enumerate(shape))
        role = self.string(spec["role"], (*path, "role"), "role")
        if not ROLE_RE.fullmatch(role):
            raise self.fail((*path, "role"), f"role {role!r} must be dotted lower-case words (mlp.gate)")
        sources = {}
        for sk in SOURCE_KINDS:
            if sk in spec:
                sources[sk] = self.load_source(spec[sk], (*path, sk), local, placeholders | set(prefixes.get(sk, {})))
        tied_to = tied_when = None
        if "tied_to" in spec:
            tie = self.fields(spec["tied_to"], (*path, "tied_to"), {"parameter": True, "when": False}, "tied_to")
            tied_to = self.string(tie["parameter"], (*path, "tied_to", "parameter"), "tied_to.parameter")
            tied_when = tie.get("when")
            if tied_when is not None and tied_when not in self.bool_names:
                raise self.fail((*path, "tied_to", "when"), f"{tied_when!r} is not a boolean config field "
                                f"of the architecture (booleans: {', '.join(sorted(self.bool_names))})")
        if not sources and tied_to is None:
            raise self.fail(path, f"parameter {name} has no source ({' or '.join(SOURCE_KINDS)}) and is not tied",
                            rule="missing_field")
        inp = spec.get("input")
        if inp is not None:
            inp = self.template(inp, (*path, "input"), placeholders)
        bank = spec.get("bank")
        if bank is not None:
            bank = self.template(bank, (*path, "bank"), {LAYER_PLACEHOLDER})
            if not repeat or not NAME_RE.fullmatch(bank) or tied_to is not None or len(shape) != 2:
                raise self.fail((*path, "bank"), f"bank {bank!r}: a bank is an object id (lower-case path, only "
                                "{l}) stacking the rows of a repeated, untied matrix parameter", rule="bank")
        return ParameterRule(
            name=name, group=group, shape=shape, role=role, input=inp, sources=sources, tied_to=tied_to,
            tied_when=tied_when, repeat=tuple(repeat),
            evidence=self.string(spec["evidence"], (*path, "evidence"), "evidence"),
            inferred=self.boolean(spec.get("inferred", False), (*path, "inferred"), "inferred"),
            line=self.doc.line(path), bank=bank)

    def load_source(self, value, path: tuple, names: set[str], placeholders: set[str]) -> SourceRule:
        if isinstance(value, list):  # alternatives, tried in order
            if not value:
                raise self.fail(path, "a list of source alternatives must not be empty")
            choices = []
            for i, v in enumerate(value):
                if isinstance(v, list):
                    raise self.fail((*path, i), "source alternatives do not nest")
                choices.append(self.load_source(v, (*path, i), names, placeholders))
            return dataclasses.replace(choices[0], alternatives=tuple(choices[1:]))
        if isinstance(value, str):
            return SourceRule(self.template(value, path, placeholders, names), (), self.doc.line(path))
        stacked = isinstance(value, dict) and "stack" in value
        spec = self.fields(value, path, {"tensor": not stacked, "stack": False, "transforms": False,
                                         "transpose": False}, "a source rule")
        if stacked and "tensor" in spec:
            raise self.fail(path, "a source rule has tensor or stack, not both")
        steps = []
        ts = spec.get("transforms", [])
        if not isinstance(ts, list):
            raise self.fail((*path, "transforms"), "transforms must be a list")
        for i, step in enumerate(ts):
            steps.append(self.load_step(step, (*path, "transforms", i), names))
        transpose = spec.get("transpose", False)
        if not isinstance(transpose, bool) or (transpose and stacked):
            raise self.fail((*path, "transpose"), "transpose is true or false, and not with stack")
        if not stacked:
            return SourceRule(self.template(spec["tensor"], (*path, "tensor"), placeholders, names), tuple(steps),
                              self.doc.line(path), transpose=transpose)
        members = spec["stack"]
        if not isinstance(members, list) or len(members) < 2:
            raise self.fail((*path, "stack"), "stack is a list of at least two tensor names")
        stack = tuple(self.template(t, (*path, "stack", i), placeholders, names) for i, t in enumerate(members))
        return SourceRule(stack[0], tuple(steps), self.doc.line(path), stack=stack)

    def load_step(self, step, path: tuple, names: set[str]) -> TransformStep:
        if isinstance(step, str):
            name, args = step, {}
        elif isinstance(step, dict) and len(step) == 1:
            name, args = next(iter(step.items()))
            path = (*path, name)
            if not isinstance(args, dict):
                raise self.fail(path, f"arguments of {name} must be a mapping")
        else:
            raise self.fail(path, "a transform is a name or a one-key mapping {name: {arg: expression}}")
        if name not in transform_registry.REGISTRY:
            raise self.fail(path, f"unknown transform {name!r} (known: "
                            f"{', '.join(sorted(transform_registry.REGISTRY))})", rule="unknown_transform")
        t = transform_registry.REGISTRY[name]
        missing = [p for p in t.params if p not in args]
        extra = [a for a in args if a not in t.params]
        if missing or extra:
            raise self.fail(path, f"transform {name} takes ({', '.join(t.params)}); "
                            f"missing {missing or 'none'}, unknown {extra or 'none'}", rule="transform_args")
        self.used_transforms.setdefault(name, path)
        return TransformStep(name, tuple((a, self.expression(args[a], (*path, a), names)) for a in t.params),
                             self.doc.line(path))

    def check_layer_placeholders(self, groups: dict, kinds: dict[str, LayerKind]) -> None:
        per_layer = {g for k in kinds.values() for g in k.groups}
        for group, rules in groups.items():
            for r in rules:
                has_l = f"{{{LAYER_PLACEHOLDER}}}" in r.name
                if group in per_layer and not has_l:
                    raise self.fail(("parameters", group, r.name),
                                    f"{r.name} is in per-layer group {group} but has no {{l}}", rule="placeholder")
                if group not in per_layer and has_l:
                    raise self.fail(("parameters", group, r.name),
                                    f"{r.name} uses {{l}} but group {group} is not a layer kind's group",
                                    rule="placeholder")
                if group not in per_layer:
                    for sk, src in ((sk, c) for sk, rule in r.sources.items() for c in rule.choices()):
                        for tensor in src.stack or (src.tensor,):
                            if LAYER_PLACEHOLDER in template_names(tensor):
                                raise self.fail(("parameters", group, r.name, sk), f"unknown placeholder {{l}} in "
                                                f"{tensor}: group {group} is global", rule="placeholder")
                    if r.bank and "{l}" in r.bank:
                        raise self.fail(("parameters", group, r.name, "bank"), f"unknown placeholder {{l}} in "
                                        f"{r.bank}: group {group} is global", rule="placeholder")
                    if r.input and "{l}" in r.input:
                        raise self.fail(("parameters", group, r.name, "input"), f"unknown placeholder {{l}} in "
                                        f"{r.input}: group {group} is global", rule="placeholder")

    def load_others(self, value, names: set[str]) -> tuple[OtherComponent, ...]:
        if not isinstance(value, list):
            raise self.fail(("other_components",), "other_components must be a list")
        out = []
        for i, spec in enumerate(value):
            path = ("other_components", i)
            spec = self.fields(spec, path, {"component": True, "evidence": True, "gguf_from_layer": False,
                                            **dict.fromkeys(SOURCE_KINDS, False)}, "an other_components entry")
            pats = {sk: self.regex(spec[sk], (*path, sk)) for sk in SOURCE_KINDS if sk in spec}
            from_layer = spec.get("gguf_from_layer")
            if from_layer is not None:
                from_layer = self.expression(from_layer, (*path, "gguf_from_layer"), names)
            if not pats and from_layer is None:
                raise self.fail(path, "an other_components entry needs a pattern or gguf_from_layer")
            out.append(OtherComponent(self.string(spec["component"], (*path, "component"), "component"), pats,
                                      from_layer, self.string(spec["evidence"], (*path, "evidence"), "evidence")))
        return tuple(out)

    def load_drops(self, value) -> tuple[Drop, ...]:
        if not isinstance(value, list):
            raise self.fail(("drop",), "drop must be a list")
        out = []
        for i, spec in enumerate(value):
            path = ("drop", i)
            spec = self.fields(spec, path, {"evidence": True, **dict.fromkeys(SOURCE_KINDS, False)}, "a drop entry")
            pats = {sk: self.regex(spec[sk], (*path, sk)) for sk in SOURCE_KINDS if sk in spec}
            if not pats:
                raise self.fail(path, "a drop entry needs a pattern for at least one source kind")
            out.append(Drop(pats, self.string(spec["evidence"], (*path, "evidence"), "evidence")))
        return tuple(out)

    def regex(self, value, path: tuple) -> str:
        value = self.string(value, path, "a pattern")
        try:
            re.compile(value)
        except re.error as exc:
            raise self.fail(path, f"pattern {value!r} does not compile: {exc}") from None
        return value

    def load_unresolved(self, value) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(("unresolved",), "unresolved must be a list of strings")
        return tuple(self.string(v, ("unresolved", i), "an unresolved note") for i, v in enumerate(value))
