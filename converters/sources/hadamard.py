"""Hadamard rotation carried by the source itself: ``prism.hadamard.*`` metadata of Ternary Bonsai 2 GGUFs.

A rotated checkpoint stores, for every matrix named in ``weight_names``, ``W' = W · D · H`` per 1024-column
block of the input axis (``D = diag(s)``, ``H`` the normalized Sylvester Walsh–Hadamard matrix, so each
stored row is ``w' = H(s ⊙ w)``): exactly what a use with a ``hadamard_signs`` auxiliary expects
(storage-layouts §7, container §8). So the converter keeps those bytes (a ternary matrix stays bit-for-bit
ternary) and emits the signs — one vector per input width, read from ``sign_widths`` / ``sign_values`` —
as ``text/hadamard_signs`` (bf16, all widths concatenated in the metadata's order) and
``text/hadamard_widths`` (int32); each use binds its width's slice by a Part
(docs/gguf-conventions.md §Hadamard-rotated ternary checkpoints).

``inverse_weight_names`` (the token embedding) are stored the same way but are looked up, not multiplied:
a runtime restores a row after the lookup (``e = s ⊙ H(e')``). The container has no use on a lookup that
could carry signs, so the converter undoes the rotation of those tensors itself (float64, then the
recipe's format: not exact, measured in provenance).

The logical parameters of a rotated source are the un-rotated (Hugging Face) values: see
:func:`logical_values`, used by the expected-value oracle of the gates.

Metadata (all under ``prism.hadamard.``): ``block_size`` (must be 1024), ``transform``
(``normalized-sylvester-walsh-hadamard``), ``axis`` (``input-last-dimension``), ``sign_widths`` (distinct
positive multiples of the block), ``sign_values`` (±1, ``sum(sign_widths)`` of them), ``weight_names``,
optional ``inverse_weight_names``, ``gdn_v_grouped`` (bool), ``version`` (1), ``sign_mode``
(``explicit``). Anything else about them is a :class:`~converters.errors.ConversionError` naming the file,
the key and the rule, raised before anything is written.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np

from converters.errors import ConversionError
from converters.mapping import transforms as T

PREFIX = "prism.hadamard."
TRANSFORM = "normalized-sylvester-walsh-hadamard"
AXIS = "input-last-dimension"
SUPPORTED_VERSIONS = (1,)
SIGN_MODES = ("explicit",)
REQUIRED = ("block_size", "transform", "axis", "sign_widths", "sign_values", "weight_names")
KNOWN = (*REQUIRED, "inverse_weight_names", "gdn_v_grouped", "version", "sign_mode")
#: object ids of the sign table (container §8)
SIGNS_OBJECT = "text/hadamard_signs"
WIDTHS_OBJECT = "text/hadamard_widths"
FORWARD = "forward"
INVERSE = "inverse"


@dataclass(frozen=True)
class SourceRotation:
    """The validated rotation of one source file."""

    file: str
    block_size: int
    widths: tuple[int, ...]
    signs: np.ndarray  # float32 ±1, the widths' vectors concatenated in ``widths`` order
    weight_names: frozenset[str]
    inverse_weight_names: frozenset[str]
    gdn_v_grouped: bool | None
    version: int | None
    sign_mode: str | None

    def offset(self, width: int) -> int:
        """Where ``width``'s vector starts in :attr:`signs`."""
        i = self.widths.index(width)
        return sum(self.widths[:i])

    def signs_for(self, width: int, *, tensor: str | None = None) -> np.ndarray:
        if width not in self.widths:
            raise ConversionError(f"{tensor or 'a rotated tensor'}: input width {width} has no sign vector "
                                  f"(prism.hadamard.sign_widths = {list(self.widths)})", file=self.file,
                                  json_path=f"metadata.{PREFIX}sign_widths", rule="hadamard_width")
        o = self.offset(width)
        return self.signs[o:o + width]

    def mode(self, tensor: str) -> str | None:
        """``forward`` (a matrix stored ``W·D·H``), ``inverse`` (a looked-up table stored the same way) or None."""
        if tensor in self.weight_names:
            return FORWARD
        if tensor in self.inverse_weight_names:
            return INVERSE
        return None

    def to_json(self) -> dict:
        """What provenance records about the source's rotation (the values live in the sign objects)."""
        return {"metadata": PREFIX.rstrip("."), "version": self.version, "block_size": self.block_size,
                "transform": TRANSFORM, "axis": AXIS, "sign_mode": self.sign_mode, "widths": list(self.widths),
                "weight_names": len(self.weight_names), "inverse_weight_names": sorted(self.inverse_weight_names),
                "gdn_v_grouped": self.gdn_v_grouped}


def has_rotation_metadata(source) -> bool:
    """Whether ``source`` (any Source) declares ``prism.hadamard.*`` keys."""
    if getattr(source, "kind", None) != "gguf":
        return False
    return any(k.startswith(PREFIX) for k in source.metadata)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def read_rotation(source) -> SourceRotation | None:
    """The validated rotation of ``source`` (None when it declares none); computed once per open source."""
    if not has_rotation_metadata(source):
        return None
    with _LOCK:
        if source not in _CACHE:
            _CACHE[source] = _Reader(source).read()
        return _CACHE[source]


