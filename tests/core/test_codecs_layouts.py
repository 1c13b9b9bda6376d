"""Hand-computed byte examples, one or more per layout (storage-layouts §1–§5).

Every expected byte string below was worked out by hand from the spec text (bit positions, nibble order,
plane order, alignment, swizzle), not produced by the encoder: a wrong bit order, nibble order, plane
order or swizzle fails here even if encode and decode agree with each other.
"""

from __future__ import annotations

import numpy as np
import pytest

from ninfer_core import codecs

RS = "row_split_k128_v1"


def hexbytes(*parts: str | bytes) -> bytes:
    out = b""
    for p in parts:
        out += bytes.fromhex(p) if isinstance(p, str) else p
    return out


def zeros(n: int) -> bytes:
    return bytes(n)


def roundtrip(fmt: str, layout: str, x: np.ndarray, expected: bytes, divisors: int = 1) -> None:
    assert codecs.encoded_size(fmt, layout, x.shape, divisors) == len(expected)
    got = codecs.decode(fmt, layout, x.shape, expected, divisors=divisors)
    np.testing.assert_array_equal(got, x)
    assert codecs.encode(fmt, layout, x, divisors=divisors) == expected
    assert codecs.check(fmt, layout, x.shape, expected, divisors) == []


# --- row_split_k128_v1 (§1) ------------------------------------------------------------------------

def test_q4_two_rows_nibble_order_and_padding():
    # K = 3 → Kp = 128: 64 low-plane bytes per row, 2 groups per row (group 1 wholly padding, s = +0).
    # row 0: amax 3.5 → s = 0.5 (FP16 0x3800), codes 7, -2, 1 → byte 0 = 0x7 | 0xE << 4, byte 1 = 0x01
    # row 1: amax 7 → s = 1.0 (0x3C00), codes 0, 0, -7 → byte 1 low nibble = -7 & 0xF = 0x9
    x = np.array([[3.5, -1.0, 0.5], [0.0, 0.0, -7.0]], dtype=np.float32)
    low = hexbytes("e701", zeros(62), "0009", zeros(62))
    scale = hexbytes("00380000", "003c0000")
    roundtrip("q4_g64_fp16", RS, x, low + zeros(256 - 128) + scale)


def test_q4_decodes_code_minus_8():
    # -8 (0x8) is a valid q4 code even though absmax never writes it.
    data = bytearray(codecs.encoded_size("q4_g64_fp16", RS, [1, 2]))
    data[0] = 0x78  # element 0 = 8 → -8, element 1 = 7
    data[256:258] = bytes.fromhex("0038")  # s = 0.5
    np.testing.assert_array_equal(codecs.decode("q4_g64_fp16", RS, [1, 2], bytes(data)), [[-4.0, 3.5]])


def test_q5_high_plane_bit_order():
    # amax 3.75 → s = 0.25 (0x3400); codes 15, -2, 1 = 01111, 11110, 00001
    # low nibbles F, E, 1 → bytes EF 01; bit 4 of each → high byte 0 = 0b010 (element 1 at bit 1)
    x = np.array([[3.75, -0.5, 0.25]], dtype=np.float32)
    low = hexbytes("ef01", zeros(62))
    high = hexbytes("02", zeros(15))
    scale = hexbytes("00340000")
    roundtrip("q5_g64_fp16", RS, x, low + zeros(256 - 64) + high + zeros(256 - 16) + scale)


def test_q6_high_plane_two_bits():
    # amax 3.875 → s = 0.125 (0x3000); codes -31, 1, 16 = 100001, 000001, 010000
    # low nibbles 1, 1, 0 → bytes 11 00; high 2-bit fields 10, 00, 01 at bits 0-1, 2-3, 4-5 → 0x12
    x = np.array([[-3.875, 0.125, 2.0]], dtype=np.float32)
    low = hexbytes("1100", zeros(62))
    high = hexbytes("12", zeros(31))
    scale = hexbytes("00300000")
    roundtrip("q6_g64_fp16", RS, x, low + zeros(256 - 64) + high + zeros(256 - 32) + scale)


def test_q8_bytes_and_four_groups():
    # amax 31.75 → s = 0.25; codes 127, -1, 4; Kp/32 = 4 groups per row
    x = np.array([[31.75, -0.25, 1.0]], dtype=np.float32)
    low = hexbytes("7fff04", zeros(125))
    scale = hexbytes("0034", "0000", "0000", "0000")
    roundtrip("q8_g32_fp16", RS, x, low + zeros(256 - 128) + scale)


