"""The worked sizes of docs/format/layouts.md equal what the codecs compute.

Every table row ``| `format` | `layout` | `[shape]` | divisors | `planes` | bytes |`` on the page is checked
against ``ninfer_core.codecs.encoded_size`` and ``ninfer_core.codecs.planes``, so the page cannot drift from
the code; the NVFP4 tile-order example is checked against the codec's swizzle.
"""

from __future__ import annotations

import json
import re

import numpy as np

from converters import ROOT
from ninfer_core import codecs
from ninfer_core.codecs.nvfp4 import swizzle

PAGE = ROOT / "docs" / "format" / "layouts.md"
ROW = re.compile(r"^\| `(\w+)` \| `(\w+)` \| `(\[[\d, ]*\])` \| (\d+) \| `([^`]+)` \| ([\d,]+) \|$")
PLANE = re.compile(r"^(\w+) @(\d+) (\d+)$")


def worked_rows() -> list[tuple]:
    rows = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line.strip())
        if m:
            fmt, layout, shape, divisors, planes, size = m.groups()
            rows.append((fmt, layout, json.loads(shape), int(divisors), planes, int(size.replace(",", ""))))
    return rows


def test_page_has_a_worked_size_for_every_format():
    assert {r[0] for r in worked_rows()} >= {
        "q2_g64_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16", "t2_g128_fp16",
        "fp8_e4m3fn_row_bf16", "nvfp4", "bf16", "fp32", "int32", "gguf_q8_0"}


def test_worked_sizes_and_planes_equal_the_codecs():
    for fmt, layout, shape, divisors, planes, size in worked_rows():
        assert codecs.encoded_size(fmt, layout, shape, divisors) == size, (fmt, shape, divisors)
        documented = [PLANE.match(p.strip()).groups() for p in planes.split(";")]
        actual = [(p.name, str(p.offset), str(p.size)) for p in codecs.planes(fmt, layout, shape, divisors)]
        assert documented == actual, (fmt, shape, divisors)


def test_nvfp4_tile_order_example():
    """docs/format/layouts.md §3: scale (r=130, c=5) of a [256, 128] object is plane byte 1569."""
    n, k = 256, 128
    scales = np.zeros((n, k // 16), dtype=np.uint8)
    scales[130, 5] = 1
    tiles = swizzle(scales, k).reshape(-1)
    assert np.flatnonzero(tiles).tolist() == [1569]
