"""JSON forms of declared values in Evidence (docs/inspect.md §Facts and queries).

- 64-bit integer metadata and every shape dimension are decimal strings (no rounding in JSON readers
  limited to 2^53); 8/16/32-bit integers stay JSON numbers.
- Non-finite floats are ``"NaN"``, ``"+Infinity"``, ``"-Infinity"``; negative zero is ``"-0"``; the declared
  float type is kept beside the value.
- Arrays are ``{element_type, count, preview (at most 8), preview_complete}``.
- A string that is not UTF-8 is ``{"bytes_hex", "utf8_error_at"}`` (its exact bytes); a BOOL byte other than
  0/1 is ``true``, as ggml reads it (the byte is on the row's limitations; docs/inspect.md §Non-canonical
  metadata values).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gguf.constants import GGUFValueType

from converters.sources.gguf_values import ArrayPreview, NonCanonicalBool, NonUTF8String

WIDE_INTS = (GGUFValueType.UINT64, GGUFValueType.INT64)
FLOATS = (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64)


def float_json(v: float, vtype: int | None = None) -> Any:
    """A float as JSON: finite values as numbers (``-0.0`` as ``"-0"``), others as strings."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Infinity" if v > 0 else "-Infinity"
    if v == 0 and math.copysign(1.0, v) < 0:
        return "-0"
    if vtype == GGUFValueType.FLOAT32:
        # the shortest decimal that reads back as the same binary32 value
        return float(str(np.float32(v)))
    return v


def gguf_value_json(v: Any, vtype: int) -> Any:
    """A GGUF scalar, string or :class:`ArrayPreview` as its Evidence JSON form."""
    if isinstance(v, ArrayPreview):
        return {
            "element_type": GGUFValueType(v.element_type).name,
            "count": str(v.count),
            "preview": [gguf_value_json(e, v.element_type) for e in v.preview],
            "preview_complete": v.preview_complete,
        }
    if isinstance(v, NonUTF8String):
        return {"bytes_hex": v.raw.hex(), "utf8_error_at": v.error_at}
    if isinstance(v, NonCanonicalBool):
        return True
    if vtype in WIDE_INTS:
        return str(v)
    if vtype in FLOATS:
        return float_json(v, vtype)
    return v


def dims_json(dims) -> list[str]:
    return [str(d) for d in dims]
