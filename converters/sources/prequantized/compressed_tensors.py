"""compressed-tensors checkpoints: ``nvfp4-pack-quantized``, ``float-quantized``, ``pack-quantized``
(docs/prequantized.md §compressed-tensors).

The library rules, as compressed-tensors' decompressors compute them (``dequantize`` →
``_dequantize``: ``scale = scale / global_scale``; ``x_q.to(scale.dtype)``; ``- zero_point``; ``* scale``;
then the output cast):

- NVFP4: nibbles unpacked to bfloat16, the E4M3 block scale cast to bfloat16, divided by the global
  scale in the promoted dtype (float32 for a float32 ``[1]`` global scale), multiplied in that dtype, the
  result cast to bfloat16;
- FP8: ``e4m3 * scale`` in the scale's dtype (one rounding);
- INT: ``(q - z) * scale`` in the scale's dtype (``q - z`` exact; one rounding).
"""

from __future__ import annotations

import numpy as np

from converters.errors import SourceFormatError

from .families import (
    FP8Weight,
    IntWeight,
    NVFP4Weight,
    inverse,
    keep,
    missing,
    read_shape_part,
    scalar,
    scheme_record,
)
from .numeric import ST_TO_OUT, component_rows, promote, round_to, torch_op

SECTION = "docs/prequantized.md §compressed-tensors"
#: component tensor names of every compressed-tensors kind (hidden from ``source.tensors``)
COMPONENTS = ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "weight_zero_point",
              "weight_shape", "input_scale", "weight")


