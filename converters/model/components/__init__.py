"""Model components beside the text trunk (container §4.2): which a checkpoint offers, and what each needs.

A component is converted when ``--components`` names it. Each has its own mapping (its own architecture
module under :mod:`converters.model.architectures`, its own ``Args``), its own private objects — object IDs
under its own prefix, never stacked into a text parent (§5.3) — and binds truly shared data (the MTP
head's embedding and output head) to the text objects. Its record in ``components`` carries its
``config`` (the architecture's standard ``architectures`` / ``model_type``), ``target: "text"`` and, for
the vision tower, its processor ``resources``.

- :mod:`.mtp` — the Qwen3.5 (or Qwen3.5-MoE) MTP head, from the main checkpoint (HF ``mtp.*``, GGUF
  ``blk.{L+i}``);
- :mod:`.vision` — the Qwen3.5 vision tower, from an mmproj GGUF (``--mmproj``) or HF ``model.visual.*``;
- :mod:`.drafter` — z-lab DFlash / DFlash2 drafters, from their own checkpoint (``--drafter``).

:func:`open_inputs` opens the extra inputs (an mmproj, drafter directories classified by their config);
:func:`resolve_components` checks the selection against the text architecture and the inputs, and returns
one :class:`Component` per selected non-text component. Asking for a component the source does not have
is a :class:`ComponentMissingError` naming it and what is missing (§12.6 "启用文件未提供的 Vision/spec"),
raised before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import ModuleType

from converters.errors import ConversionError
from converters.model.components import drafter, mtp, vision
from converters.model.components.base import (
    SECTION,
    TEXT,
    Component,
    ComponentMissingError,
    Context,
    mapping_for,
    missing,
)

#: every component id the converter knows (container §4.2: text, vision, mtp, dflash, dflash2)
KNOWN = ("text", "vision", "mtp", "dflash", "dflash2")

#: input names a component reads besides ``main`` (what :func:`open_inputs` produces)
INPUTS = {"vision": ("mmproj",), "dflash": ("dflash",), "dflash2": ("dflash2",)}


def parse_components(components: Iterable[str]) -> tuple[str, ...]:
    """The selection in order, without duplicates; ``text`` is required (every component targets it)."""
    comps = tuple(dict.fromkeys(c.strip() for c in components if c.strip()))
    unknown = [c for c in comps if c not in KNOWN]
    if unknown:
        raise ConversionError(f"unknown component {unknown[0]!r} (known: {', '.join(KNOWN)})",
                              section=SECTION, rule="component_unknown")
    if TEXT not in comps:
        raise ConversionError(f"--components {','.join(comps)} lacks text: every other component targets the "
                              "text model, so text is always converted", section=SECTION, rule="component_text")
    return comps


def open_inputs(inputs: Mapping[str, object] | None, opened: list) -> dict[str, object]:
    """Open the extra inputs: ``mmproj`` (a path or Source) and ``drafter`` (one or several paths or
    Sources, each classified ``dflash`` / ``dflash2`` by its config). Opened sources are appended to
    ``opened`` (the caller closes them). Unknown input names are refused."""
    from converters.sources import open_source

    out: dict[str, object] = {}
    for name, value in (inputs or {}).items():
        if value is None:
            continue
        if name not in ("mmproj", "drafter"):
            raise ConversionError(f"unknown input {name!r} (known: mmproj, drafter)", rule="input_unknown")
        values = list(value) if name == "drafter" and isinstance(value, list | tuple) else [value]
        for v in values:
            src = v if hasattr(v, "tensors") else open_source(v)
            if src is not v:
                opened.append(src)
            key = drafter.classify(src) if name == "drafter" else name
            if key in out:
                raise ConversionError(f"two {key} inputs given ({getattr(out[key], 'path', '?')} and "
                                      f"{getattr(src, 'path', '?')})", file=str(getattr(src, "path", "")),
                                      rule="input_duplicate")
            out[key] = src
    return out


def resolve_components(ctx: Context, components: Iterable[str]) -> list[Component]:
    """The selected non-text components of ``ctx`` (see the module docstring); raises before any write."""
    comps = parse_components(components)
    arch = ctx.text_architecture.NAME
    supported = supported_by(ctx.text_architecture)
    for c in comps:
        if c != TEXT and c not in supported:
            raise missing(c, f"the {arch} architecture has no {c} component (it can carry: "
                          f"{', '.join(supported) or 'none'})", file=str(getattr(ctx.main, "path", "")))
    for name in (n for n in ctx.sources if n != "main"):
        owner = next((c for c, names in INPUTS.items() if name in names), None)
        if owner not in comps:
            what = {"mmproj": "--mmproj"}.get(name, f"--drafter ({name} drafter)")
            raise ConversionError(f"{what} given, but {owner} is not in --components "
                                  f"{','.join(comps)}", file=str(getattr(ctx.sources[name], "path", "")),
                                  section=SECTION, rule="input_unused")
    resolvers = {"mtp": mtp.resolve, "vision": vision.resolve, "dflash": drafter.resolve, "dflash2": drafter.resolve}
    return [resolvers[c](ctx, c) for c in comps if c != TEXT]


def supported_by(architecture: ModuleType) -> tuple[str, ...]:
    """The components a text architecture can carry (its module's ``COMPONENTS``)."""
    return tuple(getattr(architecture, "COMPONENTS", ()))


def __getattr__(name: str):
    if name == "SUPPORTED":  # text architecture → the components it can carry, from the registry
        from converters.model import architectures

        return {m.NAME: supported_by(m) for m in architectures.all_modules() if hasattr(m, "COMPONENTS")}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["KNOWN", "SUPPORTED", "Component", "ComponentMissingError", "Context", "mapping_for", "missing",
           "open_inputs", "parse_components", "resolve_components", "supported_by"]
