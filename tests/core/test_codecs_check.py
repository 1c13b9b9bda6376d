"""``check``: every kind of invalid content is found, with its rule, severity and first location."""

from __future__ import annotations

import numpy as np
import pytest

from ninfer_core import codecs

RS = "row_split_k128_v1"
NV = "block_scale_k16_m128x4_v1"


def encoded(fmt, layout, shape, divisors=1):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return bytearray(codecs.encode(fmt, layout, x, divisors=divisors))


def plane(fmt, layout, shape, name, divisors=1):
    return {p.name: p for p in codecs.planes(fmt, layout, shape, divisors)}[name]


def rules(fmt, layout, shape, data, divisors=1):
    return sorted((f.rule, f.severity) for f in codecs.check(fmt, layout, shape, bytes(data), divisors, json_path="obj"))


def test_clean_objects_have_no_findings():
    for fmt in ("q2_g64_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16", "t2_g128_fp16"):
        assert rules(fmt, RS, [3, 200], encoded(fmt, RS, [3, 200])) == []
    assert rules("nvfp4", NV, [256, 64], encoded("nvfp4", NV, [256, 64], 2), 2) == []
    assert rules("fp8_e4m3fn_row_bf16", "row_scale_v1", [2, 5], encoded("fp8_e4m3fn_row_bf16", "row_scale_v1", [2, 5])) == []


def test_q8_minus_128():
    data = encoded("q8_g32_fp16", RS, [3, 40])
    data[2 * 128 + 17] = 0x80
    found = codecs.check("q8_g32_fp16", RS, [3, 40], bytes(data), json_path="$.objects[4]")
    assert [(f.rule, f.severity, f.json_path) for f in found] == [("invalid_code", "ERROR", "$.objects[4]")]
    assert "row 2, column 17" in found[0].message and "-128" in found[0].message


def test_t2_0b10_counted_and_located():
    data = encoded("t2_g128_fp16", RS, [2, 128])
    data[32 + 3] = (data[32 + 3] & ~0b1100) | 0b1000  # row 1, element 13
    data[32 + 30] = 0b10101010  # row 1, elements 120..123
    found = codecs.check("t2_g128_fp16", RS, [2, 128], bytes(data))
    assert [f.rule for f in found] == ["invalid_code"]
    assert found[0].message.startswith("t2_g128_fp16: 5 invalid code(s)") and "row 1, column 13" in found[0].message


@pytest.mark.parametrize("code", [0x7F, 0xFF])
def test_fp8_nan_codes(code):
    data = encoded("fp8_e4m3fn_row_bf16", "row_scale_v1", [2, 5])
    data[7] = code
    found = codecs.check("fp8_e4m3fn_row_bf16", "row_scale_v1", [2, 5], bytes(data))
    assert [(f.rule, f.severity) for f in found] == [("invalid_code", "ERROR")]
    assert "row 1, column 2" in found[0].message


def test_non_finite_multipliers():
    shape = [2, 64]
    data = encoded("q4_g64_fp16", RS, shape)
    s = plane("q4_g64_fp16", RS, shape, "scale")
    data[s.offset + 4 : s.offset + 6] = bytes.fromhex("007e")  # row 1 group 0: NaN
    assert rules("q4_g64_fp16", RS, shape, data) == [("non_finite_multiplier", "ERROR")]
    data = encoded("fp8_e4m3fn_row_bf16", "row_scale_v1", shape)
    s = plane("fp8_e4m3fn_row_bf16", "row_scale_v1", shape, "scales")
    data[s.offset + 2 : s.offset + 4] = bytes.fromhex("807f")  # BF16 +inf
    assert rules("fp8_e4m3fn_row_bf16", "row_scale_v1", shape, data) == [("non_finite_multiplier", "ERROR")]


def test_negative_multiplier_is_a_warning_except_for_q2():
    shape = [1, 64]
    for fmt, expected in (("q4_g64_fp16", [("negative_multiplier", "WARNING")]), ("q2_g64_fp16", [])):
        data = encoded(fmt, RS, shape)
        s = plane(fmt, RS, shape, "scale")
        data[s.offset + 1] |= 0x80
        assert rules(fmt, RS, shape, data) == expected


