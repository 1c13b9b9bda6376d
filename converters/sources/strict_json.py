"""Strict JSON for source headers and checkpoint side files (safetensors headers, HF index, config).

Python's ``json`` accepts things a strict reader must refuse: duplicate member names (last one wins),
``NaN``/``Infinity`` tokens, lone surrogate escapes (``"\\ud800"``) that are not Unicode scalar values, and
it has no nesting limit below the interpreter's recursion limit. This module wraps it (the C scanner
stays fast) and rejects each of those with a :class:`SourceFormatError` naming the rule; nesting is
limited to 32 levels (docs/inspect.md §Boundaries).
"""

from __future__ import annotations

import json
import re
from typing import Any

from converters.errors import SourceFormatError
from converters.sources.limits import MAX_NESTING

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def loads(data: bytes, *, file, what: str, rule_prefix: str = "json", section: str | None = None) -> Any:
    """Parse ``data`` (UTF-8 JSON) strictly; errors name ``file``, ``what`` and the rule."""

    def bad(msg: str, rule: str) -> SourceFormatError:
        return SourceFormatError(msg, file=str(file), json_path=what,
                                 rule=f"{rule_prefix}_{rule}", section=section)

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad(f"invalid UTF-8 ({exc.reason}) at byte {exc.start}", "utf8") from None
    try:
        obj = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except _Duplicate as exc:
        raise bad(f"duplicate member name {exc.key!r}", "duplicate_key") from None
    except RecursionError:
        raise bad(f"nesting deeper than {MAX_NESTING} levels", "nesting") from None
    except json.JSONDecodeError as exc:
        raise bad(f"invalid JSON: {exc.msg} at character {exc.pos}", "syntax") from None
    except ValueError as exc:
        raise bad(f"invalid JSON: {exc}", "syntax") from None
    _check_structure(obj, bad, check_surrogates=bool(_SURROGATE_ESCAPE.search(data)))
    return obj


def _check_structure(obj: Any, bad, *, check_surrogates: bool) -> None:
    """Iterative walk: nesting depth and (only if the text has such escapes) lone surrogates."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_NESTING:
                raise bad(f"nesting deeper than {MAX_NESTING} levels", "nesting")
            items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
            for k, v in items:
                if check_surrogates and k is not None:
                    _scalar_value(k, bad)
                stack.append((v, depth + 1))
        elif check_surrogates and isinstance(node, str):
            _scalar_value(node, bad)


def _scalar_value(s: str, bad) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise bad(f"string {s[:40]!r} contains a lone surrogate escape (not a Unicode scalar value)",
                  "utf8") from None
