"""The three storage families of prequantized weights (docs/prequantized.md §Component tensors).

- :class:`NVFP4Weight`: E2M1 nibbles ``[N, K/2]`` (even element in the low nibble, bit 3 the sign) and one
  E4M3 block scale per 16 elements ``[N, K/16]``, plus the convention's tensor-level scale;
- :class:`FP8Weight`: E4M3 codes ``[N, K]`` and a scale grid of ``(bh, bw)`` blocks (a tensor scale is one
  ``N × K`` block, a channel scale ``1 × K`` blocks);
- :class:`IntWeight`: signed integers ``q`` packed in int32 words, LSB first, as ``q + 2^(b-1)``; scales
  ``[N, K/G]`` (``[N, 1]`` per channel) and, asymmetric, zero points packed the same way along the rows.

Each reads only the rows asked for (:func:`~.numeric.component_rows`); the convention subclasses add the
library rule (``rule``, elementwise on code values and scales) and ``value_relation``.
"""

from __future__ import annotations

import numpy as np

from converters.errors import SourceFormatError
from ninfer_core.codecs.bitpack import byte_table

from .numeric import E2M1, E4M3, as_f32, component_rows
from .weight import QuantizedWeight

SECTION = "docs/prequantized.md §Component tensors"


def check_part(t, dtypes: tuple[str, ...], shape: tuple[int, ...] | None, module: str, role: str,
               rule: str = "prequantized_component_shape") -> None:
    """Raise SourceFormatError unless component ``t`` has one of ``dtypes`` and (if given) ``shape``."""
    if t.dtype not in dtypes:
        raise SourceFormatError(f"{module}: {role} has dtype {t.dtype}, expected {' or '.join(dtypes)}",
                                file=str(t.file), json_path=f"{t.name}.dtype", rule="prequantized_component_dtype",
                                section=SECTION)
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise SourceFormatError(f"{module}: {role} has shape {list(t.shape)}, expected {list(shape)}",
                                file=str(t.file), json_path=f"{t.name}.shape", rule=rule, section=SECTION)


def scalar(t, module: str, role: str) -> float:
    """The value of a one-element float component (shape ``[]`` or ``[1]``)."""
    check_part(t, ("F32", "BF16", "F16"), None, module, role)
    if tuple(t.shape) not in ((), (1,)):
        raise SourceFormatError(f"{module}: {role} has shape {list(t.shape)}, expected a scalar ([] or [1])",
                                file=str(t.file), json_path=f"{t.name}.shape", rule="prequantized_component_shape",
                                section=SECTION)
    v = float(np.asarray(component_rows(t, 0, 1), dtype=np.float32).reshape(-1)[0])
    if not (np.isfinite(v) and v > 0):
        raise SourceFormatError(f"{module}: {role} = {v!r} is not finite and positive", file=str(t.file),
                                json_path=t.name, rule="prequantized_scale_value", section=SECTION)
    return v