def test_q2_offset_codes_signed_multiplier_and_padding_code():
    # row 0: m = 2 → s = 1 (0x3C00); values 2, -1, 0, 1 → u 3, 0, 1, 2 → 3 | 0<<2 | 1<<4 | 2<<6 = 0x93
    # row 1: m = -2 → s = -1 (0xBC00); x/s = 2, -1, 0, 0 → u 3, 0, 1, 1 → 0x53
    # padding columns hold u = 1 in every field: 0x55
    x = np.array([[2.0, -1.0, 0.0, 1.0], [-2.0, 1.0, 0.0, 0.0]], dtype=np.float32)
    low = hexbytes("93", b"\x55" * 31, "53", b"\x55" * 31)
    scale = hexbytes("003c0000", "00bc0000")
    roundtrip("q2_g64_fp16", RS, x, low + zeros(256 - 64) + scale)


def test_t2_two_complement_fields():
    # amax 1.5 → s = 1.5 (0x3E00); codes 1, -1, 0, 1 → fields 01, 11, 00, 01 → 0x01 | 0x0C | 0x40 = 0x4D
    x = np.array([[1.5, -1.5, 0.0, 1.5]], dtype=np.float32)
    low = hexbytes("4d", zeros(31))
    scale = hexbytes("003e")
    roundtrip("t2_g128_fp16", RS, x, low + zeros(256 - 32) + scale)


def test_t2_invalid_field_decodes_arithmetically_and_is_reported():
    data = bytearray(codecs.encoded_size("t2_g128_fp16", RS, [1, 1]))
    data[0] = 0b10
    data[256:258] = bytes.fromhex("003c")
    np.testing.assert_array_equal(codecs.decode("t2_g128_fp16", RS, [1, 1], bytes(data)), [[-2.0]])
    assert [f.rule for f in codecs.check("t2_g128_fp16", RS, [1, 1], bytes(data))] == ["invalid_code"]


# --- row_scale_v1 (§2) -------------------------------------------------------------------------------

def test_fp8_row_codes_and_bf16_scales():
    # row 0: amax 224 → scale 224/448 = 0.5 (BF16 0x3F00); codes 448 = 0 1111 110 = 0x7E,
    #        -1 = 1 0111 000 = 0xB8, 0.5 = 0 0110 000 = 0x30
    # row 1: all zeros → scale +0, codes 0
    x = np.array([[224.0, -0.5, 0.25], [0.0, 0.0, 0.0]], dtype=np.float32)
    codes = hexbytes("7eb830", "000000")
    scales = hexbytes("003f", "0000")
    roundtrip("fp8_e4m3fn_row_bf16", "row_scale_v1", x, codes + zeros(256 - 6) + scales)


def test_fp8_subnormal_code():
    # code 0x01 = smallest subnormal 2**-9; scale 2.0 (BF16 0x4000)
    data = hexbytes("01", zeros(255), "0040")
    np.testing.assert_array_equal(codecs.decode("fp8_e4m3fn_row_bf16", "row_scale_v1", [1, 1], data), [[2.0**-8]])


# --- block_scale_k16_m128x4_v1 (§3) --------------------------------------------------------------------

def _nvfp4_example() -> tuple[np.ndarray, bytes]:
    # [128, 64]: C = 1 tile per tile-row. amax 6 → divisor 2688 / 6 = 448 (FP32 0x43E00000).
    # (0, 0) = 6 and (0, 1) = -3: block (0, 0) amax 6 → scale 6·448/6 = 448 = E4M3 0x7E;
    #     codes 6·448/448 = 6 → 0b0111, -3 → 0b1101 → code byte 0 = 0xD7
    # (33, 20) = 1.5: block (33, 1) amax 1.5 → scale 112 = 0 1101 110 = 0x6E; code 6 → 0x7 in the low
    #     nibble of byte 33·32 + 10 = 1066
    # (127, 63) = -0.75: block (127, 3) → scale 56 = 0 1100 110 = 0x66; code -6 = 0xF in the high nibble
    #     of byte 127·32 + 31 = 4095
    # scale bytes: (r, c) → (r % 32)·16 + ((r % 128) // 32)·4 + c % 4: (0,0) → 0, (33,1) → 21, (127,3) → 511
    x = np.zeros((128, 64), dtype=np.float32)
    x[0, 0], x[0, 1], x[33, 20], x[127, 63] = 6.0, -3.0, 1.5, -0.75
    codes = bytearray(4096)
    codes[0], codes[1066], codes[4095] = 0xD7, 0x07, 0xF0
    scales = bytearray(512)
    scales[0], scales[21], scales[511] = 0x7E, 0x6E, 0x66
    return x, bytes(codes) + bytes(scales) + hexbytes("0000e043")


