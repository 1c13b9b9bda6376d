"""Per-tensor format overrides on top of a recipe: ``--tensor-type PATTERN=FORMAT``,
``--output-tensor-type FORMAT`` and ``--token-embedding-type FORMAT`` (docs/recipes.md §Overrides).

A :class:`FormatOverride` matches a parameter when its regular expression is found (``re.search``) in the
parameter's logical name (``text/layers/3/mlp/down``) or in its source tensor's name
(``blk.3.ffn_down.weight``); the role overrides (``output_head``, ``embedding``) match by role. The first
override that matches decides; a matched parameter is stored as an object of its own (it leaves its
recipe group), and the plan records which rule chose every object's format. An expert bank has one
format: an override decides it when it matches the bank's object id or every expert of the bank
(:func:`bank_match`); one that matches only some experts is refused.

A staged conversion carries the overrides in its plan file (:func:`to_plan`, :func:`from_plan`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from converters.errors import RecipeError

EXACT = "exact"


@dataclass(frozen=True)
class FormatOverride:
    """One override: ``pattern`` (a regular expression) or ``role``, and the ``format`` (a codec format or
    ``exact``); ``flag`` is how the user spelled it, recorded as the rule that chose the format."""

    format: str
    flag: str
    pattern: str | None = None
    role: str | None = None

    def matches(self, name: str, role: str, source: str | None) -> bool:
        if self.role is not None:
            return role == self.role
        rx = re.compile(self.pattern)
        return bool(rx.search(name) or (source is not None and rx.search(source)))

    def to_json(self) -> dict:
        return {"rule": self.flag, "format": self.format}


def _format(fmt: str, flag: str) -> str:
    from converters.mapping.llamacpp_names import format_hint
    from ninfer_core import codecs

    fmt = fmt.strip()
    if fmt != EXACT and fmt not in codecs.FORMATS:
        raise RecipeError(f"{flag}: unknown format {fmt!r} (convert formats lists them; or exact){format_hint(fmt)}",
                          json_path=flag.split(" ")[0], rule="override_format")
    return fmt


def parse_overrides(tensor_types: list[str] | None = None, output_tensor_type: str | None = None,
                    token_embedding_type: str | None = None) -> tuple[FormatOverride, ...]:
    """The overrides of the three flags, role flags first (they are the more specific), then each
    ``PATTERN=FORMAT`` in the order given. Bad patterns and unknown formats are refused here, before any
    input is read."""
    out = []
    if output_tensor_type:
        flag = f"--output-tensor-type {output_tensor_type}"
        out.append(FormatOverride(_format(output_tensor_type, flag), flag, role="output_head"))
    if token_embedding_type:
        flag = f"--token-embedding-type {token_embedding_type}"
        out.append(FormatOverride(_format(token_embedding_type, flag), flag, role="embedding"))
    for text in tensor_types or []:
        flag = f"--tensor-type {text}"
        pattern, sep, fmt = text.rpartition("=")
        if not sep or not pattern:
            raise RecipeError(f"{flag}: expected PATTERN=FORMAT", json_path="--tensor-type", rule="override_syntax")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise RecipeError(f"{flag}: not a regular expression: {exc}", json_path="--tensor-type",
                              rule="override_pattern") from None
        out.append(FormatOverride(_format(fmt, flag), flag, pattern=pattern))
    return tuple(out)


def first_match(overrides, name: str, role: str, source: str | None) -> FormatOverride | None:
    """The override that decides parameter ``name`` (of ``role``, read from ``source``), if any."""
    return next((o for o in overrides if o.matches(name, role, source)), None)


def bank_match(overrides, bank: str, members: list) -> FormatOverride | None:
    """The override that decides expert bank ``bank`` (its object id) of ``members`` (bound parameters, one
    per expert): the first that matches the bank id or every expert; one matching only some experts is
    refused (a bank has one format)."""
    for o in overrides:
        if o.matches(bank, members[0].role, None):
            return o
        hits = [p.name for p in members if o.matches(p.name, p.role, p.source.tensor if p.source else None)]
        if len(hits) == len(members):
            return o
        if hits:
            raise RecipeError(f"{o.flag}: matches {len(hits)} of the {len(members)} experts of bank {bank} "
                              f"(first {hits[0]}); an expert bank has one format: match the bank id or every "
                              "expert (docs/recipes.md §Overrides)", json_path=o.flag.split(" ")[0],
                              rule="override_bank_partial")
    return None


def check_matched(overrides, params) -> None:
    """Refuse a ``--tensor-type`` pattern that matches no parameter of the model (docs/recipes.md §Overrides):
    the error lists the names nearest to the pattern, so a typo is not silently a no-op."""
    import difflib

    names: list[str] = []
    for p in params:
        names += [p.name] + ([p.source.tensor] if p.source is not None else []) + ([p.bank] if p.bank else [])
    # one candidate per name shape: blk.3.ffn_down.weight and blk.4.ffn_down.weight are both blk.\d+.ffn_down.weight
    shapes = list(dict.fromkeys(re.sub(r"(?<=[./])\d+(?=[./]|$)", r"\\d+", n) for n in names))
    for o in overrides:
        if o.pattern is None or any(o.matches(n, "", None) for n in names):
            continue
        near = difflib.get_close_matches(o.pattern, shapes, n=5, cutoff=0.0)
        raise RecipeError(f"{o.flag}: the pattern matches no parameter or source tensor of this model; nearest "
                          f"names: {', '.join(near)}", json_path="--tensor-type", rule="override_unmatched")


def to_plan(overrides) -> list[dict]:
    """The overrides as a staged conversion's plan file carries them."""
    return [{"format": o.format, "flag": o.flag, "pattern": o.pattern, "role": o.role} for o in overrides]


def from_plan(value, *, file: str) -> tuple[FormatOverride, ...]:
    """Overrides read back from a plan file, checked as the flags are (known format, valid pattern)."""
    if not isinstance(value, list):
        raise RecipeError("plan request overrides is not a list", file=file, json_path="$.request.overrides",
                          rule="plan_schema")
    out = []
    for i, v in enumerate(value):
        where = f"$.request.overrides[{i}]"
        if not (isinstance(v, dict) and set(v) == {"format", "flag", "pattern", "role"}
                and all(isinstance(v[k], str) for k in ("format", "flag"))
                and (v["pattern"] is None) != (v["role"] is None)
                and all(v[k] is None or isinstance(v[k], str) for k in ("pattern", "role"))):
            raise RecipeError("an override needs format, flag and one of pattern / role", file=file,
                              json_path=where, rule="plan_schema")
        if v["pattern"] is not None:
            try:
                re.compile(v["pattern"])
            except re.error as exc:
                raise RecipeError(f"not a regular expression: {exc}", file=file, json_path=where,
                                  rule="override_pattern") from None
        out.append(FormatOverride(_format(v["format"], v["flag"]), v["flag"], v["pattern"], v["role"]))
    return tuple(out)
