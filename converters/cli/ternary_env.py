"""The operator defaults of the ternary (Bonsai) commands (README.md §Ternary packing, docs/ternary.md):
``NINFER_TERNARY_GGUF`` is the default source of ``convert check`` and ``NINFER_TERNARY_TEMPLATE`` the
default ``--template`` of ``convert check`` and of ``convert gguf2ninfer --recipe ternary|ternary-q2``;
``NINFER_ACCEPT_QUIET`` (any non-empty value but ``0``) silences the acceptance notification of a
conversion (its verdict line; the exit status and the JSON are unchanged)."""

from __future__ import annotations

import os
from pathlib import Path

from converters.errors import ConverterError

SOURCE_VAR = "NINFER_TERNARY_GGUF"
TEMPLATE_VAR = "NINFER_TERNARY_TEMPLATE"
QUIET_VAR = "NINFER_ACCEPT_QUIET"
TERNARY_RECIPES = ("ternary", "ternary-q2")
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


def default_template(template: Path | None, *, recipe: str | None = None, always: bool = False) -> Path | None:
    """``template``, else ``$NINFER_TERNARY_TEMPLATE`` when ``always`` or ``recipe`` is a ternary recipe. A
    template that does not exist is a typed error naming the variable and the README section."""
    from_env = False
    if template is None and (always or recipe in TERNARY_RECIPES) and os.environ.get(TEMPLATE_VAR):
        template, from_env = Path(os.environ[TEMPLATE_VAR]), True
    if template is not None and not os.path.lexists(template):
        how = f"${TEMPLATE_VAR}" if from_env else "--template"
        raise ConverterError(f"the template given by {how} does not exist; a ternary conversion needs a "
                             f"groupwise-int artifact of the same model (--template TPL or {TEMPLATE_VAR}=TPL; see "
                             f"{README_SECTION})", file=str(template), rule="template_missing")
    return template


def accept_quiet() -> bool:
    """Whether ``NINFER_ACCEPT_QUIET`` asks for no acceptance notification."""
    return os.environ.get(QUIET_VAR, "") not in ("", "0")
