"""Strict construction of an architecture's ``Args`` from a normalised config (HF field names).

A field missing from the config, or of the wrong type, is an error naming the field — never a
default the checkpoint did not state (a model-args class that invents ``hidden_size=4096`` when the config
omits it is the counter-example). Extra config fields are ignored: the
normalised config is shared with the golden forward and the gates, which read more than the mapping.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from converters.errors import ConversionError

T = TypeVar("T")


def args_from_config(cls: type[T], config: dict, *, file: str | None = None) -> T:
    """Build ``cls`` (a dataclass) from ``config``, checking presence and type of every field."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in config:
            raise ConversionError(f"config field {f.name!r} is missing (needed by {cls.__module__})",
                                  file=file, json_path=f"config.{f.name}", rule="config_field_missing")
        values[f.name] = _check(f.name, config[f.name], hints[f.name], file)
    return cls(**values)


#: the count fields that size a list of layers (a layer has one tensor of its own at least)
LAYER_COUNTS = ("num_hidden_layers", "mtp_num_hidden_layers", "depth")


def bound_counts(args, sources: Iterable, *, file: str | None = None) -> None:
    """Bound every count ``args`` declares by the tensors of ``sources`` before anything is sized by it
    (docs/robustness.md §Promises): a layer count by the number of tensors, any other integer field by the
    values they can hold (their elements, or 8 per stored byte, whichever is more). A config declaring
    2^31 layers is then one typed error, not a list of 2^31 layer kinds."""
    tensors = [t for src in sources for t in src.tensors.values()]
    capacity = max(sum(t.elements for t in tensors), 8 * sum(t.byte_length or 0 for t in tensors))
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        limit, what = (len(tensors), "tensors") if f.name in LAYER_COUNTS else (capacity, "values its tensors hold")
        if value > limit:
            raise ConversionError(f"config field {f.name!r} = {value} exceeds what the checkpoint can back: it has "
                                  f"{limit} {what}", file=file, json_path=f"config.{f.name}",
                                  rule="config_count_bound")


def _check(name: str, value: Any, hint: Any, file: str | None) -> Any:
    origin = typing.get_origin(hint)
    ok: bool
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        what = "a positive integer"
    elif hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
        what = "a number"
    elif hint is bool:
        ok = isinstance(value, bool)
        what = "a boolean"
    elif origin is tuple:
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        ok = isinstance(value, list | tuple) and all(isinstance(v, item) for v in value)
        value = tuple(value) if ok else value
        what = f"a list of {item.__name__}"
    else:  # pragma: no cover - a programming error in an Args class
        raise TypeError(f"unsupported Args field type {hint!r}")
    if not ok:
        raise ConversionError(f"config field {name!r} = {value!r} is not {what}",
                              file=file, json_path=f"config.{name}", rule="config_field_type")
    return value


def fail(message: str, *, field: str, file: str | None = None) -> None:
    raise ConversionError(message, file=file, json_path=f"config.{field}", rule="config_inconsistent")


def require_multiple(a, name: str, divisor: str, *, field: str, file: str | None = None) -> None:
    """Fail (naming ``field``) unless ``a.<name>`` is a multiple of ``a.<divisor>``."""
    if getattr(a, name) % getattr(a, divisor):
        fail(f"{name} {getattr(a, name)} is not a multiple of {divisor} {getattr(a, divisor)}", field=field, file=file)


@dataclass(frozen=True)
class AttentionArgs:
    """The transformers ``Qwen3Config`` fields every decoder with (grouped-query) attention and a dense MLP
    width reads, in config order; an architecture's ``Args`` subclasses it and appends its own fields."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int

    def check_heads(self, file: str | None) -> None:
        """Attention heads a multiple of KV heads (grouped-query attention)."""
        require_multiple(self, "num_attention_heads", "num_key_value_heads", field="num_key_value_heads", file=file)
