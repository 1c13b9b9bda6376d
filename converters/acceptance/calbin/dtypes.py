"""The dtype table of calbin metadata: element width in bits for every spelling the package uses.

docs/calbin.md §5.3 (``ibuf``/``obuf`` ``type <dtype>``, e.g. ``int32``, ``bfloat16``) and §6 (op I/O YAML
``PrimitiveType``, XLA-style names such as ``S32``/``BF16``). An unknown dtype never counts as 0 bytes:
:func:`dtype_bits` returns ``None`` and the caller reports it (``IO_DTYPE_UNKNOWN`` /
``OP_DTYPE_UNKNOWN``), refusing the capacity figure it would have fed.
"""

from __future__ import annotations

import math

_BITS: dict[str, int] = {}


def _register(bits: int, *names: str) -> None:
    for n in names:
        _BITS[n.lower()] = bits


_register(1, "pred", "bool")
_register(4, "s4", "int4", "u4", "uint4")
_register(8, "s8", "int8", "u8", "uint8", "f8e4m3fn", "f8e5m2", "float8_e4m3fn", "float8_e5m2")
_register(16, "s16", "int16", "u16", "uint16", "f16", "float16", "half", "bf16", "bfloat16")
_register(32, "s32", "int32", "u32", "uint32", "f32", "float32", "float")
_register(64, "s64", "int64", "u64", "uint64", "f64", "float64", "double", "c64", "complex64")
_register(128, "c128", "complex128")

#: ``pred``/``bool`` are stored one byte per element, as XLA and numpy do.
_STORAGE_BITS = {"pred": 8, "bool": 8}


def dtype_bits(name: str) -> int | None:
    """Storage bits per element of ``name`` (case-insensitive), or ``None`` if unknown."""
    key = name.lower()
    if key in _STORAGE_BITS:
        return _STORAGE_BITS[key]
    return _BITS.get(key)


def tensor_bytes(shape: tuple[int, ...] | list[int], name: str) -> int | None:
    """``product(shape) * dtype bytes`` (sub-byte types rounded up to whole bytes), ``None`` if unknown."""
    bits = dtype_bits(name)
    if bits is None:
        return None
    return math.ceil(math.prod(int(d) for d in shape) * bits / 8)


def known_dtypes() -> list[str]:
    return sorted(_BITS)
