"""Normalise a source's model config to HF field names: ``components.text.config`` / ``vision.config``.

Container §4.2: a component's ``config`` carries the architecture's standard ``architectures`` /
``model_type`` and a few instance fields; the source adapter reads the upstream layout (``text_config``,
``vision_config``, GGUF metadata) and writes the normalised result. The field rules — which GGUF key or
``config.json`` key feeds which field, the defaults transformers or llama.cpp apply, the evidence — are
data in ``mappings/config/*.yaml`` (:mod:`converters.model.config_rules`); this module applies them:

- :func:`normalize_text_config` / :func:`explain_text_config` for a GGUF (its ``general.architecture`` names
  a rules file's ``gguf.arch``: ``qwen2``, ``qwen3``, ``qwen35``, ``qwen3next``, ``qwen3moe``, ``qwen35moe``;
  a new architecture adds its file, not code) or an HF directory (``config.json``,
  the ``text_config`` of a ``*ForConditionalGeneration``, transformers 5 ``rope_parameters`` variants).
- :func:`normalize_vision_config` / :func:`explain_vision_config` for an mmproj GGUF (``clip.vision.*``)
  or an HF directory's ``vision_config``.

A required field the source lacks is a :class:`ConfigError` naming the file and the key; a value of the
wrong type, an inexact division, or a cross-check that fails (token count vs embedding rows, layer kinds
vs the tensors present, an untied config without ``lm_head.weight``) is one too. Nothing is guessed: a
default is used only where the rules file cites who applies it.

Floats read from GGUF metadata are float32 in the file; they are reported at float32's shortest
round-trip representation (``1e-06``, not ``9.99999997e-07``) so GGUF- and HF-derived configs agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from converters.model.config_derivations import (
    DERIVATIONS,
    SECTION,
    ConfigError,
    Missing,
    RuleContext,
    bool_list,
    plain,
)
from converters.model.config_rules import (
    MISSING,
    RULES_DIR,
    ArchRules,
    FieldRule,
    Rule,
    load_rules,
    value_matches,
)


@dataclass(frozen=True)
class NormalizedConfig:
    """A normalised component config and, per field, where its value came from (for provenance)."""

    config: dict
    evidence: dict[str, str]
    rules_file: str


def rules(directory: Path = RULES_DIR) -> dict[str, ArchRules]:
    """The validated rules of ``directory``, keyed by architecture id (cached)."""
    return load_rules(directory, {name: req for name, (_, req) in DERIVATIONS.items()})


# -- rule application --------------------------------------------------------------------------------------

def _apply_rule(ctx: RuleContext, field: FieldRule, rule: Rule) -> tuple[object, str]:
    """The value of ``field`` under ``rule`` and its evidence; raises Missing when the source has none."""
    try:
        if rule.const is not MISSING:
            return rule.const, "constant"
        if rule.key is not None:
            value = ctx.lookup(rule.key, rule.scope)
            if value is not MISSING:
                asked = ctx.key_name(rule.key)
                if asked in ctx.aliases:  # found under transformers' attribute_map alias
                    return value, (f"{ctx.kind} key {ctx.where(ctx.aliases[asked], rule.scope)} (transformers "
                                   f"attribute_map alias of {asked})")
                return value, f"{ctx.kind} key {ctx.where(asked, rule.scope)}"
            if rule.fallback is None:
                raise Missing(ctx.where(ctx.key_name(rule.key), rule.scope))
            try:
                return _apply_rule(ctx, field, rule.fallback)
            except Missing:
                raise Missing(ctx.where(ctx.key_name(rule.key), rule.scope)) from None
        fn, _ = DERIVATIONS[rule.derive]
        return fn(ctx, rule.args, field), f"derived ({rule.derive})"
    except Missing:
        if rule.default is not MISSING:
            return rule.default, f"default {rule.default!r}: {rule.default_evidence}"
        raise


def _coerce(ctx: RuleContext, field: FieldRule, value: object, rule: Rule) -> object:
    value = plain(value)
    if field.type == "float" and value_matches(value, "float"):
        value = float(value)
    if not value_matches(value, field.type):
        raise ctx.error(f"{field.name} is {value!r} ({type(value).__name__}), not {field.type}",
                        key=ctx.key_name(rule.key) if rule.key else field.name, rule="field_type")
    if field.min is not None and value < field.min:
        raise ctx.error(f"{field.name} = {value} is below {field.min}",
                        key=ctx.key_name(rule.key) if rule.key else field.name, rule="field_range")
    return value


def _evaluate(ctx: RuleContext, arch: ArchRules) -> NormalizedConfig:
    config: dict[str, object] = dict(arch.output)
    evidence: dict[str, str] = {}
    for field in arch.fields:
        rule = field.gguf if ctx.kind == "gguf" else field.hf
        try:
            value, said = _apply_rule(ctx, field, rule)
        except Missing as missing:
            if field.optional:
                continue
            raise ctx.error(f"required field {field.name} is missing: no {missing.what} "
                            f"(rule {rule.where})", key=missing.what, rule="required_field_missing") from None
        value = _coerce(ctx, field, value, rule)
        ctx.fields[field.name] = value
        if not field.internal:
            config[field.name] = value
            evidence[field.name] = said
    return NormalizedConfig(config=config, evidence=evidence, rules_file=arch.file)


def _gguf_context(source) -> RuleContext:
    metadata = source.metadata
    arch = plain(metadata.get("general.architecture")) if "general.architecture" in metadata else None
    if not isinstance(arch, str):
        raise ConfigError("no general.architecture string in the GGUF metadata", file=str(source.path),
                          json_path="general.architecture", section=SECTION, rule="required_field_missing")
    return RuleContext(source, "gguf", str(source.path), arch=arch, metadata=metadata)


def _hf_config(source) -> tuple[dict, str]:
    config = getattr(source, "config", None)
    file = str(Path(source.path) / "config.json")
    if not isinstance(config, Mapping):
        raise ConfigError("the HF source has no config.json object", file=file, section=SECTION,
                          rule="required_field_missing")
    return dict(config), file


def _match_hf(config: Mapping, file: str, candidates: list[ArchRules]) -> ArchRules:
    arches = config.get("architectures") or []
    arches = [a for a in arches if isinstance(a, str)] if isinstance(arches, list) else []
    model_type = config.get("model_type")
    model_type = model_type if isinstance(model_type, str) else None
    for arch in candidates:
        if any(a in arch.hf_architectures for a in arches):
            return arch
    for arch in candidates:
        if model_type in arch.hf_model_types:
            return arch
    raise ConfigError(f"architectures {arches} / model_type {model_type!r} match no rules file "
                      f"({', '.join(a.architecture for a in candidates)})", file=file, json_path="architectures",
                      section=SECTION, rule="unsupported_architecture")


def explain_text_config(source, *, rules_dir: Path = RULES_DIR) -> NormalizedConfig:
    """The normalised text config of a GGUF or HF source, with per-field evidence."""
    text_rules = [r for r in rules(rules_dir).values() if r.component == "text"]
    if source.kind == "gguf":
        ctx = _gguf_context(source)
        match = [r for r in text_rules if r.gguf_arch == ctx.arch]
        if not match:
            raise ctx.error(f"general.architecture {ctx.arch!r} is not one of "
                            f"{sorted(r.gguf_arch for r in text_rules)}", key="general.architecture",
                            rule="unsupported_architecture")
        return _evaluate(ctx, match[0])
    if source.kind != "hf":
        raise ConfigError(f"a {source.kind} source carries no model config; convert from the HF directory or a "
                          "GGUF", file=str(source.path), section=SECTION, rule="config_available")
    config, file = _hf_config(source)
    arch = _match_hf(config, file, text_rules)
    text = config.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise ConfigError("text_config is not an object", file=file, json_path="text_config", section=SECTION,
                          rule="field_type")
    return _evaluate(RuleContext(source, "hf", file, text=text if text is not None else config, root=config,
                                 text_path="text_config." if text is not None else ""), arch)


def normalize_text_config(source, *, rules_dir: Path = RULES_DIR) -> dict:
    """``components.text.config`` for ``source`` (HF field names; see :func:`explain_text_config`)."""
    return explain_text_config(source, rules_dir=rules_dir).config


def explain_vision_config(source, *, text_arch: str | None = None, rules_dir: Path = RULES_DIR) -> NormalizedConfig:
    """The normalised vision config of an mmproj GGUF or an HF directory with ``vision_config``.

    An mmproj does not say which text model it belongs to; ``text_arch`` (the text GGUF's
    ``general.architecture``: ``qwen35``, ``qwen35moe``, ``qwen3vl``...) selects the vision family and so
    its ``model_type``. Without it, only a tower with deepstack layers (Qwen3-VL) is unambiguous.
    """
    vision_rules = [r for r in rules(rules_dir).values() if r.component == "vision"]
    if source.kind == "gguf":
        ctx = _gguf_context(source)
        projector = ctx.lookup("clip.projector_type")
        candidates = [r for r in vision_rules if r.gguf_arch == ctx.arch and r.gguf_projector_type == projector]
        if projector is MISSING:  # a text GGUF given as --mmproj, say
            raise ctx.error(f"no clip.projector_type: this is not an mmproj GGUF (general.architecture "
                            f"{ctx.arch!r}); --mmproj takes the vision tower file llama.cpp writes beside the "
                            "text model", key="clip.projector_type", rule="mmproj_kind")
        if not candidates:
            raise ctx.error(f"general.architecture {ctx.arch!r} / clip.projector_type {projector!r} is not a "
                            "supported vision tower", key="clip.projector_type", rule="unsupported_architecture")
        if text_arch is not None:
            match = [r for r in candidates if text_arch in r.gguf_text_archs]
            if not match:
                raise ctx.error(f"no vision rules for text architecture {text_arch!r}", key="clip.projector_type",
                                rule="unsupported_architecture")
        else:
            deepstack = any(bool_list(ctx, "clip.vision.is_deepstack_layers") or [])
            match = [r for r in candidates if deepstack and any(f.name == "deepstack_visual_indexes"
                                                                 for f in r.fields)]
            if not match:
                raise ctx.error("the mmproj does not say which text model it belongs to; pass text_arch",
                                key="clip.projector_type", rule="vision_family_ambiguous")
        return _evaluate(ctx, match[0])
    config, file = _hf_config(source)
    if not isinstance(config.get("vision_config"), Mapping):
        raise ConfigError("config.json has no vision_config object: the checkpoint has no vision tower", file=file,
                          json_path="vision_config", section=SECTION, rule="required_field_missing")
    arch = _match_hf(config, file, vision_rules)
    key = arch.hf_config_key or "vision_config"
    vision = config.get(key)
    if not isinstance(vision, Mapping):
        raise ConfigError(f"no {key} object in config.json", file=file, json_path=key, section=SECTION,
                          rule="required_field_missing")
    declared = vision.get("model_type")
    if declared is not None and declared not in arch.hf_model_types:
        raise ConfigError(f"{key}.model_type {declared!r} is not one of {list(arch.hf_model_types)}",
                          file=file, json_path=f"{key}.model_type", section=SECTION, rule="field_mismatch")
    return _evaluate(RuleContext(source, "hf", file, text=vision, root=config, text_path=f"{key}."), arch)


def normalize_vision_config(source, *, text_arch: str | None = None, rules_dir: Path = RULES_DIR) -> dict:
    """``components.vision.config`` for ``source`` (see :func:`explain_vision_config`)."""
    return explain_vision_config(source, text_arch=text_arch, rules_dir=rules_dir).config


__all__ = ["ConfigError", "NormalizedConfig", "explain_text_config", "explain_vision_config",
           "normalize_text_config", "normalize_vision_config", "rules"]
