"""Named derivations of the config-normalisation rules, and the view of a source they read.

A rules file (``mappings/config/*.yaml``, :mod:`converters.model.config_rules`) names a derivation where a field
is not a plain key: ``gguf_vocab_size`` (token count, ``{arch}.vocab_size`` and embedding rows must
agree), ``gguf_layer_types`` (``attention.recurrent_layers`` or ``full_attention_interval``, cross-checked
with the ``attn_q`` tensors present), ``hf_rope_value`` (transformers 5 ``rope_parameters``, flat or nested
per layer type, or the legacy top-level keys / ``rope_scaling``), ... Each is a small function
``(ctx, args, field) -> value`` registered in :data:`DERIVATIONS` with the args it requires, so the rules
loader can reject an unknown name or a missing arg before any source is read. A derivation that finds
nothing raises :class:`Missing` (the caller applies the rule's cited default, or reports the field as
required); an inconsistency raises :class:`ConfigError` naming the file, the key and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from converters.errors import ConverterError
from converters.model.config_aliases import aliased_key
from converters.model.config_rules import MISSING, FieldRule, value_matches

SECTION = "§4.2"
_LEGACY_LAYER_TYPES = {"attention": "full_attention", "mamba": "linear_attention"}
_LAYER_TYPES = ("full_attention", "linear_attention")
_NESTED_ROPE_KEYS = {"full_attention", "sliding_attention", "linear_attention"}


class ConfigError(ConverterError, ValueError):
    """The source's config cannot be normalised: a missing/ill-typed field or a failed cross-check."""

    kind = "config"


class Missing(Exception):
    """A derivation found no value; ``what`` names the absent key or tensor."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


# -- source views ------------------------------------------------------------------------------------------

def plain(value: object) -> object:
    """A metadata value as plain Python (numpy scalars and arrays converted, tuples as lists)."""
    if isinstance(value, np.generic):
        if isinstance(value, np.floating) and value.dtype == np.float32:
            return float(str(value))
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return value


class RuleContext:
    """What the rules read: GGUF metadata and tensors, or an HF config dict (``text``) and its root."""

    def __init__(self, source, kind: str, file: str, *, arch: str = "", metadata: Mapping | None = None,
                 text: Mapping | None = None, root: Mapping | None = None, text_path: str = ""):
        self.source = source
        self.kind = kind
        self.file = file
        self.arch = arch
        self.metadata = metadata if metadata is not None else {}
        self.text = text if text is not None else {}
        self.root = root if root is not None else self.text
        self.text_path = text_path  # "text_config." / "vision_config." when the keys are nested in config.json
        self.tensors: Mapping = getattr(source, "tensors", None) or {}
        self.fields: dict[str, object] = {}
        self.aliases: dict[str, str] = {}  # key asked for -> the attribute_map alias that held it

    def error(self, message: str, *, key: str | None = None, rule: str) -> ConfigError:
        return ConfigError(message, file=self.file, json_path=self.where(key), section=SECTION, rule=rule)

    def where(self, key: str | None, scope: str = "text") -> str | None:
        """The JSON path of an HF config key (``text_config.hidden_size``); GGUF keys and tensor names as is."""
        if self.kind != "hf" or not key or "." in key or scope == "root":
            return key
        return self.text_path + key

    def key_name(self, name: str) -> str:
        return name.replace("{arch}", self.arch)

    def lookup(self, name: str, scope: str = "text") -> object:
        """A metadata / config key's value, or MISSING."""
        name = self.key_name(name)
        if self.kind == "gguf":
            if name not in self.metadata:
                return MISSING
            value = plain(self.metadata[name])
            type_of = getattr(self.metadata, "type_of", None)
            if isinstance(value, float) and type_of is not None and type_of(name) == "FLOAT32":
                value = float(str(np.float32(value)))  # the file holds float32: report its shortest repr
            return value
        holder = self.root if scope == "root" else self.text
        value = holder.get(name, MISSING) if isinstance(holder, Mapping) else MISSING
        if (value is MISSING or value is None) and isinstance(holder, Mapping):
            other = aliased_key(name, holder, self.root if isinstance(self.root, Mapping) else {})
            if other is not None:  # transformers' attribute_map: the same field under its other name
                self.aliases[name] = other
                return holder[other]
        return MISSING if value is None else value

    def array_length(self, name: str) -> int | None:
        """Element count of a GGUF array key without decoding it (from the header), or None if absent."""
        name = self.key_name(name)
        if name not in self.metadata:
            return None
        entry = getattr(self.metadata, "entry", None)
        count = getattr(getattr(entry(name), "value", None), "count", None) if entry is not None else None
        if count is not None:
            return count
        value = plain(self.metadata[name])
        return len(value) if isinstance(value, list) else None

    def ref(self, ref: object) -> object:
        """Resolve an argument: ``field:<name>`` (computed field), ``key:<name>`` (raises Missing), literal."""
        if isinstance(ref, str) and ref.startswith("field:"):
            name = ref[len("field:"):]
            if name not in self.fields:
                raise Missing(f"field {name}")
            return self.fields[name]
        if isinstance(ref, str) and ref.startswith("key:"):
            name = ref[len("key:"):]
            value = self.lookup(name)
            if value is MISSING:
                raise Missing(self.key_name(name))
            return value
        return ref

    def ref_name(self, ref: object) -> str:
        """What a reference names, for messages: the formatted key or the field name."""
        text = str(ref)
        for prefix in ("key:", "field:"):
            if text.startswith(prefix):
                return self.key_name(text[len(prefix):])
        return text

    def int_ref(self, ref: object) -> int:
        value = self.ref(ref)
        if not value_matches(value, "int"):
            raise self.error(f"{self.ref_name(ref)} is {value!r}, not an integer", key=self.ref_name(ref),
                             rule="field_type")
        return value

    def tensor_shape(self, name: str) -> tuple[int, ...] | None:
        t = self.tensors.get(name)
        return None if t is None else tuple(int(d) for d in t.shape)


