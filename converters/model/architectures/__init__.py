"""Architectures: one short module per model family, the mapping itself living in ``mappings/*.yaml``.

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
  tensor layout, e.g. ``bonsai``: a rotated ternary ``qwen35`` GGUF): tried before the config match.

Adding an architecture = a module here plus its name in :data:`ARCHITECTURE_MODULES`.

Component architectures (``qwen35_mtp``, ``qwen35_moe_mtp``, ``qwen3_5_vision``, ``dflash``, ``dflash2``)
follow the same pattern with empty ``HF_ARCHITECTURES`` / ``GGUF_ARCHITECTURES`` (they are never a
checkpoint's text model) and a ``COMPONENT`` id; :mod:`converters.model.components` says which text
architectures they attach to (the MTP head's module follows the text one: ``qwen35_moe`` →
``qwen35_moe_mtp``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from converters.errors import ConversionError

ARCHITECTURE_MODULES: tuple[str, ...] = ("qwen3", "qwen35", "qwen3_moe", "qwen35_moe", "qwen3_next", "bonsai",
                                         # component architectures (converters/components): no text of their own
                                         "qwen35_mtp", "qwen35_moe_mtp", "qwen3_5_vision", "dflash", "dflash2")


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
        for name in ARCHITECTURE_MODULES:
            detect = getattr(module(name), "detect", None)
            if detect is not None and detect(source):
                return module(name)
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
