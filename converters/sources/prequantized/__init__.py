"""Prequantized HF checkpoints (NVFP4, FP8, INT4/INT8) read without requantizing (docs/prequantized.md).

An HF directory whose ``config.json`` declares ``quantization_config`` (compressed-tensors, ModelOpt,
``quant_method: fp8``) or that holds ModelOpt's ``hf_quant_config.json`` shows each quantized module as one
virtual tensor ``<module>.weight`` whose ``dtype`` is a kind of :data:`KINDS`; ``source.quantized(name)``
returns its :class:`QuantizedWeight` (dequantize by the library's rule, exact targets, transcode, ulp bound).
"""

from __future__ import annotations

from .config import QuantizationConfig, Scheme, detect
from .numeric import ulp_distance
from .source import attach
from .weight import KINDS, QuantizedWeight

__all__ = ["KINDS", "QuantizationConfig", "QuantizedWeight", "Scheme", "attach", "detect", "ulp_distance"]