# -- derivations (named by the rules files) ----------------------------------------------------------------

def _ratio(ctx: RuleContext, args: Mapping, field: FieldRule) -> float:
    num, den = ctx.int_ref(args["numerator"]), ctx.int_ref(args["denominator"])
    if den <= 0 or not 0 < num <= den:
        raise ctx.error(f"{field.name}: {ctx.ref_name(args['numerator'])} = {num} is not in "
                        f"(0, {ctx.ref_name(args['denominator'])} = {den}]", key=ctx.ref_name(args["numerator"]),
                        rule="ratio_range")
    return num / den


def _exact_quotient(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    num, den = ctx.int_ref(args["numerator"]), ctx.int_ref(args["denominator"])
    if den <= 0 or num % den:
        raise ctx.error(f"{field.name}: {ctx.ref_name(args['numerator'])} = {num} is not a multiple of "
                        f"{ctx.ref_name(args['denominator'])} = {den}", key=ctx.ref_name(args["numerator"]),
                        rule="exact_quotient")
    return num // den


def _floor_quotient(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    num, den = ctx.int_ref(args["numerator"]), ctx.int_ref(args["denominator"])
    if den <= 0:
        raise ctx.error(f"{field.name}: divisor {ctx.ref_name(args['denominator'])} = {den}",
                        key=ctx.ref_name(args["denominator"]), rule="exact_quotient")
    return num // den


def _same_as(ctx: RuleContext, args: Mapping, field: FieldRule) -> object:
    return ctx.ref(args["value"])


def _gguf_layer_count(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    blocks = ctx.int_ref("key:" + args["block_key"])
    nextn = ctx.lookup(args["nextn_key"])
    nextn = 0 if nextn is MISSING else nextn
    if not value_matches(nextn, "int") or not 0 <= nextn < blocks:
        raise ctx.error(f"{ctx.key_name(args['nextn_key'])} = {nextn!r} does not fit block_count {blocks}",
                        key=ctx.key_name(args["nextn_key"]), rule="layer_count")
    return blocks - nextn


def _gguf_vocab_size(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    seen: dict[str, int] = {}
    n_tokens = ctx.array_length(args["tokens_key"])
    if n_tokens is not None:
        seen[f"len({args['tokens_key']})"] = n_tokens
    count = ctx.lookup(args["count_key"])
    if count is not MISSING:
        seen[ctx.key_name(args["count_key"])] = count
    shape = ctx.tensor_shape(args["embedding_tensor"])
    if shape is not None:
        if len(shape) != 2:
            raise ctx.error(f"{args['embedding_tensor']} has shape {list(shape)}, not [vocab, hidden]",
                            key=args["embedding_tensor"], rule="embedding_shape")
        seen[f"rows of {args['embedding_tensor']}"] = shape[0]
    if not seen:
        raise Missing(f"{args['tokens_key']} / {args['embedding_tensor']}")
    if len(set(seen.values())) != 1:
        raise ctx.error("vocabulary sizes disagree: " + ", ".join(f"{k} = {v}" for k, v in seen.items()),
                        key=args["tokens_key"], rule="vocab_size_mismatch")
    return next(iter(seen.values()))


def _hf_vocab_size(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    vocab = ctx.lookup("vocab_size")
    if vocab is MISSING:
        raise Missing("vocab_size")
    for name in args["embedding_tensors"]:
        shape = ctx.tensor_shape(name)
        if shape is not None and shape[0] != vocab:
            raise ctx.error(f"vocab_size {vocab} but {name} has {shape[0]} rows", key="vocab_size",
                            rule="vocab_size_mismatch")
    return vocab


def _gguf_tied_embeddings(ctx: RuleContext, args: Mapping, field: FieldRule) -> bool:
    return args["head_tensor"] not in ctx.tensors


def _hf_tied_embeddings(ctx: RuleContext, args: Mapping, field: FieldRule) -> bool:
    found = {where: v for where, v in (("root", ctx.lookup("tie_word_embeddings", "root")),
                                       ("text_config", ctx.lookup("tie_word_embeddings"))) if v is not MISSING}
    for where, value in found.items():
        if not isinstance(value, bool):
            raise ctx.error(f"tie_word_embeddings is {value!r}, not a bool", rule="field_type",
                            key="tie_word_embeddings" if where == "text_config" else None)
    if len(set(found.values())) > 1:
        raise ctx.error(f"tie_word_embeddings differs between the root ({found['root']}) and text_config "
                        f"({found['text_config']})", key="tie_word_embeddings", rule="field_mismatch")
    tied = next(iter(found.values())) if found else args["default"]
    if not tied and ctx.tensors and not any(name in ctx.tensors for name in args["head_tensors"]):
        raise ctx.error(f"the config does not tie the embeddings but no head tensor ({args['head_tensors']}) "
                        "exists", key="tie_word_embeddings", rule="untied_head_missing")
    return tied


def _rope_dict(ctx: RuleContext) -> dict:
    """transformers 5 ``convert_rope_params_to_dict``: ``rope_scaling or rope_parameters``, flat or nested."""
    rp = ctx.lookup("rope_scaling")
    rp = ctx.lookup("rope_parameters") if rp is MISSING else rp
    if rp is MISSING:
        return {}
    if not isinstance(rp, Mapping):
        raise ctx.error(f"rope_parameters is {type(rp).__name__}, not an object", key="rope_parameters",
                        rule="field_type")
    if rp and all(isinstance(v, Mapping) for v in rp.values()) and set(rp) <= _NESTED_ROPE_KEYS:
        if "full_attention" not in rp:
            raise ctx.error("rope_parameters is nested by layer type but has no full_attention entry",
                            key="rope_parameters", rule="missing_field")
        return dict(rp["full_attention"])
    return dict(rp)


def _hf_rope_value(ctx: RuleContext, args: Mapping, field: FieldRule) -> object:
    value = _rope_dict(ctx).get(args["name"], MISSING)
    if value is MISSING or value is None:
        value = ctx.lookup(args["name"])
    if value is MISSING:
        raise Missing(args["name"])
    return value


def _scaling(ctx: RuleContext, rope_type: str, get: Callable[[str], object], names: Mapping[str, str]) -> dict:
    if rope_type in ("default", "none"):
        return {}
    if rope_type not in ("linear", "yarn"):
        raise ctx.error(f"rope scaling type {rope_type!r} is not supported (default, linear, yarn)",
                        key="rope_parameters", rule="unsupported_rope")
    out: dict[str, object] = {"rope_type": rope_type}
    for hf_name, src_name in names.items():
        value = get(src_name)
        if value is MISSING or value is None:
            continue
        kind = "int" if hf_name == "original_max_position_embeddings" else "float"
        if not value_matches(value, kind):
            raise ctx.error(f"rope scaling {hf_name} is {value!r}, not {kind}", key="rope_parameters",
                            rule="field_type")
        out[hf_name] = float(value) if kind == "float" else value
    if "factor" not in out:
        raise ctx.error(f"rope scaling {rope_type!r} without a factor", key="rope_parameters", rule="missing_field")
    return out


def _hf_rope_parameters(ctx: RuleContext, args: Mapping, field: FieldRule) -> dict:
    rp = _rope_dict(ctx)
    out = {"rope_type": "default", "rope_theta": ctx.fields["rope_theta"],
           "partial_rotary_factor": ctx.fields["partial_rotary_factor"]}
    rope_type = rp.get("rope_type", rp.get("type", "default"))
    if not isinstance(rope_type, str):
        raise ctx.error(f"rope_type is {rope_type!r}, not a string", key="rope_parameters", rule="field_type")
    out |= _scaling(ctx, rope_type, lambda k: rp.get(k, MISSING),
                    {"factor": "factor", "original_max_position_embeddings": "original_max_position_embeddings",
                     "attention_factor": "attention_factor", "beta_fast": "beta_fast", "beta_slow": "beta_slow"})
    if args.get("mrope"):
        section = rp.get("mrope_section")
        section = args["mrope_section_default"] if section is None else section
        interleaved = rp.get("mrope_interleaved")
        interleaved = args["mrope_interleaved_default"] if interleaved is None else interleaved
        if not value_matches(section, "int_list") or not isinstance(interleaved, bool):
            raise ctx.error(f"mrope_section {section!r} / mrope_interleaved {interleaved!r} are not a list of "
                            "integers and a bool", key="rope_parameters", rule="field_type")
        out["mrope_section"] = list(section)
        out["mrope_interleaved"] = interleaved
    return out


def _gguf_rope_parameters(ctx: RuleContext, args: Mapping, field: FieldRule) -> dict:
    prefix = args["scaling_prefix"]
    out = {"rope_type": "default", "rope_theta": ctx.fields["rope_theta"],
           "partial_rotary_factor": ctx.fields["partial_rotary_factor"]}
    rope_type = ctx.lookup(prefix + ".type")
    out |= _scaling(ctx, "default" if rope_type is MISSING else str(rope_type), lambda k: ctx.lookup(prefix + k),
                    {"factor": ".factor", "original_max_position_embeddings": ".original_context_length",
                     "attention_factor": ".yarn_attn_factor", "beta_fast": ".yarn_beta_fast",
                     "beta_slow": ".yarn_beta_slow"})
    if "sections_key" in args:
        sections = ctx.lookup(args["sections_key"])
        if sections is MISSING:
            raise Missing(ctx.key_name(args["sections_key"]))
        if not value_matches(sections, "int_list"):
            raise ctx.error(f"{ctx.key_name(args['sections_key'])} is {sections!r}, not a list of integers",
                            key=ctx.key_name(args["sections_key"]), rule="field_type")
        sections = list(sections)
        if len(sections) == 4 and sections[3] == 0:  # llama.cpp pads mrope_section to 4 entries
            sections = sections[:3]
        out["mrope_section"] = sections
        out["mrope_interleaved"] = args["mrope_interleaved"]
    return out


def _layer_types_for_interval(n: int, interval: int) -> list[str]:
    return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]


def _gguf_layer_types(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[str]:
    n = ctx.fields["num_hidden_layers"]
    recurrent = ctx.lookup(args["recurrent_key"])
    if recurrent is not MISSING:
        flags = recurrent if isinstance(recurrent, list) else [recurrent] * n
        if len(flags) < n or not all(isinstance(f, bool) for f in flags):
            raise ctx.error(f"{ctx.key_name(args['recurrent_key'])} is not {n} booleans",
                            key=ctx.key_name(args["recurrent_key"]), rule="field_type")
        types = ["linear_attention" if f else "full_attention" for f in flags[:n]]
    else:
        interval = ctx.lookup(args["interval_key"])
        interval = args["default_interval"] if interval is MISSING else interval
        if not value_matches(interval, "int") or interval < 1:
            raise ctx.error(f"full_attention_interval {interval!r} is not a positive integer",
                            key=ctx.key_name(args["interval_key"]), rule="field_type")
        types = _layer_types_for_interval(n, interval)
    _check_layer_kinds(ctx, types, [args["full_attention_probe"]], "the metadata")
    return types


def _hf_layer_types(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[str]:
    types = _hf_listed_layer_types(ctx, args)
    _check_layer_kinds(ctx, types, list(args["full_attention_probes"]), "layer_types")
    return types


def _hf_listed_layer_types(ctx: RuleContext, args: Mapping) -> list[str]:
    n = ctx.fields["num_hidden_layers"]
    listed = ctx.lookup("layer_types")
    if listed is MISSING:
        interval = ctx.lookup("full_attention_interval")
        interval = args["default_interval"] if interval is MISSING else interval
        if not value_matches(interval, "int") or interval < 1:
            raise ctx.error(f"full_attention_interval {interval!r} is not a positive integer",
                            key="full_attention_interval", rule="field_type")
        return _layer_types_for_interval(n, interval)
    if not value_matches(listed, "str_list") or len(listed) != n:
        raise ctx.error(f"layer_types is not a list of {n} strings", key="layer_types", rule="field_type")
    types = [_LEGACY_LAYER_TYPES.get(t, t) for t in listed]
    bad = sorted(set(types) - set(_LAYER_TYPES))
    if bad:
        raise ctx.error(f"layer_types has unsupported kinds {bad}", key="layer_types", rule="field_type")
    return types


def _check_layer_kinds(ctx: RuleContext, types: list[str], probes: list[str], where: str) -> None:
    """A layer is full attention iff one of its ``probes`` (query projection names) is a tensor."""
    if not ctx.tensors:
        return
    for layer, kind in enumerate(types):
        present = [p.format(l=layer) for p in probes if p.format(l=layer) in ctx.tensors]
        if bool(present) != (kind == "full_attention"):
            tensor = present[0] if present else probes[0].format(l=layer)
            raise ctx.error(f"layer {layer} is {kind} by {where} but tensor {tensor} is "
                            f"{'present' if present else 'absent'}", key=tensor, rule="layer_kind_mismatch")


def _interval_of_layer_types(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    types = ctx.fields["layer_types"]
    for interval in range(1, len(types) + 1):
        if _layer_types_for_interval(len(types), interval) == types:
            return interval
    raise Missing("a periodic layer_types")


def _gguf_dense_mlp_layers(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[int]:
    n = ctx.fields["num_hidden_layers"]
    return [layer for layer in range(n) if args["router_probe"].format(l=layer) not in ctx.tensors]


def _hf_dense_mlp_layers(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[int]:
    n = ctx.fields["num_hidden_layers"]
    listed = ctx.lookup("mlp_only_layers")
    listed = [] if listed is MISSING else listed
    step = ctx.lookup("decoder_sparse_step")
    step = 1 if step is MISSING else step
    if not value_matches(listed, "int_list") or not all(0 <= v < n for v in listed):
        raise ctx.error(f"mlp_only_layers {listed!r} are not layer indexes < {n}", key="mlp_only_layers",
                        rule="field_type")
    if not value_matches(step, "int") or step < 1:
        raise ctx.error(f"decoder_sparse_step {step!r} is not a positive integer", key="decoder_sparse_step",
                        rule="field_type")
    return sorted(set(listed) | {layer for layer in range(n) if (layer + 1) % step})


def _clip_activation(ctx: RuleContext, args: Mapping, field: FieldRule) -> str:
    gelu = ctx.lookup(args["gelu_key"])
    if gelu is not True:
        raise ctx.error(f"{args['gelu_key']} is {gelu if gelu is not MISSING else 'absent'}; only the GELU "
                        "tower is supported", key=args["gelu_key"], rule="unsupported_activation")
    return args["gelu_value"]


def _tensor_dim(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    shape = ctx.tensor_shape(args["tensor"])
    if shape is None:
        raise Missing(f"tensor {args['tensor']}")
    if not -len(shape) <= args["axis"] < len(shape):
        raise ctx.error(f"{args['tensor']} has shape {list(shape)}, no axis {args['axis']}", key=args["tensor"],
                        rule="tensor_shape")
    return shape[args["axis"]]


def _tensor_series_length(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    if args["first"] not in ctx.tensors:
        raise Missing(f"tensor {args['first']}")
    count = 1
    while count <= len(ctx.tensors) and args["next"].format(i=count) in ctx.tensors:
        count += 1
    return count


def _gguf_position_count(ctx: RuleContext, args: Mapping, field: FieldRule) -> int:
    rows = _tensor_dim(ctx, {"tensor": args["tensor"], "axis": 0}, field)
    image_size = ctx.lookup(args["image_size_key"])
    patch = ctx.int_ref(args["patch_size"])
    if image_size is not MISSING and int(rows ** 0.5 * patch) != image_size:
        raise ctx.error(f"{args['image_size_key']} = {image_size} but {args['tensor']} has {rows} rows "
                        f"(expected int(sqrt(rows) * patch_size) = {int(rows ** 0.5 * patch)})",
                        key=args["image_size_key"], rule="field_mismatch")
    return rows


def bool_list(ctx: RuleContext, key: str) -> list[bool] | None:
    flags = ctx.lookup(key)
    if flags is MISSING:
        return None
    if not isinstance(flags, list) or not all(isinstance(f, bool) for f in flags):
        raise ctx.error(f"{key} is not a list of booleans", key=key, rule="field_type")
    return flags


def _true_indexes(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[int]:
    flags = bool_list(ctx, args["key"])
    if flags is None:
        raise Missing(args["key"])
    return [i for i, f in enumerate(flags) if f]


def _no_true_entries(ctx: RuleContext, args: Mapping, field: FieldRule) -> bool:
    marked = [i for i, f in enumerate(bool_list(ctx, args["key"]) or []) if f]
    if marked:
        raise ctx.error(f"{args['key']} marks layers {marked}, but this vision tower has no deepstack mergers",
                        key=args["key"], rule="field_mismatch")
    return True


def _gguf_first_layers(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[int]:
    """``[0, n)`` for the count in GGUF key ``count_key`` (llama.cpp ``n_deepstack_layers``)."""
    n = ctx.lookup(args["count_key"])
    if n is MISSING:
        raise Missing(ctx.key_name(args["count_key"]))
    if not value_matches(n, "int") or n < 0:
        raise ctx.error(f"{ctx.key_name(args['count_key'])} is {n!r}, not a count", key=ctx.key_name(args["count_key"]),
                        rule="field_type")
    return list(range(n))


def _hf_first_layers(ctx: RuleContext, args: Mapping, field: FieldRule) -> list[int]:
    """``[0, n)`` for ``n`` the length of the root config's ``section.list_key`` (a ``vision_config``'s
    ``deepstack_visual_indexes``; no section or no list: none)."""
    section = ctx.lookup(args["section"], "root")
    where = f"{args['section']}.{args['list_key']}"
    if section is MISSING:
        return []
    if not isinstance(section, Mapping):
        raise ctx.error(f"{args['section']} is not an object", key=args["section"], rule="field_type")
    listed = section.get(args["list_key"])
    if listed is None:
        return []
    if not value_matches(listed, "int_list"):
        raise ctx.error(f"{where} is {listed!r}, not a list of integers", key=where, rule="field_type")
    return list(range(len(listed)))


#: name -> (function, required args). The rules loader rejects any other name or a missing arg.
DERIVATIONS: dict[str, tuple[Callable, frozenset[str]]] = {
    "ratio": (_ratio, frozenset({"numerator", "denominator"})),
    "exact_quotient": (_exact_quotient, frozenset({"numerator", "denominator"})),
    "floor_quotient": (_floor_quotient, frozenset({"numerator", "denominator"})),
    "same_as": (_same_as, frozenset({"value"})),
    "gguf_layer_count": (_gguf_layer_count, frozenset({"block_key", "nextn_key"})),
    "gguf_vocab_size": (_gguf_vocab_size, frozenset({"tokens_key", "count_key", "embedding_tensor"})),
    "hf_vocab_size": (_hf_vocab_size, frozenset({"embedding_tensors"})),
    "gguf_tied_embeddings": (_gguf_tied_embeddings, frozenset({"head_tensor"})),
    "hf_tied_embeddings": (_hf_tied_embeddings, frozenset({"default", "head_tensors"})),
    "hf_rope_value": (_hf_rope_value, frozenset({"name"})),
    "hf_rope_parameters": (_hf_rope_parameters, frozenset()),
    "gguf_rope_parameters": (_gguf_rope_parameters, frozenset({"scaling_prefix"})),
    "gguf_layer_types": (_gguf_layer_types, frozenset({"recurrent_key", "interval_key", "default_interval",
                                                       "full_attention_probe"})),
    "hf_layer_types": (_hf_layer_types, frozenset({"default_interval", "full_attention_probes"})),
    "interval_of_layer_types": (_interval_of_layer_types, frozenset()),
    "gguf_dense_mlp_layers": (_gguf_dense_mlp_layers, frozenset({"router_probe"})),
    "hf_dense_mlp_layers": (_hf_dense_mlp_layers, frozenset()),
    "clip_activation": (_clip_activation, frozenset({"gelu_key", "gelu_value"})),
    "tensor_dim": (_tensor_dim, frozenset({"tensor", "axis"})),
    "tensor_series_length": (_tensor_series_length, frozenset({"first", "next"})),
    "gguf_position_count": (_gguf_position_count, frozenset({"tensor", "image_size_key", "patch_size"})),
    "true_indexes": (_true_indexes, frozenset({"key"})),
    "no_true_entries": (_no_true_entries, frozenset({"key"})),
    "gguf_first_layers": (_gguf_first_layers, frozenset({"count_key"})),
    "hf_first_layers": (_hf_first_layers, frozenset({"section", "list_key"})),
}