class CTNVFP4(NVFP4Weight):
    """``weight_packed`` U8 ``[N, K/2]``, ``weight_scale`` F8_E4M3 ``[N, K/16]``, ``weight_global_scale`` (the
    v3 divisor, as is), ``input_global_scale`` (static activations: the activation divisor, as is)."""

    @property
    def _mid(self) -> str:
        g = self.parts["weight_global_scale"]
        if tuple(g.shape) == ():  # a zero-dimensional tensor does not promote the bfloat16 scale
            return "bfloat16"
        return promote("bfloat16", ST_TO_OUT[g.dtype])

    @property
    def value_relation(self) -> str:
        mid = self._mid
        return (f"bfloat16({mid}(e2m1 * {mid}(bfloat16(e4m3 block scale) / weight_global_scale))); "
                "v3 nvfp4: float32(e2m1 * e4m3) / weight_global_scale")

    def rule(self, e2m1: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """The library's values of E2M1 values ``[..., 16]`` under E4M3 scale values ``[...]``."""
        mid = self._mid
        g = component_rows(self.parts["weight_global_scale"], 0, 1).reshape(())
        eff = torch_op(scales, g, "div", mid)
        return round_to(torch_op(e2m1, eff[..., None], "mul", mid), "bfloat16")


class CTFP8(FP8Weight):
    """``weight`` F8_E4M3 ``[N, K]``, ``weight_scale`` per tensor ``[1]``, per channel ``[N, 1]`` or per
    block ``[ceil(N/bh), ceil(K/bw)]``; ``input_scale`` (static activations)."""

    @property
    def value_relation(self) -> str:
        d = self.scale_dtype
        return f"{d}(e4m3 * weight_scale), one rounding in the scale's dtype; v3: e4m3 * scale in float32"

    def rule(self, e4m3: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """The library's values of E4M3 values under scales (source dtype), elementwise."""
        return torch_op(e4m3, scales, "mul", self.scale_dtype)


class CTInt(IntWeight):
    """``weight_packed`` I32 ``[N, ceil(K*b/32)]``, ``weight_scale`` ``[N, K/G]`` (``[N, 1]`` per channel),
    ``weight_shape`` ``[2]``, ``weight_zero_point`` I32 ``[ceil(N*b/32), K/G]`` when asymmetric."""

    @property
    def value_relation(self) -> str:
        d = self.scale_dtype
        z = " - zero_point" if not self.symmetric else ""
        return f"{d}((q{z}) * weight_scale), one rounding in the scale's dtype; v3: code * fp16 scale in float32"

    def rule(self, values: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """The library's values of ``q - z`` (float32, exact) under scales (source dtype), elementwise."""
        return torch_op(values, scales, "mul", self.scale_dtype)


def build(module: str, parts: dict, scheme, cfg):
    """The :class:`~.weight.QuantizedWeight` of one compressed-tensors module (typed errors for anything
    truncated or inconsistent)."""
    first = next(iter(parts.values())).file
    name = f"{module}.weight"
    if scheme.kind == "CT_NVFP4":
        for role in ("weight_packed", "weight_scale", "weight_global_scale"):
            if role not in parts:
                raise missing(module, role, first)
        p = parts["weight_packed"]
        if len(p.shape) != 2:
            raise SourceFormatError(f"{module}: weight_packed has shape {list(p.shape)}, expected [N, K/2]",
                                    file=str(p.file), json_path=f"{p.name}.shape", rule="prequantized_component_shape",
                                    section=SECTION)
        shape = (int(p.shape[0]), int(p.shape[1]) * 2)
        CTNVFP4.check(module, parts, shape)
        g = scalar(parts["weight_global_scale"], module, "weight_global_scale")
        a = scalar(parts["input_global_scale"], module, "input_global_scale") if "input_global_scale" in parts else None
        return CTNVFP4(name, "CT_NVFP4", shape, keep(parts, CTNVFP4_ROLES), "bfloat16", group=16, weight_divisor=g,
                       activation_divisor=a, scheme=scheme_record(scheme, cfg))
    if scheme.kind.startswith("CT_FP8"):
        shape = _unpacked_shape(module, parts, ("weight", "weight_scale"))
        block = {"CT_FP8_TENSOR": shape, "CT_FP8_CHANNEL": (1, shape[1])}.get(scheme.kind, scheme.block)
        qw = CTFP8(name, scheme.kind, shape, keep(parts, ("weight", "weight_scale", "input_scale")),
                   ST_TO_OUT.get(parts["weight_scale"].dtype, "float32"),
                   group=block[1] if scheme.kind == "CT_FP8_BLOCK" else None, scheme=scheme_record(scheme, cfg))
        qw.block = block
        qw.check(module)
        if "input_scale" in parts:
            qw.activation_divisor = inverse(scalar(parts["input_scale"], module, "input_scale"))
        return qw
    if scheme.format == "int-quantized":
        return _build_int8(module, name, parts, scheme, cfg)
    for role in ("weight_packed", "weight_scale", "weight_shape") + (() if scheme.symmetric else ("weight_zero_point",)):
        if role not in parts:
            raise missing(module, role, first)
    if scheme.symmetric and "weight_zero_point" in parts:
        z = parts["weight_zero_point"]
        raise SourceFormatError(f"{module}: weight_zero_point is present but the scheme is symmetric", file=str(z.file),
                                json_path=z.name, rule="prequantized_component_unexpected", section=SECTION)
    shape = read_shape_part(parts["weight_shape"], module)
    qw = CTInt(name, scheme.kind, shape, keep(parts, ("weight_packed", "weight_scale", "weight_shape",
                                                       "weight_zero_point")),
               ST_TO_OUT.get(parts["weight_scale"].dtype, "float32"), group=scheme.group, symmetric=scheme.symmetric,
               scheme=scheme_record(scheme, cfg))
    qw.bits = scheme.num_bits
    qw.check(module)
    return qw


def _unpacked_shape(module: str, parts: dict, roles: tuple[str, ...]) -> tuple[int, int]:
    """``(N, K)`` of a module whose codes are stored unpacked in ``weight``, once ``roles`` are all present."""
    first = next(iter(parts.values())).file
    for role in roles:
        if role not in parts:
            raise missing(module, role, first)
    w = parts["weight"]
    if len(w.shape) != 2:
        raise SourceFormatError(f"{module}: weight has shape {list(w.shape)}, expected [N, K]", file=str(w.file),
                                json_path=f"{w.name}.shape", rule="prequantized_component_shape", section=SECTION)
    return int(w.shape[0]), int(w.shape[1])


def _build_int8(module: str, name: str, parts: dict, scheme, cfg):
    """``int-quantized``: ``weight`` I8 ``[N, K]`` unpacked, ``weight_scale`` ``[N, K/G]`` / ``[N, 1]``,
    ``weight_zero_point`` I8 ``[N, K/G]`` unpacked when asymmetric."""
    shape = _unpacked_shape(module, parts, ("weight", "weight_scale")
                            + (() if scheme.symmetric else ("weight_zero_point",)))
    qw = CTIntUnpacked(name, scheme.kind, shape,
                       keep(parts, ("weight", "weight_scale", "weight_zero_point", "input_scale")),
                       ST_TO_OUT.get(parts["weight_scale"].dtype, "float32"), group=scheme.group,
                       symmetric=scheme.symmetric, scheme=scheme_record(scheme, cfg))
    qw.bits = 8
    qw.check(module)
    return qw


class CTIntUnpacked(CTInt):
    """``int-quantized`` INT8 (llm-compressor's W8A8): the same rule, codes and zero points stored as int8."""

    CODES = "weight"

    def codes(self, r0: int, r1: int) -> np.ndarray:
        return np.asarray(component_rows(self.parts[self.CODES], r0, r1))

    def zero_points(self, r0: int, r1: int) -> np.ndarray | None:
        t = self.parts.get(self.ZEROS)
        return None if t is None else np.asarray(component_rows(t, r0, r1)).reshape(r1 - r0, -1)

    def storage(self) -> tuple[tuple, tuple]:
        """Codes ``[N, K]`` and zero points ``[N, G]``, unpacked int8."""
        n, k = self.shape
        rule = "prequantized_component_shape"
        return (("I8",), (n, k), rule), (("I8",), (n, self.groups), rule)


CTNVFP4_ROLES = ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale")
