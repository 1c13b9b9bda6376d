"""Per-tensor format overrides on top of a recipe: ``--tensor-type PATTERN=FORMAT``,
``--output-tensor-type FORMAT`` and ``--token-embedding-type FORMAT`` (docs/recipes.md §Overrides).

A :class:`FormatOverride` matches a parameter when its regular expression is found (``re.search``) in the
parameter's logical name (``text/layers/3/mlp/down``) or in its source tensor's name
(``blk.3.ffn_down.weight``); the role overrides (``output_head``, ``embedding``) match by role. The first
override that matches decides; a matched parameter is stored as an object of its own (it leaves its
recipe group), and the plan records which rule chose every object's format.
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
    from ninfer_core import codecs

    fmt = fmt.strip()
    if fmt != EXACT and fmt not in codecs.FORMATS:
        raise RecipeError(f"{flag}: unknown format {fmt!r} (convert formats lists them; or exact)",
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