def test_nvfp4_swizzle_nibbles_and_divisor():
    x, expected = _nvfp4_example()
    roundtrip("nvfp4", "block_scale_k16_m128x4_v1", x, expected)


def test_nvfp4_tile_order_across_tiles():
    # [256, 128]: C = 2. Scale (r=130, c=5) → ((1·2 + 1)·512) + 2·16 + 0·4 + 1 = 1569.
    # (r=5, c=6) → (0·2 + 1)·512 + 5·16 + 0 + 2 = 594.
    n, k = 256, 128
    size = codecs.encoded_size("nvfp4", "block_scale_k16_m128x4_v1", [n, k])
    assert size == n * k // 2 + n * k // 16 + 4
    data = bytearray(size)
    codes_off = 0
    scale_off = n * k // 2
    div_off = scale_off + n * k // 16
    data[codes_off + 130 * 64 + 40] = 0x02  # (130, 80): code 1.0 (low nibble: k = 80 even)
    data[codes_off + 5 * 64 + 48] = 0x30  # (5, 97): code 1.5 (high nibble: k = 97 odd)
    data[scale_off + 1569] = 0x38  # E4M3 1.0
    data[scale_off + 594] = 0x40  # E4M3 2.0
    data[div_off : div_off + 4] = bytes.fromhex("00000040")  # divisor 2.0
    y = codecs.decode("nvfp4", "block_scale_k16_m128x4_v1", [n, k], bytes(data))
    expected = np.zeros((n, k), dtype=np.float32)
    expected[130, 80] = 1.0 * 1.0 / 2.0
    expected[5, 97] = 1.5 * 2.0 / 2.0
    np.testing.assert_array_equal(y, expected)


def test_nvfp4_stacked_divisors():
    # [256, 64] with divisors = 2: rows 0..127 use divisor 0 (4.0), rows 128..255 divisor 1 (0.5).
    n, k = 256, 64
    data = bytearray(codecs.encoded_size("nvfp4", "block_scale_k16_m128x4_v1", [n, k], 2))
    assert len(data) == 8192 + 1024 + 8
    data[0] = 0x04  # (0, 0) code 2.0
    data[128 * 32] = 0x04  # (128, 0) code 2.0
    data[8192 + 0] = 0x38  # scale (0, 0) = 1.0
    data[8192 + 512] = 0x38  # scale (128, 0): tile-row 1 starts at 512
    data[9216:9224] = bytes.fromhex("00008040" "0000003f")
    y = codecs.decode("nvfp4", "block_scale_k16_m128x4_v1", [n, k], bytes(data), divisors=2)
    assert y[0, 0] == 0.5 and y[128, 0] == 4.0
    assert np.count_nonzero(y) == 2


# --- contiguous_le_v1 (§4) ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "fmt, shape, values, hexdata",
    [
        ("bf16", [2, 2], [1.0, -2.0, 0.5, 3.0], "803f00c0003f4040"),
        ("fp32", [3], [1.0, -2.0, 0.5], "0000803f000000c00000003f"),
        ("fp32", [], [1.5], "0000c03f"),
        ("int32", [2], [1, -2], "01000000feffffff"),
        ("bf16", [1, 1, 2], [-0.0, 65536.0], "00808047"),
    ],
)
def test_contiguous_words(fmt, shape, values, hexdata):
    x = np.array(values, dtype=np.float32).reshape(shape)
    roundtrip(fmt, "contiguous_le_v1", x, bytes.fromhex(hexdata))


# --- ggml_blocks_v1 (§5) -----------------------------------------------------------------------------

def test_gguf_q8_0_block_stream():
    # one Q8_0 block: d = 0.5 (FP16 0x3800) first, then int8 codes 0..31
    block = hexbytes("0038", bytes(range(32)))
    y = codecs.decode("gguf_q8_0", "ggml_blocks_v1", [1, 32], block)
    np.testing.assert_array_equal(y, np.arange(32, dtype=np.float32)[None] * 0.5)


