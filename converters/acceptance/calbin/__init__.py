"""Static acceptance of calbin NPU model packages (``docs/calbin.md``): ``validate_calbin(path) -> Report``.

Modules, one concern each: :mod:`grammar` (metadata line forms), :mod:`yamlio` (safe YAML),
:mod:`dtypes`, :mod:`elf`, :mod:`intervals`; the gates :mod:`inventory` (A), :mod:`manifest` and
:mod:`metadata` (B), :mod:`crossref` and :mod:`declarations` (C), :mod:`capacity` (D), :mod:`supply` (E),
:mod:`prerun` (F); :mod:`opgraph`, :mod:`commands`, :mod:`tokenizer` for the remaining inputs;
:mod:`codes` is the table of finding codes. The grammar and the decisions where docs/calbin.md is silent are
in ``converters/acceptance/calbin/FORMAT.md``.
"""

from converters.acceptance.calbin.validate import is_calbin_package, validate_calbin

__all__ = ["is_calbin_package", "validate_calbin"]