def logical_values(source, tensor: str, values: np.ndarray) -> np.ndarray:
    """``values`` of ``tensor`` (rows after the mapping's transforms) as logical parameters: un-rotated
    (``W = W' · H · D`` per block, float64 → float32) when the source stores the tensor rotated."""
    rot = read_rotation(source)
    if rot is None or rot.mode(tensor) is None:
        return values
    width = values.shape[-1]
    return T.hadamard_unrotate(values.reshape(-1, width), rot.signs_for(width, tensor=tensor)).astype(
        np.float32).reshape(values.shape)


class _Reader:
    def __init__(self, source) -> None:
        self.source = source
        self.meta = source.metadata
        self.file = str(source.path)

    def fail(self, key: str, message: str, rule: str) -> ConversionError:
        return ConversionError(f"{PREFIX}{key}: {message}", file=self.file, json_path=f"metadata.{PREFIX}{key}",
                               section="storage-layouts §7", rule=rule)

    def value(self, key: str, types: tuple[str, ...]):
        full = PREFIX + key
        kind = self.meta.type_of(full)
        if kind not in types:
            raise self.fail(key, f"has type {kind}, expected {' or '.join(types)}", "hadamard_metadata_type")
        return self.meta[full]

    def names(self, key: str) -> frozenset[str]:
        if PREFIX + key not in self.meta:
            return frozenset()
        values = self.value(key, ("ARRAY",))
        if not all(isinstance(v, str) for v in values):
            raise self.fail(key, "must be an array of tensor names (strings)", "hadamard_metadata_type")
        if len(set(values)) != len(values):
            dup = next(v for v in values if values.count(v) > 1)
            raise self.fail(key, f"names {dup} twice", "hadamard_names")
        for n in values:
            t = self.source.tensors.get(n)
            if t is None:
                raise self.fail(key, f"names {n}, which the file does not have", "hadamard_names")
            if len(t.shape) != 2:
                raise self.fail(key, f"names {n} of shape {list(t.shape)}; a rotated tensor is a matrix",
                                "hadamard_names")
        return frozenset(values)

    def read(self) -> SourceRotation:
        unknown = sorted(k[len(PREFIX):] for k in self.meta if k.startswith(PREFIX) and k[len(PREFIX):] not in KNOWN)
        if unknown:
            raise self.fail(unknown[0], f"unknown key (known: {', '.join(KNOWN)}); a rotation this converter does "
                            "not understand is not converted", "hadamard_metadata_unknown")
        for key in REQUIRED:
            if PREFIX + key not in self.meta:
                raise self.fail(key, "is missing", "hadamard_metadata_missing")
        ints = ("UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64")
        version = self.value("version", ints) if PREFIX + "version" in self.meta else None
        if version is not None and version not in SUPPORTED_VERSIONS:
            raise self.fail("version", f"{version} is not a supported version {SUPPORTED_VERSIONS}",
                            "hadamard_version")
        block = self.value("block_size", ints)
        if block != T.HADAMARD_BLOCK:
            raise self.fail("block_size", f"{block}, but storage-layouts §7 rotates {T.HADAMARD_BLOCK}-blocks",
                            "hadamard_block_size")
        for key, want in (("transform", TRANSFORM), ("axis", AXIS)):
            got = self.value(key, ("STRING",))
            if got != want:
                raise self.fail(key, f"{got!r}, expected {want!r}", f"hadamard_{key}")
        mode = self.value("sign_mode", ("STRING",)) if PREFIX + "sign_mode" in self.meta else None
        if mode is not None and mode not in SIGN_MODES:
            raise self.fail("sign_mode", f"{mode!r} is not one of {SIGN_MODES}", "hadamard_sign_mode")
        widths = self.value("sign_widths", ("ARRAY",))
        if (not widths or not all(isinstance(w, int) and not isinstance(w, bool) and w > 0 and w % block == 0
                                  for w in widths)):
            raise self.fail("sign_widths", f"{widths[:8]} must be positive multiples of {block}", "hadamard_widths")
        if len(set(widths)) != len(widths):
            raise self.fail("sign_widths", f"{widths} lists a width twice", "hadamard_widths")
        values = self.value("sign_values", ("ARRAY",))
        if len(values) != sum(widths):
            raise self.fail("sign_values", f"has {len(values)} values, sign_widths sum to {sum(widths)}",
                            "hadamard_sign_count")
        signs = np.asarray(values, dtype=np.float64)
        bad = np.flatnonzero(np.abs(signs) != 1.0)
        if bad.size:
            raise self.fail("sign_values", f"value {bad[0]} is {values[bad[0]]!r}, not +1 or -1", "hadamard_sign_value")
        forward, inverse = self.names("weight_names"), self.names("inverse_weight_names")
        both = sorted(forward & inverse)
        if both:
            raise self.fail("inverse_weight_names", f"{both[0]} is also in weight_names", "hadamard_names")
        for key, names in (("weight_names", forward), ("inverse_weight_names", inverse)):
            for n in sorted(names):
                k = self.source.tensors[n].shape[-1]
                if k not in widths:
                    raise self.fail(key, f"{n} has input width {k}, which sign_widths {widths} does not list",
                                    "hadamard_width")
        grouped = None
        if PREFIX + "gdn_v_grouped" in self.meta:
            grouped = self.value("gdn_v_grouped", ("BOOL",))
        return SourceRotation(self.file, block, tuple(widths), signs.astype(np.float32), forward, inverse, grouped,
                              version, mode)