class NVFP4Weight(QuantizedWeight):
    family = "nvfp4"
    CODES = "weight_packed"
    SCALES = "weight_scale"
    E2M1_TABLE = E2M1  # nibble → value; nibble 0x8 is −0.0 here (compressed-tensors)

    def codes(self, r0: int, r1: int) -> np.ndarray:
        """Packed E2M1 bytes ``[r1 - r0, K/2]``."""
        return component_rows(self.parts[self.CODES], r0, r1)

    def block_scales(self, r0: int, r1: int) -> np.ndarray:
        """E4M3 block-scale bytes ``[r1 - r0, K/16]``."""
        return component_rows(self.parts[self.SCALES], r0, r1).view(np.uint8)

    def e2m1(self, r0: int, r1: int) -> np.ndarray:
        """E2M1 values float32 ``[r1 - r0, K/16, 16]`` (exact): one table lookup per packed byte."""
        c = self.codes(r0, r1)
        table = byte_table(self.E2M1_TABLE, 4)  # byte → (low nibble's value, high nibble's value)
        return np.take(table, c, axis=0).reshape(c.shape[0], -1, 16)

    def scale_values(self, r0: int, r1: int) -> np.ndarray:
        """Block scales as float32 ``[r1 - r0, K/16]`` (exact)."""
        return E4M3[self.block_scales(r0, r1)]

    def _dequantize(self, r0: int, r1: int) -> np.ndarray:
        return self.rule(self.e2m1(r0, r1), self.scale_values(r0, r1))

    @classmethod
    def check(cls, module: str, parts: dict, shape: tuple[int, int]) -> None:
        n, k = shape
        check_part(parts[cls.CODES], ("U8",), (n, k // 2), module, cls.CODES)
        check_part(parts[cls.SCALES], ("F8_E4M3",), (n, k // 16), module, cls.SCALES)


class FP8Weight(QuantizedWeight):
    family = "fp8"
    CODES = "weight"
    SCALES = "weight_scale"
    block: tuple[int, int] = (1, 1)

    def codes(self, r0: int, r1: int) -> np.ndarray:
        """E4M3 code bytes ``[r1 - r0, K]``."""
        return component_rows(self.parts[self.CODES], r0, r1).view(np.uint8)

    def scale_grid(self, r0: int, r1: int) -> np.ndarray:
        """The scales of rows ``[r0, r1)`` in their source dtype, one row per weight row: ``[r1 - r0, ceil(K/bw)]``."""
        t = self.parts[self.SCALES]
        bh, bw = self.block
        n = r1 - r0
        if tuple(t.shape) in ((), (1,)):
            return np.broadcast_to(component_rows(t, 0, 1).reshape(1, 1), (n, 1))
        s = component_rows(t, r0 // bh, -(-r1 // bh))
        s = s.reshape(s.shape[0], -1)
        return np.repeat(s, bh, axis=0)[r0 - (r0 // bh) * bh:][:n]

    def expanded_scales(self, r0: int, r1: int) -> np.ndarray:
        """Scales broadcast to every element, ``[r1 - r0, K]``, in their source dtype."""
        s = self.scale_grid(r0, r1)
        k = self.shape[1]
        bw = k if s.shape[1] == 1 else self.block[1]
        return np.repeat(s, bw, axis=1)[:, :k]

    @property
    def scale_dtype(self) -> str:
        return {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[self.parts[self.SCALES].dtype]

    def applied_scales(self, s: np.ndarray) -> np.ndarray:
        """Stored scales ``s`` as the library multiplies by them (float32 values): as stored here; a convention
        that rounds the scale first says so (ModelOpt)."""
        return as_f32(s)

    def _dequantize(self, r0: int, r1: int) -> np.ndarray:
        return self.rule(E4M3[self.codes(r0, r1)], self.expanded_scales(r0, r1))

    def grid_shape(self) -> tuple[int, ...]:
        n, k = self.shape
        bh, bw = self.block
        return (-(-n // bh), -(-k // bw))

    def check(self, module: str) -> None:
        n, k = self.shape
        check_part(self.parts[self.CODES], ("F8_E4M3",), (n, k), module, self.CODES)
        t = self.parts[self.SCALES]
        check_part(t, ("F32", "BF16", "F16"), None, module, self.SCALES)
        want = self.grid_shape()
        ok = tuple(t.shape) in ((), (1,)) if want == (1, 1) else (
            tuple(t.shape) == want or (want[1] == 1 and tuple(t.shape) == want[:1]))
        if not ok:
            raise SourceFormatError(f"{module}: {self.SCALES} has shape {list(t.shape)}, expected {list(want)} "
                                    f"for blocks of {list(self.block)} rows x columns", file=str(t.file),
                                    json_path=f"{t.name}.shape", rule="prequantized_component_shape", section=SECTION)


class IntWeight(QuantizedWeight):
    family = "int"
    CODES = "weight_packed"
    SCALES = "weight_scale"
    ZEROS = "weight_zero_point"
    bits: int = 4

    @property
    def per_word(self) -> int:
        return 32 // self.bits

    def codes(self, r0: int, r1: int) -> np.ndarray:
        """Signed codes ``q`` int8 ``[r1 - r0, K]``."""
        w = component_rows(self.parts[self.CODES], r0, r1)
        return _unpack(np.ascontiguousarray(w).view(np.uint8).reshape(w.shape[0], -1), self.bits)[:, :self.shape[1]]

    def zero_points(self, r0: int, r1: int) -> np.ndarray | None:
        """Signed zero points int8 ``[r1 - r0, G]`` (packed along the rows), or None when symmetric."""
        t = self.parts.get(self.ZEROS)
        if t is None:
            return None
        pw = self.per_word
        w0, w1 = r0 // pw, -(-r1 // pw)
        words = np.ascontiguousarray(component_rows(t, w0, w1).T)  # [G, words]
        z = _unpack(words.view(np.uint8).reshape(words.shape[0], -1), self.bits)  # [G, rows]
        return np.ascontiguousarray(z[:, r0 - w0 * pw : r1 - w0 * pw].T)

    def scales(self, r0: int, r1: int) -> np.ndarray:
        """Scales ``[r1 - r0, G]`` in their source dtype (``G = 1`` per channel)."""
        s = component_rows(self.parts[self.SCALES], r0, r1)
        return s.reshape(s.shape[0], -1)

    @property
    def scale_dtype(self) -> str:
        return {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[self.parts[self.SCALES].dtype]

    @property
    def groups(self) -> int:
        return 1 if self.group is None else self.shape[1] // self.group

    def values(self, r0: int, r1: int) -> np.ndarray:
        """``q - z`` int16 ``[r1 - r0, G, K/G]`` (``q`` when symmetric)."""
        n = r1 - r0
        v = self.codes(r0, r1).astype(np.int16).reshape(n, self.groups, -1)
        z = self.zero_points(r0, r1)
        return v if z is None else v - z.astype(np.int16)[:, :, None]

    def _dequantize(self, r0: int, r1: int) -> np.ndarray:
        return self.rule(self.values(r0, r1).astype(np.float32), self.scales(r0, r1)[:, :, None])

    def check(self, module: str) -> None:
        n, k = self.shape
        if self.group is not None and k % self.group:
            raise SourceFormatError(f"{module}: {k} input columns are not whole groups of {self.group}",
                                    file=str(self.parts[self.CODES].file), json_path=self.parts[self.CODES].name,
                                    rule="prequantized_group_shape", section=SECTION)
        codes, zeros = self.storage()
        check_part(self.parts[self.CODES], *codes[:2], module, self.CODES, rule=codes[2])
        check_part(self.parts[self.SCALES], ("F32", "BF16", "F16"), (n, self.groups), module, self.SCALES)
        if self.ZEROS in self.parts:
            check_part(self.parts[self.ZEROS], *zeros[:2], module, self.ZEROS, rule=zeros[2])

    def storage(self) -> tuple[tuple, tuple]:
        """``(dtypes, shape, rule)`` of the codes and of the zero points: packed into I32 words
        (docs/prequantized.md §Component tensors)."""
        n, k = self.shape
        return ((("I32",), (n, -(-k * self.bits // 32)), "prequantized_packed_size"),
                (("I32",), (-(-n * self.bits // 32), self.groups), "prequantized_packed_size"))


def _unpack(b: np.ndarray, bits: int) -> np.ndarray:
    """``(rows, bytes)`` little-endian packed unsigned fields → signed ``int8`` ``u - 2^(bits-1)``."""
    if bits == 8:
        u = b
    else:
        u = np.empty((b.shape[0], b.shape[1], 2), dtype=np.uint8)
        u[:, :, 0] = b & 0x0F
        u[:, :, 1] = b >> 4
        u = u.reshape(b.shape[0], -1)
    return (u.astype(np.int16) - (1 << (bits - 1))).astype(np.int8)


def read_shape_part(t, module: str) -> tuple[int, int]:
    """``weight_shape``: the logical ``[N, K]`` (int32/int64, two positive elements)."""
    check_part(t, ("I32", "I64"), (2,), module, "weight_shape")
    v = np.asarray(component_rows(t, 0, 2), dtype=np.int64).reshape(-1)
    if not (v > 0).all():
        raise SourceFormatError(f"{module}: weight_shape {v.tolist()} is not two positive sizes", file=str(t.file),
                                json_path=t.name, rule="prequantized_component_shape", section=SECTION)
    return int(v[0]), int(v[1])


def missing(module: str, role: str, file, section: str = SECTION) -> SourceFormatError:
    """The error for a component that is not in the files."""
    return SourceFormatError(f"{module}: component {module}.{role} is missing", file=str(file),
                             json_path=f"{module}.{role}", rule="prequantized_component_missing", section=section)


def keep(parts: dict, roles) -> dict:
    """The components of ``roles`` that are present."""
    return {r: parts[r] for r in roles if r in parts}


def inverse(v: float) -> float:
    """``1 / v`` rounded once to float32 (the divisor convention of a multiplying scale)."""
    return float(np.float32(1) / np.float32(v))


def scheme_record(scheme, cfg) -> dict:
    """What a weight keeps of its config group (format, bits, strategy, where it is declared)."""
    return {"format": scheme.format, "num_bits": scheme.num_bits, "strategy": scheme.strategy,
            "config": f"{cfg.file} {scheme.where}"}


__all__ = ["FP8Weight", "IntWeight", "NVFP4Weight", "check_part", "inverse", "keep", "missing", "read_shape_part",
           "scalar", "scheme_record"]
