"""The JSON directory text: strict decoding and deterministic encoding (container spec §1, §3.1).

Python's :mod:`json` parses standard JSON, so it is reused; what it tolerates and the spec does not is
closed here: the text must be UTF-8 (no BOM), ``NaN``/``Infinity`` are not JSON, and member names must
be unique in *every* object (Python silently keeps the last duplicate, so each object remembers the
names it saw twice and :func:`duplicate_members` reports them with their JSON path). Nesting too deep
for the parser is reported instead of escaping as ``RecursionError``.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from ninfer_core.errors import SchemaError

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class JsonObject(dict):
    """A decoded JSON object that remembers member names it saw more than once; the root of a :func:`decode`
    also whether any object below it did (``any_duplicates``)."""

    duplicates: tuple[str, ...] = ()
    any_duplicates: bool | None = None  # None: not known (not the root of a decode)


_decoding = threading.local()  # duplicates seen by the decode running on this thread


def _object_pairs(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj = JsonObject(pairs)  # the last value of a repeated name wins, as with json's own dict
    if len(obj) != len(pairs):
        seen: set[str] = set()
        obj.duplicates = tuple(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))
        _decoding.seen = True
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def member_path(base: str, key: str) -> str:
    """JSON path of member ``key`` of the value at ``base``: ``$.objects`` or ``$.bindings["text/x"]``."""
    if _PLAIN_KEY.match(key):
        return f"{base}.{key}"
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"


def decode(raw: bytes | bytearray, *, file: str | None = None) -> Any:
    """Decode the directory text (UTF-8, standard JSON, trailing whitespace allowed)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(
            f"directory JSON is not valid UTF-8 (byte {exc.start} of the JSON text)",
            file=file, json_path="$", section="§1", rule="json_utf8",
        ) from None
    decoder = json.JSONDecoder(object_pairs_hook=_object_pairs, parse_constant=_reject_constant)
    _decoding.seen = False
    try:
        value = decoder.decode(text)
        if isinstance(value, JsonObject):
            value.any_duplicates = _decoding.seen
        return value
    except json.JSONDecodeError as exc:
        message = f"directory JSON is invalid: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        message = "directory JSON nests too deeply to parse"
    except ValueError as exc:  # NaN/Infinity, integers beyond Python's digit limit
        message = f"directory JSON is invalid: {exc}"
    raise SchemaError(message, file=file, json_path="$", section="§1", rule="json_syntax")


def _has_duplicates(value: Any) -> bool:
    """Whether any object in ``value`` saw a member name twice: known for the root of a :func:`decode`, else a
    walk over containers only (no paths)."""
    known = getattr(value, "any_duplicates", None)
    if known is not None:
        return known
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if getattr(node, "duplicates", ()):
                return True
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return False


def duplicate_members(value: Any) -> list[tuple[str, str]]:
    """Every ``(json_path, member_name)`` that occurs twice in one object, anywhere in ``value``.

    JSON paths are built only when some object has a duplicate (building one per value of a large
    directory would cost several times the directory's own memory)."""
    if not _has_duplicates(value):
        return []
    found: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("$", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for name in getattr(node, "duplicates", ()):
                found.append((path, name))
            stack.extend((member_path(path, k), v) for k, v in reversed(list(node.items()))
                         if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))) if isinstance(v, (dict, list)))
    return found


def encode(root: dict) -> bytes:
    """Deterministic UTF-8 JSON for a directory: member order as given, compact, no NaN."""
    try:
        text = json.dumps(root, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise SchemaError(
            f"directory cannot be written as UTF-8 JSON: {exc}", json_path="$", section="§1", rule="json_syntax"
        ) from None


def pad(text: bytes, json_bytes: int) -> bytes:
    """The JSON text followed by spaces up to ``json_bytes`` (trailing whitespace is JSON, §3.1)."""
    if len(text) > json_bytes:
        raise ValueError(f"JSON text of {len(text)} bytes does not fit {json_bytes}")
    return text + b" " * (json_bytes - len(text))