def test_gguf_q4_0_nibble_halves():
    # Q4_0: element j < 16 is the low nibble of qs[j] minus 8, element j + 16 the high nibble
    block = hexbytes("003c", "9a", b"\x88" * 15)
    y = codecs.decode("gguf_q4_0", "ggml_blocks_v1", [1, 32], block)
    expected = np.zeros(32, dtype=np.float32)
    expected[0], expected[16] = 2.0, 1.0
    np.testing.assert_array_equal(y[0], expected)


# --- the spec's formulas, element by element, on objects that span several row blocks -------------------

SPEC_BITS = {  # format: (b, L, H, G, offset codes)
    "q2_g64_fp16": (2, 2, 0, 64, True), "q4_g64_fp16": (4, 4, 0, 64, False), "q5_g64_fp16": (5, 4, 1, 64, False),
    "q6_g64_fp16": (6, 4, 2, 64, False), "q8_g32_fp16": (8, 8, 0, 32, False), "t2_g128_fp16": (2, 2, 0, 128, False),
}


def spec_decode_row_split(fmt: str, n: int, k: int, data: bytes) -> np.ndarray:
    """storage-layouts §1 read literally: byte floor(k*L/8), bit (k*L) mod 8, planes 256-aligned in order."""
    b, lo_bits, hi_bits, g, offset = SPEC_BITS[fmt]
    kp = -(-k // 128) * 128
    buf = np.frombuffer(data, np.uint8)
    low_size = n * kp * lo_bits // 8
    pos = -(-low_size // 256) * 256
    high = None
    if hi_bits:
        high = buf[pos : pos + n * kp * hi_bits // 8].reshape(n, -1)
        pos = -(-(pos + n * kp * hi_bits // 8) // 256) * 256
    scale = np.frombuffer(data[pos : pos + n * kp // g * 2], "<f2").astype(np.float32).reshape(n, -1)
    low = buf[:low_size].reshape(n, -1)
    col = np.arange(k)
    pattern = (low[:, col * lo_bits // 8].astype(np.int64) >> ((col * lo_bits) % 8)) & ((1 << lo_bits) - 1)
    if hi_bits:
        pattern |= ((high[:, col * hi_bits // 8].astype(np.int64) >> ((col * hi_bits) % 8)) & ((1 << hi_bits) - 1)) << lo_bits
    value = pattern - 1 if offset else np.where(pattern >= 1 << (b - 1), pattern - (1 << b), pattern)
    return (value * scale[:, col // g]).astype(np.float32)


@pytest.mark.parametrize("fmt", sorted(SPEC_BITS))
def test_row_split_against_spec_formula_on_many_row_blocks(fmt):
    n, k = 1500, 700  # 1500 · 768 padded elements: several decode and encode blocks, on the thread pool
    x = np.random.default_rng(9).standard_normal((n, k)).astype(np.float32)
    data = codecs.encode(fmt, RS, x, encoder="absmax")
    np.testing.assert_array_equal(codecs.decode(fmt, RS, [n, k], data), spec_decode_row_split(fmt, n, k, data))


def test_nvfp4_against_spec_formula():
    n, k, d = 384, 192, 3
    x = np.random.default_rng(10).standard_normal((n, k)).astype(np.float32) * np.repeat([1, 50, 0.01], 128)[:, None]
    data = codecs.encode("nvfp4", "block_scale_k16_m128x4_v1", x, divisors=d)
    buf = np.frombuffer(data, np.uint8)
    r, c = np.meshgrid(np.arange(n), np.arange(k), indexing="ij")
    nib = (buf[r * k // 2 + c // 2] >> (4 * (c % 2))) & 0xF
    mag = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)[nib & 7] * np.where(nib & 8, -1, 1)
    blk = c // 16
    tiles = k // 64
    sbyte = ((r // 128) * tiles + blk // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + blk % 4
    e4m3 = buf[n * k // 2 + sbyte]
    exp, man = (e4m3 >> 3) & 0xF, (e4m3 & 7).astype(np.float32)
    scale = np.where(exp == 0, man * 2.0**-9, (1 + man / 8) * 2.0 ** (exp.astype(np.float32) - 7)).astype(np.float32)
    divs = np.frombuffer(data[n * k // 2 + n * k // 16 :], "<f4")
    expected = (mag * scale).astype(np.float32) / divs[r // (n // d)]
    np.testing.assert_array_equal(codecs.decode("nvfp4", "block_scale_k16_m128x4_v1", [n, k], data, divisors=d),
                                  expected)
