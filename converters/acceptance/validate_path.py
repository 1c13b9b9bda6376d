"""Static acceptance of whatever a path holds: a calbin package or a ``.ninfer`` artifact (``convert validate``).

The kind is detected by content (:mod:`converters.sources.kind`): a calbin package directory goes to
:func:`converters.acceptance.calbin.validate_calbin`; a GGUF or safetensors file, a checkpoint directory
or a JSON file is refused, naming the command that reads it; anything else — a ``.ninfer`` entry, a
continuation part, an unrecognisable file — goes to the ``.ninfer`` validator,
``converters.acceptance.validate_ninfer.validate_ninfer(path, *, context=None, batch=None)``, whose
report says what is wrong with it. Both return one :class:`converters.acceptance.report.Report`;
:func:`write_report` publishes its JSON as a new file, whole; :func:`validate_to` is the command's one call.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from converters.errors import ConverterError
from converters.sources.atomic_write import refuse_existing, write_new_json
from converters.sources.kind import require_kind


def validate_path(path: Path, *, context: int | None = None, batch: int | None = None, fast: bool = False):
    """Detect the package kind and run its validator; returns a :class:`converters.acceptance.report.Report`.
    ``fast`` (skip hashing the parameter blocks) applies to calbin packages only."""
    path = Path(path)
    try:
        path.lstat()
    except OSError as exc:
        raise ConverterError(f"path cannot be used: {exc.strerror or exc}", file=str(path),
                             rule="validate_target") from None
    if require_kind(path, ("calbin", "ninfer"), command="validate", rule="validate_kind",
                    pass_unrecognised=True) == "calbin":
        from converters.acceptance.calbin import validate_calbin

        return validate_calbin(path, context=context, batch=batch, fast=fast)
    if fast:
        raise ConverterError("--fast applies to calbin packages only", file=str(path), rule="validate_options")
    try:
        module = importlib.import_module("converters.acceptance.validate_ninfer")
    except ModuleNotFoundError as exc:
        if exc.name not in ("converters.acceptance.validate_ninfer",):
            raise
        raise ConverterError(
            "not a calbin package (no model_memory_reserved_info.txt with a root <model>.yaml), and .ninfer "
            "validation is not available in this build (converters.acceptance.validate_ninfer is missing)",
            file=str(path), rule="validate_kind") from None
    return module.validate_ninfer(path, context=context, batch=batch)


#: where ``convert validate`` without ``-o`` writes: the first of these names free in the working directory
DEFAULT_REPORT_NAMES = ("validation.json", *(f"validation-{i}.json" for i in range(2, 1000)))


def default_report_target(directory: Path = Path(".")) -> Path:
    """``validation.json`` in ``directory``, or ``validation-2.json``, ``-3``… when taken: every validation
    produces its report and none replaces another (docs/validation-report.md §Where the report goes)."""
    import os

    for name in DEFAULT_REPORT_NAMES:
        if not os.path.lexists(directory / name):
            return directory / name
    raise report_exists(directory / DEFAULT_REPORT_NAMES[-1])


def validate_to(path: Path, *, output: Path | None = None, sanitized: bool = False, context: int | None = None,
                batch: int | None = None, fast: bool = False):
    """``convert validate`` as one call: refuse an existing ``output`` before validating, run
    :func:`validate_path`, publish the report's JSON (``sanitized``: shareable) to ``output`` (``None``: a
    free name from :func:`default_report_target`). Returns the report, that JSON document and the file."""
    if output is not None:
        refuse_existing_report(output)
    report = validate_path(path, context=context, batch=batch, fast=fast)
    doc = report.to_json(sanitized=sanitized)
    target = write_report(output if output is not None else default_report_target(), doc)
    return report, doc, target


def report_exists(target: Path) -> ConverterError:
    """The error for a report file that already exists (it is never overwritten)."""
    return ConverterError("output file exists; choose another path or remove it", file=str(target),
                          rule="output_exists")


def refuse_existing_report(target: Path) -> None:
    """Refuse an existing report target before anything is validated."""
    refuse_existing(target, lambda: report_exists(target))


def write_report(target: Path, doc: dict) -> Path:
    """Publish ``doc`` (a report's JSON) as the new file ``target``: whole, never over an existing file."""
    return write_new_json(target, doc, exists=lambda: report_exists(target))
