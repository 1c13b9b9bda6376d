"""Load and validate the config-normalisation rules in ``mappings/config/*.yaml``.

A rules file says, per output field of a normalised component config (container §4.2: the architecture's
standard ``architectures``/``model_type`` and HF field names), where the value comes from in a GGUF
(metadata key, or a named derivation over keys and tensors) and in an HF ``config.json`` — with the
evidence for each rule. :mod:`converters.model.config_normalize` only *applies* these rules.

File schema (``schema: ninfer-config-map/1``)::

    component: text | vision
    architecture: <id>                 # unique over the directory
    extends: <other file>              # optional: start from that file's fields
    remove_fields: [<field>, ...]      # optional, with extends
    evidence: <text>
    gguf: {arch: <general.architecture>, projector_type: <clip.projector_type>, text_archs: [...]}
    hf:   {architectures: [...], model_types: [...], config_key: <nested config key>}
    output: {architectures: [...], model_type: <str>}
    fields:                            # optional with extends
      <name>:
        type: int | float | bool | str | int_list | str_list | dict
        min: <int>                     # optional lower bound (int)
        optional: true                 # omit when the source has no value (instead of an error)
        internal: true                 # evaluated as a check, not emitted
        evidence: <text>
        gguf: <rule>
        hf: <rule>

    <rule> := one of  {key: <name>, scope: text|root, else: <rule>}
                      {derive: <derivation>, args: {...}}
                      {const: <value>}
              plus optionally  default: <value>, default_evidence: <text>

Errors are :class:`~converters.errors.MappingError` naming ``file:line`` and the field. Parsing keeps
lines through :mod:`converters.mapping.located`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from converters import ROOT
from converters.errors import MappingError
from converters.mapping.located import Located, LocatedError, load_located

SCHEMA = "ninfer-config-map/1"
#: ``mappings/config`` of this checkout (the rules ship with the code).
RULES_DIR = ROOT / "mappings" / "config"

FIELD_TYPES = ("int", "float", "bool", "str", "int_list", "str_list", "dict")
_TOP_KEYS = {"schema", "component", "architecture", "extends", "remove_fields", "evidence", "gguf", "hf",
             "output", "fields"}
_REQUIRED_TOP = ("schema", "component", "architecture", "evidence", "gguf", "hf", "output")
_FIELD_KEYS = {"type", "min", "optional", "internal", "evidence", "gguf", "hf"}
_RULE_KEYS = {"key", "scope", "else", "derive", "args", "const", "default", "default_evidence"}
_GGUF_KEYS = {"arch", "projector_type", "text_archs"}
_HF_KEYS = {"architectures", "model_types", "config_key"}
_OUTPUT_KEYS = {"architectures", "model_type"}
MISSING = object()


@dataclass(frozen=True)
class Rule:
    """How one source kind yields one field (see the module docstring)."""

    key: str | None = None
    scope: str = "text"
    fallback: Rule | None = None
    derive: str | None = None
    args: Mapping | None = None
    const: object = MISSING
    default: object = MISSING
    default_evidence: str | None = None
    where: str = ""


@dataclass(frozen=True)
class FieldRule:
    name: str
    type: str
    evidence: str
    gguf: Rule
    hf: Rule
    min: int | None = None
    optional: bool = False
    internal: bool = False
    where: str = ""


@dataclass(frozen=True)
class ArchRules:
    """The rules of one architecture (one file, its ``extends`` chain resolved)."""

    file: str
    component: str
    architecture: str
    evidence: str
    gguf_arch: str
    hf_architectures: tuple[str, ...]
    hf_model_types: tuple[str, ...]
    output: Mapping
    fields: tuple[FieldRule, ...]
    gguf_projector_type: str | None = None
    gguf_text_archs: tuple[str, ...] = ()
    hf_config_key: str | None = None


def _fail(loc: Located, path: tuple, message: str, rule: str) -> MappingError:
    return MappingError(message, file=loc.where(path), json_path=".".join(str(p) for p in path) or None,
                        rule=rule)


def _check_keys(loc: Located, path: tuple, value: object, allowed: set[str], required=()) -> dict:
    if not isinstance(value, dict):
        raise _fail(loc, path, f"expected a mapping, got {type(value).__name__}", "mapping_type")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _fail(loc, (*path, unknown[0]), f"unknown key {unknown[0]!r} (allowed: {sorted(allowed)})",
                    "unknown_key")
    for key in required:
        if key not in value:
            raise _fail(loc, path, f"missing required key {key!r}", "missing_key")
    return value


def _check_str(loc: Located, path: tuple, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(loc, path, "expected a non-empty string", "string_type")
    return value


def _check_str_list(loc: Located, path: tuple, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(loc, path, "expected a list of strings", "list_type")
    return tuple(_check_str(loc, (*path, i), v) for i, v in enumerate(value))


def value_matches(value: object, type_: str) -> bool:
    """Whether a plain Python value has the field type ``type_`` (bools are not ints)."""
    if type_ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "bool":
        return isinstance(value, bool)
    if type_ == "str":
        return isinstance(value, str)
    if type_ == "int_list":
        return isinstance(value, list) and all(value_matches(v, "int") for v in value)
    if type_ == "str_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, dict)


def _parse_rule(loc: Located, path: tuple, raw: object, kind: str, type_: str,
                derivations: Mapping[str, frozenset[str]]) -> Rule:
    raw = _check_keys(loc, path, raw, _RULE_KEYS)
    chosen = [k for k in ("key", "derive", "const") if k in raw]
    if len(chosen) != 1:
        raise _fail(loc, path, "a rule needs exactly one of 'key', 'derive', 'const'", "rule_form")
    if "scope" in raw and (kind != "hf" or "key" not in raw or raw["scope"] not in ("text", "root")):
        raise _fail(loc, (*path, "scope"), "'scope' is text|root and only for hf key rules", "rule_form")
    if "else" in raw and "key" not in raw:
        raise _fail(loc, (*path, "else"), "'else' only follows a 'key' rule", "rule_form")
    if "args" in raw and "derive" not in raw:
        raise _fail(loc, (*path, "args"), "'args' only goes with 'derive'", "rule_form")
    if ("default" in raw) != ("default_evidence" in raw):
        raise _fail(loc, path, "'default' needs 'default_evidence' (cite who applies it) and vice versa",
                    "default_evidence")
    for name in ("const", "default"):
        if name in raw and not value_matches(raw[name], type_):
            raise _fail(loc, (*path, name), f"{name} {raw[name]!r} is not of type {type_}", "value_type")
    args = raw.get("args") or {}
    if "derive" in raw:
        name = _check_str(loc, (*path, "derive"), raw["derive"])
        if name not in derivations:
            raise _fail(loc, (*path, "derive"), f"unknown derivation {name!r} (known: {sorted(derivations)})",
                        "unknown_derivation")
        if not isinstance(args, dict):
            raise _fail(loc, (*path, "args"), "args must be a mapping", "mapping_type")
        missing = sorted(derivations[name] - set(args))
        if missing:
            raise _fail(loc, (*path, "args"), f"derivation {name!r} needs args {missing}", "missing_key")
    fallback = None
    if "else" in raw:
        fallback = _parse_rule(loc, (*path, "else"), raw["else"], kind, type_, derivations)
    return Rule(key=_check_str(loc, (*path, "key"), raw["key"]) if "key" in raw else None,
                scope=raw.get("scope", "text"), fallback=fallback, derive=raw.get("derive"), args=args,
                const=raw.get("const", MISSING), default=raw.get("default", MISSING),
                default_evidence=raw.get("default_evidence"), where=loc.where(path))


def _parse_field(loc: Located, name: str, raw: object, derivations) -> FieldRule:
    path = ("fields", name)
    raw = _check_keys(loc, path, raw, _FIELD_KEYS, required=("type", "evidence", "gguf", "hf"))
    type_ = raw["type"]
    if type_ not in FIELD_TYPES:
        raise _fail(loc, (*path, "type"), f"unknown type {type_!r} (known: {list(FIELD_TYPES)})", "field_type")
    minimum = raw.get("min")
    if minimum is not None and (type_ != "int" or not value_matches(minimum, "int")):
        raise _fail(loc, (*path, "min"), "'min' is an integer bound of an int field", "field_type")
    for flag in ("optional", "internal"):
        if not isinstance(raw.get(flag, False), bool):
            raise _fail(loc, (*path, flag), f"'{flag}' is true or false", "field_type")
    return FieldRule(name=name, type=type_, evidence=_check_str(loc, (*path, "evidence"), raw["evidence"]),
                     gguf=_parse_rule(loc, (*path, "gguf"), raw["gguf"], "gguf", type_, derivations),
                     hf=_parse_rule(loc, (*path, "hf"), raw["hf"], "hf", type_, derivations),
                     min=minimum, optional=raw.get("optional", False), internal=raw.get("internal", False),
                     where=loc.where(path))


def _compose(path: Path, parsed: dict[Path, Located]) -> Located:
    """``path`` composed once per directory load: a base file is read by every file that extends it."""
    if path not in parsed:
        parsed[path] = load_located(path)
    return parsed[path]


def _load_file(path: Path, derivations, chain: tuple[Path, ...], parsed: dict[Path, Located],
               loaded: dict[Path, ArchRules]) -> ArchRules:
    if path in chain:
        raise MappingError(f"'extends' cycle: {' -> '.join(p.name for p in (*chain, path))}", file=str(path),
                           rule="extends_cycle")
    if path in loaded:  # a base already validated for another file of the directory
        return loaded[path]
    try:
        loc = _compose(path, parsed)
    except LocatedError as exc:
        raise MappingError(str(exc), file=f"{path}:{exc.line}", rule="yaml_syntax") from None
    except OSError as exc:
        raise MappingError(f"cannot read rules file: {exc.strerror}", file=str(path), rule="file_readable") from None
    top = _check_keys(loc, (), loc.data, _TOP_KEYS, required=_REQUIRED_TOP)
    if top["schema"] != SCHEMA:
        raise _fail(loc, ("schema",), f"schema {top['schema']!r} is not {SCHEMA!r}", "schema_version")
    component = top["component"]
    if component not in ("text", "vision"):
        raise _fail(loc, ("component",), f"component {component!r} is not text or vision", "component")
    gguf = _check_keys(loc, ("gguf",), top["gguf"], _GGUF_KEYS, required=("arch",))
    hf = _check_keys(loc, ("hf",), top["hf"], _HF_KEYS, required=("architectures", "model_types"))
    output = _check_keys(loc, ("output",), top["output"], _OUTPUT_KEYS, required=("model_type",))
    if component == "text" and "architectures" not in output:
        raise _fail(loc, ("output",), "a text config names its architectures", "missing_key")
    if "fields" not in top and "extends" not in top:
        raise _fail(loc, (), "missing required key 'fields'", "missing_key")
    if not isinstance(top.get("fields", {}), dict):
        raise _fail(loc, ("fields",), "fields must be a mapping", "mapping_type")

    fields: dict[str, FieldRule] = {}
    if "extends" in top:
        base = _load_file(path.parent / _check_str(loc, ("extends",), top["extends"]), derivations,
                          (*chain, path), parsed, loaded)
        if base.component != component:
            raise _fail(loc, ("extends",), f"extends a {base.component} file", "component")
        fields = {f.name: f for f in base.fields}
    removed = _check_str_list(loc, ("remove_fields",), top.get("remove_fields", []))
    if removed and "extends" not in top:
        raise _fail(loc, ("remove_fields",), "remove_fields needs extends", "rule_form")
    for i, name in enumerate(removed):
        if name not in fields:
            raise _fail(loc, ("remove_fields", i), f"no inherited field {name!r} to remove", "unknown_field")
        del fields[name]
    for name, raw in top.get("fields", {}).items():
        fields[name] = _parse_field(loc, name, raw, derivations)
    if not fields:
        raise _fail(loc, ("fields",), "no fields", "missing_key")
    out_map: dict[str, object] = {}
    if "architectures" in output:
        out_map["architectures"] = list(_check_str_list(loc, ("output", "architectures"), output["architectures"]))
    out_map["model_type"] = _check_str(loc, ("output", "model_type"), output["model_type"])
    loaded[path] = ArchRules(
        file=str(path), component=component,
        architecture=_check_str(loc, ("architecture",), top["architecture"]),
        evidence=_check_str(loc, ("evidence",), top["evidence"]),
        gguf_arch=_check_str(loc, ("gguf", "arch"), gguf["arch"]),
        gguf_projector_type=gguf.get("projector_type"),
        gguf_text_archs=_check_str_list(loc, ("gguf", "text_archs"), gguf.get("text_archs", [])),
        hf_architectures=_check_str_list(loc, ("hf", "architectures"), hf["architectures"]),
        hf_model_types=_check_str_list(loc, ("hf", "model_types"), hf["model_types"]),
        hf_config_key=hf.get("config_key"),
        output=out_map,
        fields=tuple(fields.values()),
    )
    return loaded[path]


def load_rules(directory: Path, derivations: Mapping[str, frozenset[str]]) -> dict[str, ArchRules]:
    """Every ``*.yaml`` with the config-map schema under ``directory``, keyed by ``architecture``.

    ``derivations`` maps each derivation name the caller implements to the args it requires; a rule naming
    another derivation, or leaving out a required arg, is rejected here, before any source is read.
    """
    directory = Path(directory)
    # the cache key includes each file's size and mtime, so an edited rules file is read again
    signature = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(directory.glob("*.yaml")))
    return dict(_load_all(directory, signature, tuple(sorted((k, frozenset(v)) for k, v in derivations.items()))))


@functools.lru_cache(maxsize=8)
def _load_all(directory: Path, signature: tuple, derivations: tuple) -> tuple[tuple[str, ArchRules], ...]:
    known = dict(derivations)
    out: dict[str, ArchRules] = {}
    parsed: dict[Path, Located] = {}  # each file composed and validated once, however many extend it
    loaded: dict[Path, ArchRules] = {}
    for path in sorted(directory.glob("*.yaml")):
        if not _is_config_map(path, parsed):
            continue
        rules = _load_file(path, known, (), parsed, loaded)
        if rules.architecture in out:
            raise MappingError(f"architecture {rules.architecture!r} also defined in {out[rules.architecture].file}",
                               file=str(path), rule="duplicate_architecture")
        out[rules.architecture] = rules
    return tuple(out.items())


def _is_config_map(path: Path, parsed: dict[Path, Located]) -> bool:
    """Files of another schema (the frontend rules, ``ninfer-frontend-map/1``) share the directory."""
    try:
        loc = _compose(path, parsed)
    except LocatedError as exc:
        raise MappingError(str(exc), file=f"{path}:{exc.line}", rule="yaml_syntax") from None
    schema = loc.data.get("schema") if isinstance(loc.data, dict) else None
    if schema == SCHEMA:
        return True
    if isinstance(schema, str) and schema.startswith("ninfer-") and schema.endswith("/1"):
        return False
    raise MappingError(f"unknown schema {schema!r}", file=loc.where(("schema",)), rule="schema_version")