def test_padding_codes_groups_and_gaps_are_warnings():
    shape = [2, 100]  # Kp = 128: columns 100..127 are padding, q4 group 1 partly padding
    data = encoded("q4_g64_fp16", RS, shape)
    data[64 + 60] = 0x10  # row 1, column 121: padding code 1
    found = codecs.check("q4_g64_fp16", RS, shape, bytes(data))
    assert [(f.rule, f.severity) for f in found] == [("nonzero_padding", "WARNING")]
    assert "row 1, column 121" in found[0].message
    data = encoded("q8_g32_fp16", RS, shape)  # groups of 32: group 3 (columns 96..127) is partly real
    s = plane("q8_g32_fp16", RS, shape, "scale")
    assert rules("q8_g32_fp16", RS, shape, data) == []
    data = encoded("q2_g64_fp16", RS, [1, 60])  # group 1 of q2 is wholly padding
    s = plane("q2_g64_fp16", RS, [1, 60], "scale")
    data[s.offset + 2 : s.offset + 4] = bytes.fromhex("0080")  # -0.0 is not +0.0
    assert rules("q2_g64_fp16", RS, [1, 60], data) == [("nonzero_padding", "WARNING")]
    data[s.offset + 2 : s.offset + 4] = bytes.fromhex("007c")  # +inf in padding: a warning, not an error
    assert rules("q2_g64_fp16", RS, [1, 60], data) == [("nonzero_padding", "WARNING")]
    data = encoded("q2_g64_fp16", RS, [1, 60])
    data[15] = 0x00  # columns 60..63 of q2 must hold u = 1 (0x55)
    assert rules("q2_g64_fp16", RS, [1, 60], data) == [("nonzero_padding", "WARNING")]
    data = encoded("q4_g64_fp16", RS, [1, 64])
    data[100] = 1  # the gap between the low plane (64 bytes) and the scale plane (at 256)
    found = codecs.check("q4_g64_fp16", RS, [1, 64], bytes(data))
    assert [(f.rule, f.severity) for f in found] == [("nonzero_padding", "WARNING")]
    assert "byte 100" in found[0].message


def test_t2_invalid_code_in_padding_is_only_a_warning():
    data = encoded("t2_g128_fp16", RS, [1, 100])
    data[31] = 0b10 << 6  # column 127
    assert rules("t2_g128_fp16", RS, [1, 100], data) == [("nonzero_padding", "WARNING")]


def test_nvfp4_block_scales_and_divisors():
    shape = [256, 64]
    s = plane("nvfp4", NV, shape, "block_scales", 2)
    d = plane("nvfp4", NV, shape, "divisors", 2)
    data = encoded("nvfp4", NV, shape, 2)
    data[s.offset + 512 + 16 * 3 + 4 * 1 + 2] |= 0x80  # row 128 + 32 + 3, block 2: sign bit
    found = codecs.check("nvfp4", NV, shape, bytes(data), 2)
    assert [(f.rule, f.severity) for f in found] == [("block_scale_sign", "ERROR")]
    assert "row 163, block 2" in found[0].message
    data = encoded("nvfp4", NV, shape, 2)
    data[s.offset + 7] = 0x7F
    data[s.offset + 8] = 0xFF
    assert rules("nvfp4", NV, shape, data, 2) == [("block_scale_nan", "ERROR")]
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        data = encoded("nvfp4", NV, shape, 2)
        data[d.offset + 4 : d.offset + 8] = np.float32(bad).tobytes()
        found = codecs.check("nvfp4", NV, shape, bytes(data), 2)
        assert [(f.rule, f.severity) for f in found] == [("invalid_divisor", "ERROR")]
        assert "divisor 1" in found[0].message


def test_contiguous_non_finite_values_warn():
    data = bytearray(codecs.encode("bf16", "contiguous_le_v1", np.ones((2, 3), np.float32)))
    data[8:10] = bytes.fromhex("c07f")  # BF16 NaN at row 1, element 1
    found = codecs.check("bf16", "contiguous_le_v1", [2, 3], bytes(data))
    assert [(f.rule, f.severity) for f in found] == [("non_finite_value", "WARNING")]
    assert "row 1, element 1" in found[0].message
    data = codecs.encode("fp32", "contiguous_le_v1", np.array([1.0, np.inf], np.float32))
    assert rules("fp32", "contiguous_le_v1", [2], data) == [("non_finite_value", "WARNING")]
    assert rules("int32", "contiguous_le_v1", [2], b"\xff" * 8) == []


@pytest.mark.parametrize("fmt, k, at", [("gguf_q4_k", 256, 2), ("gguf_q6_k", 256, 208), ("gguf_q8_0", 64, 34),
                                        ("gguf_tq2_0", 256, 64)])
def test_passthrough_non_finite_multipliers(fmt, k, at):
    data = bytearray(codecs.encoded_size(fmt, "ggml_blocks_v1", [2, k]))
    assert rules(fmt, "ggml_blocks_v1", [2, k], data) == []
    data[len(data) // 2 + at + 1] = 0x7C  # row 1: an FP16 exponent of all ones
    found = codecs.check(fmt, "ggml_blocks_v1", [2, k], bytes(data))
    assert [(f.rule, f.severity) for f in found] == [("non_finite_multiplier", "ERROR")]
    assert "row 1, block" in found[0].message
