"""Block FP8 as in Qwen's own ``*-FP8`` releases: ``quant_method: fp8``, ``weight_block_size: [128, 128]``
(docs/prequantized.md §Block FP8).

``weight`` F8_E4M3 ``[N, K]`` and ``weight_scale_inv`` F32 ``[ceil(N/bh), ceil(K/bw)]``: despite the name
it multiplies. The library rule (transformers' fine-grained FP8 dequantization): ``float32(e4m3) *
float32(scale)`` in float32, cast to the scale's dtype (a 16- or 32-bit float; else the model dtype). A block scale grid has no per-row form: the exact
targets are the dense ones the values fit (docs/prequantized.md §Exactness table).
"""

from __future__ import annotations

import numpy as np

from .families import FP8Weight, check_part, inverse, keep, missing, scalar, scheme_record
from .numeric import ST_TO_OUT, as_f32, round_to

SECTION = "docs/prequantized.md §Block FP8"
COMPONENTS = ("weight", "weight_scale_inv", "input_scale", "activation_scale")


class BlockFP8(FP8Weight):
    SCALES = "weight_scale_inv"

    @property
    def value_relation(self) -> str:
        return f"{self.library_dtype}(float32(e4m3) * float32(weight_scale_inv)) per {list(self.block)} block"

    def rule(self, e4m3: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """The library's values of E4M3 values under scales (source dtype), elementwise."""
        return round_to(np.multiply(e4m3, as_f32(scales), dtype=np.float32), self.library_dtype)


def build(module: str, parts: dict, scheme, cfg):
    """The :class:`~.weight.QuantizedWeight` of one block-FP8 module."""
    first = next(iter(parts.values())).file
    for role in ("weight", "weight_scale_inv"):
        if role not in parts:
            raise missing(module, role, first, SECTION)
    w = parts["weight"]
    check_part(w, ("F8_E4M3",), None, module, "weight")
    if len(w.shape) != 2:
        check_part(w, ("F8_E4M3",), ("N", "K"), module, "weight")
    shape = (int(w.shape[0]), int(w.shape[1]))
    act = parts.get("input_scale") or parts.get("activation_scale")
    # transformers' output dtype: the scale's when it is a 16- or 32-bit float, else the model dtype
    out = ST_TO_OUT.get(parts["weight_scale_inv"].dtype, cfg.output_dtype)
    qw = BlockFP8(f"{module}.weight", "FP8_BLOCK", shape, keep(parts, COMPONENTS), out,
                  group=scheme.block[1], scheme=scheme_record(scheme, cfg))
    qw.block = scheme.block
    qw.check(module)
    if act is not None and scheme.static_input:
        qw.activation_divisor = inverse(scalar(act, module, act.name.rsplit(".", 1)[-1]))
    return qw
