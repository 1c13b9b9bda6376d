"""The container rules of a use's auxiliary inputs (container §8), checked by :func:`ninfer_core.validate`.

- ``activation_input_divisor``: one ``fp32`` / ``contiguous_le_v1`` element — a scalar ``[]`` object, or a
  part selecting one element of an ``fp32`` vector (rule ``auxiliary_divisor_shape``);
- ``hadamard_signs``: ``bf16`` / ``contiguous_le_v1``, ``K`` elements with ``K`` a multiple of 1024 and the
  parameter's input width where the binding shows it, each +1 or −1 (rules ``auxiliary_signs_shape``,
  ``auxiliary_signs_value``);
- ``input_columns``: ``int32`` / ``contiguous_le_v1``, a permutation of ``0..K-1``, only on a parameter
  stored in a ``gguf_*`` format (rules ``auxiliary_columns_shape``, ``auxiliary_columns_value``,
  ``auxiliary_columns_format``).

The acceptance gates keep their own, model-aware findings (positive finite divisors, widths from the
architecture); these are the rules any reader can check from the directory and the bytes alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ninfer_core.container.framing import elements
from ninfer_core.container.records import Binding, Directory, TensorObject
from ninfer_core.findings import Finding

HADAMARD_BLOCK = 1024
BF16_PLUS_ONE, BF16_MINUS_ONE = 0x3F80, 0xBF80
# a bound on what one auxiliary may make this check read (the ranges are tiny in real artifacts)
MAX_AUXILIARY_ELEMENTS = 1 << 24

Pieces = list[tuple[TensorObject, int, int]]


def _pieces(binding: Binding, objects: dict[str, TensorObject]) -> Pieces | None:
    """``(object, begin, end)`` element ranges of ``binding``; None when an object is not a known tensor
    (the reader reports that reference)."""
    if binding.object is not None:
        obj = objects.get(binding.object)
        return None if obj is None else [(obj, 0, elements(obj.shape))]
    out = []
    for part in binding.parts or ():
        obj = objects.get(part.object)
        if obj is None:
            return None
        out.append((obj, part.begin, part.end))
    return out


def _values(pieces: Pieces, read: Callable[[TensorObject], np.ndarray | None], dtype) -> np.ndarray | None:
    """The bound elements, or None when an object's bytes cannot be read (reported elsewhere)."""
    if any(elements(obj.shape) > MAX_AUXILIARY_ELEMENTS for obj, _, _ in pieces):
        return None  # bounded: such an object is no auxiliary a writer makes; its shape rules still apply
    raw = [read(obj) for obj, _, _ in pieces]
    if any(r is None for r in raw):
        return None
    return np.concatenate([r.view(dtype)[begin:end] for r, (_, begin, end) in zip(raw, pieces, strict=True)])


def _input_width(binding: Binding | None, objects: dict[str, TensorObject]) -> int | None:
    """The parameter's input width where its binding shows it: a whole object's last dimension."""
    if binding is None or binding.object is None or binding.object not in objects:
        return None
    shape = objects[binding.object].shape
    return shape[-1] if shape else None


def auxiliary_findings(directory: Directory, read: Callable[[TensorObject], np.ndarray | None], *, file: str,
                       use_paths: list[str] | None = None) -> list[Finding]:
    """Every §8 auxiliary rule broken by ``directory``'s uses. ``read(obj)`` returns an object's bytes as a
    uint8 array, or None when they cannot be read (only auxiliaries' objects are read)."""
    objects = {o.id: o for o in directory.objects if isinstance(o, TensorObject)}
    findings: list[Finding] = []

    def bad(message: str, where: str, rule: str) -> None:
        findings.append(Finding(rule, "ERROR", where, message, section="§8", file=file))

    for i, use in enumerate(directory.uses):
        base = use_paths[i] if use_paths else f"$.uses[{i}]"
        for role, binding in use.auxiliaries.items():
            where = f"{base}.auxiliaries.{role}"
            pieces = _pieces(binding, objects)
            if pieces is None:
                continue
            n = sum(end - begin for _, begin, end in pieces)
            forms = {(o.format, o.layout) for o, _, _ in pieces}
            if role == "activation_input_divisor":
                scalar = binding.object is None or pieces[0][0].shape == ()
                if forms != {("fp32", "contiguous_le_v1")} or n != 1 or not scalar:
                    shapes = [list(o.shape) for o, _, _ in pieces]
                    bad(f"activation_input_divisor of {use.parameter!r} binds {n} element(s) of "
                        f"{sorted(forms)} {shapes}; it must be one fp32 / contiguous_le_v1 element (a scalar [] "
                        "object or a one-element part of an fp32 vector)", where, "auxiliary_divisor_shape")
            elif role == "hadamard_signs":
                width = _input_width(directory.bindings.get(use.parameter), objects)
                if forms != {("bf16", "contiguous_le_v1")} or n % HADAMARD_BLOCK or n == 0 \
                        or (width is not None and n != width):
                    bad(f"hadamard_signs of {use.parameter!r} binds {n} element(s) of {sorted(forms)}; they must be "
                        f"bf16 / contiguous_le_v1, a multiple of {HADAMARD_BLOCK}"
                        + (f" and the parameter's input width {width}" if width is not None else ""),
                        where, "auxiliary_signs_shape")
                else:
                    signs = _values(pieces, read, np.uint16)
                    wrong = np.flatnonzero((signs != BF16_PLUS_ONE) & (signs != BF16_MINUS_ONE)) \
                        if signs is not None else ()
                    if len(wrong):
                        bad(f"hadamard_signs of {use.parameter!r}: {wrong.size} element(s) are not +1 or -1 (first "
                            f"at element {int(wrong[0])})", where, "auxiliary_signs_value")
            elif role == "input_columns":
                param = _pieces(directory.bindings[use.parameter], objects) \
                    if use.parameter in directory.bindings else None
                if param is not None and any(not o.format.startswith("gguf_") for o, _, _ in param):
                    bad(f"input_columns on {use.parameter!r}, stored as "
                        f"{sorted({o.format for o, _, _ in param})}: only gguf_* formats accept it", where,
                        "auxiliary_columns_format")
                if forms != {("int32", "contiguous_le_v1")}:
                    bad(f"input_columns of {use.parameter!r} binds {sorted(forms)}; it must be int32 / "
                        "contiguous_le_v1", where, "auxiliary_columns_shape")
                else:
                    cols = _values(pieces, read, "<i4")
                    if cols is not None and not np.array_equal(np.sort(cols), np.arange(n)):
                        bad(f"input_columns of {use.parameter!r} is not a permutation of 0..{n - 1}", where,
                            "auxiliary_columns_value")
    return findings
