"""The shareable ("sanitized") report: no device addresses, absolute paths or command addresses.

docs/calbin.md §5.3 and §11: vaddr is a sensitive internal address and only goes into the controlled internal
report; the version shared with business users or customers drops vaddr, absolute source paths and
command addresses, keeping every finding, code, gate and the verdict.

Rules, applied to the whole JSON document (so a new field cannot leak by being forgotten):

1. A mapping key that names an address is dropped with its value: after camelCase is split into
   snake_case, any key with a word ``addr``/``addrs``/``vaddr``/``vaddrs`` (``vaddr``, ``vaddr_ping``,
   ``src_addr``, ``dstAddr``, ``vaddr_ranges``), and ``line_text`` (verbatim source lines, which may quote
   addresses). Validators put addresses only under such keys.
2. In every remaining string (keys included): an absolute path (POSIX ``/a/b``, ``~/a``, Windows
   ``C:\\a``) becomes its last component, and a ``0x`` hexadecimal literal becomes ``0x<redacted>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ADDRESS_WORD_RE = re.compile(r"(?:^|_)v?addrs?(?:_|$)")
_INTERNAL_KEYS = frozenset({"line_text"})

_POSIX_ABS_RE = re.compile(r"(?<![\w.~\-/])~?/(?:[^\s/\"'`<>|,;()\[\]{}]+/)*[^\s/\"'`<>|,;()\[\]{}]+")
_WINDOWS_ABS_RE = re.compile(r"(?<![\w])[A-Za-z]:\\(?:[^\s\\\"'`<>|,;()\[\]{}]+\\)*[^\s\\\"'`<>|,;()\[\]{}]*")
_HEX_RE = re.compile(r"\b0[xX][0-9a-fA-F]+\b")

REDACTED_HEX = "0x<redacted>"


def is_address_key(key: str) -> bool:
    """True for keys that carry device or command addresses (rule 1)."""
    snake = _CAMEL_RE.sub("_", key).lower()
    return snake in _INTERNAL_KEYS or bool(_ADDRESS_WORD_RE.search(snake))


def scrub_text(text: str) -> str:
    """Rule 2 on one string: absolute paths → last component, hex literals → ``0x<redacted>``."""
    text = _POSIX_ABS_RE.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
    text = _WINDOWS_ABS_RE.sub(lambda m: m.group(0).rstrip("\\").rsplit("\\", 1)[-1], text)
    return _HEX_RE.sub(REDACTED_HEX, text)


def sanitize(obj: Any) -> Any:
    """A sanitized deep copy of a JSON document (mappings, lists, strings, numbers)."""
    if isinstance(obj, Mapping):
        return {scrub_text(str(k)): sanitize(v) for k, v in obj.items() if not is_address_key(str(k))}
    if isinstance(obj, list):
        return [sanitize(v) for v in obj]
    if isinstance(obj, str):
        return scrub_text(obj)
    return obj
