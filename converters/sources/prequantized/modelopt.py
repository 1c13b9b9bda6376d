"""ModelOpt checkpoints: ``quant_algo`` ``NVFP4`` and ``FP8`` (docs/prequantized.md §ModelOpt).

The library rules, as ModelOpt's own dequantization computes them (``NVFP4QTensor.dequantize``,
``FP8QTensor.dequantize``), ``out`` being the model dtype:

- NVFP4: ``per_block = float32(e4m3 scale) * weight_scale_2`` in float32; ``e2m1 * per_block`` in float32;
  cast to ``out``. The v3 divisor is ``1 / weight_scale_2`` rounded once to float32;
- FP8: ``out(e4m3) * out(weight_scale)`` in ``out`` (the scale is rounded to ``out`` first: bfloat16 for a
  bfloat16 model, so its codes keep in ``fp8_e4m3fn_row_bf16`` with ``bf16(weight_scale)`` on every row; for a
  float16 or float32 model only when ``out(weight_scale)`` is a bfloat16 value).

Activation divisors are ``1 / input_scale`` (ModelOpt's scales multiply; v3's divisors divide).
"""

from __future__ import annotations

import numpy as np

from .families import FP8Weight, NVFP4Weight, check_part, inverse, keep, missing, scalar, scheme_record
from .numeric import E2M1, as_f32, component_rows, round_to, torch_op

SECTION = "docs/prequantized.md §ModelOpt"
COMPONENTS = ("weight", "weight_scale", "weight_scale_2", "input_scale")


class MONVFP4(NVFP4Weight):
    """``weight`` U8 ``[N, K/2]``, ``weight_scale`` F8_E4M3 ``[N, K/16]``, ``weight_scale_2`` F32 ``[]``,
    ``input_scale`` F32 ``[]``."""

    CODES = "weight"
    E2M1_TABLE = np.where(np.arange(16) == 8, np.float32(0.0), E2M1).astype(np.float32)  # ModelOpt's 0x8 is +0.0

    @property
    def value_relation(self) -> str:
        return (f"{self.library_dtype}(float32(e2m1 * float32(e4m3 block scale * weight_scale_2))); "
                "v3 nvfp4: float32(e2m1 * e4m3) / float32(1 / weight_scale_2)")

    def rule(self, e2m1: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """The library's values of E2M1 values ``[..., 16]`` under E4M3 scale values ``[...]``."""
        ws2 = np.asarray(component_rows(self.parts["weight_scale_2"], 0, 1), dtype=np.float32).reshape(())
        per_block = np.multiply(scales, ws2, dtype=np.float32)
        return round_to(np.multiply(e2m1, per_block[..., None], dtype=np.float32), self.library_dtype)


class MOFP8(FP8Weight):
    """``weight`` F8_E4M3 ``[N, K]``, ``weight_scale`` F32 ``[]``, ``input_scale`` F32 ``[]``."""

    @property
    def value_relation(self) -> str:
        d = self.library_dtype
        return f"{d}({d}(e4m3) * {d}(weight_scale)); v3: e4m3 * bf16 scale in float32"

    def rule(self, e4m3: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """The library's values of E4M3 values under scales (source dtype), elementwise."""
        return torch_op(e4m3, scales, "mul", self.library_dtype)

    def applied_scales(self, s: np.ndarray) -> np.ndarray:
        """ModelOpt rounds its float32 scale to ``out`` (the model dtype) before the product."""
        return round_to(as_f32(s), self.library_dtype)


def build(module: str, parts: dict, scheme, cfg):
    """The :class:`~.weight.QuantizedWeight` of one ModelOpt module."""
    first = next(iter(parts.values())).file
    name = f"{module}.weight"
    need = ("weight", "weight_scale") + (("weight_scale_2",) if scheme.kind == "MO_NVFP4" else ())
    for role in need:
        if role not in parts:
            raise missing(module, role, first, SECTION)
    w = parts["weight"]
    a = inverse(scalar(parts["input_scale"], module, "input_scale")) if "input_scale" in parts else None
    if scheme.kind == "MO_NVFP4":
        check_part(w, ("U8",), None, module, "weight")
        if len(w.shape) != 2:
            check_part(w, ("U8",), ("N", "K/2"), module, "weight")
        shape = (int(w.shape[0]), int(w.shape[1]) * 2)
        MONVFP4.check(module, parts, shape)
        ws2 = scalar(parts["weight_scale_2"], module, "weight_scale_2")
        return MONVFP4(name, "MO_NVFP4", shape, keep(parts, COMPONENTS), cfg.output_dtype, group=16,
                       weight_divisor=inverse(ws2), activation_divisor=a, scheme=scheme_record(scheme, cfg))
    check_part(w, ("F8_E4M3",), None, module, "weight")
    if len(w.shape) != 2:
        check_part(w, ("F8_E4M3",), ("N", "K"), module, "weight")
    shape = (int(w.shape[0]), int(w.shape[1]))
    qw = MOFP8(name, "MO_FP8", shape, keep(parts, ("weight", "weight_scale", "input_scale")), cfg.output_dtype,
               activation_divisor=a, scheme=scheme_record(scheme, cfg))
    qw.block = shape
    qw.check(module)
    scalar(parts["weight_scale"], module, "weight_scale")
    return qw
