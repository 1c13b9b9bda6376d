"""The operator defaults of the ternary (Bonsai) commands (README.md §Ternary packing, docs/ternary.md):
``NINFER_TERNARY_GGUF`` stands in for the source and ``NINFER_TERNARY_TEMPLATE`` for ``--template`` in every
mode — ``convert check``, a build and an ``--only-layer`` build with ``convert gguf2ninfer`` (the template
when the recipe is a ternary one, named or chosen by content: a ternary source without ``--recipe``);
``NINFER_ACCEPT_QUIET`` (any non-empty value but ``0``) silences the acceptance notification of a
conversion (its verdict line; the exit status and the JSON are unchanged)."""

from __future__ import annotations

import os
from pathlib import Path

from converters.errors import ConverterError
from converters.sources.ternary import RECIPES as TERNARY_RECIPES

SOURCE_VAR = "NINFER_TERNARY_GGUF"
TEMPLATE_VAR = "NINFER_TERNARY_TEMPLATE"
QUIET_VAR = "NINFER_ACCEPT_QUIET"
README_SECTION = "README.md §Ternary packing"


def default_source(source: Path | None, command: str) -> Path:
    """``source``, else ``$NINFER_TERNARY_GGUF``; neither is a typed error naming both ways to give it."""
    if source is not None:
        return source
    env = os.environ.get(SOURCE_VAR)
    if env:
        return Path(env)
    raise ConverterError(f"convert {command} needs a source: give it as the first argument or set {SOURCE_VAR} "
                         f"(see {README_SECTION})", rule="source_missing")


def build_paths(first: Path | None, second: Path | None, command: str) -> tuple[Path, Path]:
    """``SOURCE OUTPUT`` of ``convert gguf2ninfer``; with one argument it is the output and the source is
    ``$NINFER_TERNARY_GGUF``. A missing one is a usage error (exit 2) naming the variable."""
    import typer

    if first is None:
        raise typer.BadParameter(f"missing OUTPUT: {command} [SOURCE] OUTPUT (SOURCE may come from {SOURCE_VAR}, "
                                 f"see {README_SECTION})", param_hint="OUTPUT")
    if second is not None:
        return first, second
    if not os.environ.get(SOURCE_VAR):
        raise typer.BadParameter(f"missing SOURCE: {command} SOURCE OUTPUT, or set {SOURCE_VAR} and give the "
                                 f"output only (see {README_SECTION})", param_hint="SOURCE")
    return Path(os.environ[SOURCE_VAR]), first


def ternary_source(source: Path) -> bool:
    """Whether ``source`` holds a ternary or binary GGML type (by content; an unreadable source is not, and
    is reported where the conversion reads it)."""
    from converters.sources import open_source
    from converters.sources.ternary import ternary_tensors

    try:
        with open_source(source) as src:
            return bool(ternary_tensors(src))
    except (ConverterError, OSError):
        return False


def default_template(template: Path | None, *, recipe: str | None = None, always: bool = False,
                     source: Path | None = None) -> Path | None:
    """``template``, else ``$NINFER_TERNARY_TEMPLATE`` when ``always``, when ``recipe`` is a ternary recipe, or
    when no recipe is named and ``source`` is a ternary source (the conversion then chooses the ternary
    recipe: docs/ternary.md §1). A template that does not exist is a typed error; its message speaks of
    ternary packing only when the template was meant for it (the variable, or a ternary recipe)."""
    from_env = False
    if template is None and os.environ.get(TEMPLATE_VAR) and (
            always or recipe in TERNARY_RECIPES or (recipe is None and source is not None and ternary_source(source))):
        template, from_env = Path(os.environ[TEMPLATE_VAR]), True
    if template is not None and not os.path.lexists(template):
        if from_env or recipe in TERNARY_RECIPES:
            how = f"${TEMPLATE_VAR}" if from_env else "--template"
            raise ConverterError(f"the template given by {how} does not exist; a ternary conversion needs a "
                                 f"groupwise-int artifact of the same model (--template TPL or {TEMPLATE_VAR}=TPL; "
                                 f"see {README_SECTION})", file=str(template), rule="template_missing")
        raise ConverterError("the template given by --template does not exist; a template is an artifact of the "
                             "same model whose directory becomes the output's skeleton, its objects produced from "
                             "the source or copied", file=str(template), rule="template_missing")
    return template


def accept_quiet() -> bool:
    """Whether ``NINFER_ACCEPT_QUIET`` asks for no acceptance notification."""
    return os.environ.get(QUIET_VAR, "") not in ("", "0")
