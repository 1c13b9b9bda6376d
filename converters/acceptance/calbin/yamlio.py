"""Safe YAML loading for calbin packages: ``yaml.safe_load`` semantics plus duplicate-key rejection.

docs/calbin.md §9 Gate B: the YAML must parse safely. PyYAML's safe loader builds only plain types (no Python objects),
but it lets a repeated key silently overwrite the earlier one; a strict acceptance tool must see that, so
the loader subclass below rejects duplicates with the line of the second occurrence. The C-accelerated
``CSafeLoader`` is used when available (same safe constructor, faster scanner). Files are bounded in size
before reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from converters.errors import ConverterError

MAX_YAML_BYTES = 256 << 20

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlLoadError(ConverterError):
    """A YAML file does not load; ``duplicate`` tells a repeated key from other parse failures."""

    kind = "yaml"

    def __init__(self, message: str, *, file: str, line: int | None, duplicate: bool = False):
        self.line = line
        self.duplicate = duplicate
        super().__init__(message, file=file, rule="yaml_duplicate_key" if duplicate else "yaml_parse")


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _StrictSafeLoader(_Base):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node, deep=False):  # noqa: D401 - PyYAML hook
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # the base constructor reports unhashable keys itself
                if key in seen:
                    raise _DuplicateKey(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r} (first on line {seen[key] + 1})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_StrictSafeLoader.add_constructor("tag:yaml.org,2002:map", _StrictSafeLoader.construct_yaml_map)


def load_yaml(path: Path, rel: str) -> Any:
    """Load ``path`` (reported as ``rel``) with the strict safe loader.

    Raises:
        YamlLoadError: unreadable, larger than :data:`MAX_YAML_BYTES`, not UTF-8, a syntax error, or a
            duplicate key; ``line`` is 1-based where the parser knows it.
    """
    try:
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise YamlLoadError(f"{size} bytes exceeds the {MAX_YAML_BYTES}-byte YAML bound", file=rel, line=None)
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlLoadError(f"not UTF-8 text (byte {exc.start})", file=rel, line=None) from None
    except OSError as exc:
        raise YamlLoadError(f"cannot read: {exc.strerror or exc}", file=rel, line=None) from None
    try:
        return yaml.load(text, Loader=_StrictSafeLoader)  # noqa: S506 - strict *safe* loader subclass
    except _DuplicateKey as exc:
        mark = exc.problem_mark
        raise YamlLoadError(str(exc.problem), file=rel, line=mark.line + 1 if mark else None, duplicate=True) from None
    except RecursionError:
        raise YamlLoadError("nesting too deep to load safely", file=rel, line=None) from None
    except ValueError as exc:  # e.g. an integer literal beyond int()'s digit limit
        raise YamlLoadError(f"YAML value: {exc}", file=rel, line=None) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlLoadError(f"YAML syntax: {problem}", file=rel, line=mark.line + 1 if mark else None) from None
