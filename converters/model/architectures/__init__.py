"""Architectures: one short module per model family, the mapping itself living in ``mappings/*.yaml``
(docs/architectures.md §What lives where).

Like mlx-lm's ``models/``, each module is small and exports the same names:

- ``NAME`` — the architecture id (also the mapping file's ``architecture``);
- ``HF_ARCHITECTURES`` / ``GGUF_ARCHITECTURES`` — what it accepts (``config.architectures[0]`` of the
  normalised config, ``general.architecture`` of a GGUF);
- ``MAPPINGS`` — component id → mapping file name under ``mappings/`` (``{"text": "qwen35.yaml"}``;
  other components add entries);
- ``LAYER_KINDS`` — the layer kinds the mapping may name;
- ``Args`` — a frozen dataclass named after the normalised config's HF fields; ``Args.from_config``
  refuses missing or mistyped fields (no invented defaults) and ``Args.layer_kinds()`` lists the kind
  of every layer;
- optionally ``detect(source) -> bool`` — a *layout variant* of another architecture (same config, other
  tensor layout, e.g. ``bonsai``: a rotated ternary ``qwen35`` GGUF): tried before the config match, in
  ascending ``DETECT_PRIORITY`` (default 0), then by name;
- a text architecture also says what the rest of the converter would otherwise keep a table of:
  ``MODEL_TYPES`` (the HF ``model_type`` values of its config), ``COMPONENTS`` (the components it can
  carry, :mod:`converters.model.components`), ``MTP`` (the MTP head's architecture module, when it carries
  one), ``GOLDEN`` (its golden-forward :class:`~converters.model.architectures._family.Family`) and
  ``heads(geometry)`` (the head structure of its head-structured parameters,
  :mod:`converters.model.architectures._heads`).

The mapping YAML (``mappings/<MAPPINGS[...]>`` and ``mappings/config/*.yaml``) holds names, transforms and
the ``input:`` of every use. Adding an architecture = a module here (found by :func:`names`, no list to
edit), its YAML files and a tinymodel.

Component architectures (``qwen35_mtp``, ``qwen35_moe_mtp``, ``qwen3_5_vision``, ``dflash``, ``dflash2``)
follow the same pattern with empty ``HF_ARCHITECTURES`` / ``GGUF_ARCHITECTURES`` (they are never a
checkpoint's text model) and a ``COMPONENT`` id; ``TEXT_GEOMETRY = True`` marks one whose ``Args`` are read
from the text config (the MTP head: its record names only its architecture). Modules whose name starts
with ``_`` are shared helpers, not architectures.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from types import ModuleType

from converters.errors import ConversionError


def names() -> tuple[str, ...]:
    """Every architecture module of this package, by name (helpers ``_*`` excluded)."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


#: every architecture module, text and component ones alike, discovered from this package
ARCHITECTURE_MODULES: tuple[str, ...] = names()


def module(name: str) -> ModuleType:
    """The architecture module called ``name``."""
    if name not in ARCHITECTURE_MODULES:
        raise ConversionError(f"unknown architecture {name!r} (known: {', '.join(ARCHITECTURE_MODULES)})",
                              rule="unknown_architecture")
    return importlib.import_module(f"converters.model.architectures.{name}")


def for_config(config: dict, *, gguf_architecture: str | None = None, file: str | None = None,
               source=None) -> ModuleType:
    """The architecture module of a normalised text config (``architectures[0]``), or of a GGUF
    ``general.architecture`` when the config names none; a layout variant whose ``detect(source)`` is
    true comes first."""
    if source is not None:
        variants = sorted((m for m in all_modules() if hasattr(m, "detect")),
                          key=lambda m: (getattr(m, "DETECT_PRIORITY", 0), m.NAME))
        for mod in variants:
            if mod.detect(source):
                return mod
    archs = config.get("architectures") or []
    hf = archs[0] if archs and isinstance(archs[0], str) else None
    for name in ARCHITECTURE_MODULES:
        mod = module(name)
        if hf is not None and hf in mod.HF_ARCHITECTURES:
            return mod
        if hf is None and gguf_architecture is not None and gguf_architecture in mod.GGUF_ARCHITECTURES:
            return mod
    known = sorted({a for n in ARCHITECTURE_MODULES for a in module(n).HF_ARCHITECTURES})
    raise ConversionError(
        f"no mapping for architecture {hf or gguf_architecture!r} (supported: {', '.join(known)})",
        file=file, json_path="config.architectures", rule="unsupported_architecture")


def all_modules() -> Iterator[ModuleType]:
    """Every architecture module, in :data:`ARCHITECTURE_MODULES` order."""
    return map(module, ARCHITECTURE_MODULES)


def text_modules() -> list[ModuleType]:
    """The architectures a checkpoint's text model can be (those with a golden-forward family), layout
    variants included."""
    return [m for m in all_modules() if hasattr(m, "GOLDEN")]


def for_component(component: str) -> list[ModuleType]:
    """The architecture modules serving component ``component`` (``COMPONENT``)."""
    return [m for m in all_modules() if getattr(m, "COMPONENT", None) == component]


def for_model_type(model_type, architectures=()) -> ModuleType | None:
    """The text architecture of an HF-style config by its ``model_type`` (``MODEL_TYPES``), else by its
    ``architectures`` (``HF_ARCHITECTURES``); None when no module claims it. Layout variants (``detect``)
    are not candidates: they share their base architecture's config."""
    text = [m for m in text_modules() if not hasattr(m, "detect")]
    for mod in text:
        if model_type in mod.MODEL_TYPES:
            return mod
    for arch in architectures or ():
        for mod in text:
            if arch in mod.HF_ARCHITECTURES:
                return mod
    return None
