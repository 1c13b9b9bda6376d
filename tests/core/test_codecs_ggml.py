"""GGML block types: passthrough decoding, fork-type readers on hand-built blocks, exact transcoders.

References: gguf-py's ``gguf.quants.dequantize`` for every type it decodes; for the fork types gguf-py
lacks (Q1_0, Q2_0, PQ2_0, PTQ1_0), blocks built by hand from qwen-gguf-conventions.md with their values
worked out in the test.
"""

from __future__ import annotations

import gguf
import gguf.quants
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from ninfer_core import codecs
from ninfer_core.codecs import ggml_blocks
from ninfer_core.errors import EncodingError

RS = "row_split_k128_v1"
GGUF_PY_DECODES = [t for t in GGML_QUANT_SIZES if t in gguf.quants._type_traits
                   or t in (GGMLQuantizationType.F32, GGMLQuantizationType.F16)]


def random_blocks(qt: GGMLQuantizationType, n_rows: int, n_blocks: int, rng) -> np.ndarray:
    """Random block bytes whose FP16/BF16/FP32 words are finite (NaN payloads would compare unequal)."""
    b, t = GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, (n_rows, n_blocks * t), dtype=np.uint8)
    if qt in (GGMLQuantizationType.F32,):
        raw = rng.standard_normal((n_rows, n_blocks)).astype(np.float32).view(np.uint8)
    elif qt in (GGMLQuantizationType.F16, GGMLQuantizationType.BF16):
        raw.view(np.uint8).reshape(-1, 2)[:, 1] &= 0x3F  # exponent well below all-ones
    else:
        raw.reshape(-1, t)[:, 1::2] &= 0x3F  # every little-endian FP16 word at an even offset stays finite
    return raw


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # gguf-py overflows on some random MXFP4 exponents
@pytest.mark.parametrize("qt", GGUF_PY_DECODES, ids=lambda t: t.name)
def test_passthrough_decode_matches_gguf_py(qt):
    rng = np.random.default_rng(int(qt))
    b, t = GGML_QUANT_SIZES[qt]
    n_blocks = max(1, 512 // b)
    raw = random_blocks(qt, 3, n_blocks, rng)
    fmt = f"gguf_{qt.name.lower()}"
    shape = [3, n_blocks * b]
    got = codecs.decode(fmt, "ggml_blocks_v1", shape, raw.tobytes())
    np.testing.assert_array_equal(got, gguf.quants.dequantize(raw, qt))
    # the passthrough transcode is a byte copy
    assert codecs.transcode_ggml(qt.name, raw, shape, fmt) == raw.tobytes()
    assert codecs.exact_targets(int(qt))[fmt] == "bit_exact"


def test_passthrough_encode_uses_gguf_py_quantizer():
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    data = codecs.encode("gguf_q4_0", "ggml_blocks_v1", x)
    assert data == gguf.quants.quantize(x, GGMLQuantizationType.Q4_0).tobytes()


def test_plain_types_decoded_here():
    vals = np.array([[-3, 7, 100, -128]], dtype=np.int8)
    np.testing.assert_array_equal(codecs.decode("gguf_i8", "ggml_blocks_v1", [1, 4], vals.tobytes()), vals)
    w = np.array([[1.5, -2.25]], dtype="<f8")
    np.testing.assert_array_equal(codecs.decode("gguf_f64", "ggml_blocks_v1", [1, 2], w.tobytes()), w)
    # Q8_K: float32 d, int8 qs[256], int16 bsums[16]
    block = np.float32(0.25).tobytes() + np.arange(-128, 128, dtype=np.int8).tobytes() + bytes(32)
    got = codecs.decode("gguf_q8_k", "ggml_blocks_v1", [1, 256], block)
    np.testing.assert_array_equal(got[0], np.arange(-128, 128) * 0.25)


# --- fork readers on hand-built blocks ------------------------------------------------------------------

def test_q1_0_block_by_hand():
    # d = 0.5 (0x3800) first; element j = bit j%8 of qs[j/8]: qs[0] = 0b00000101 → elements 0, 2 are +d
    # qs[15] = 0x80 → element 127 is +d; everything else -d
    block = bytes.fromhex("0038") + bytes([0b101]) + bytes(14) + bytes([0x80])
    expected = np.full(128, -0.5, dtype=np.float32)
    expected[[0, 2, 127]] = 0.5
    np.testing.assert_array_equal(ggml_blocks.DEQUANTIZERS["Q1_0"](np.frombuffer(block, np.uint8)[None]), [expected])
    np.testing.assert_array_equal(codecs.decode("gguf_q1_0", "ggml_blocks_v1", [1, 128], block), [expected])
    t2 = codecs.transcode_ggml(41, block, [1, 128], "t2_g128_fp16")
    np.testing.assert_array_equal(codecs.decode("t2_g128_fp16", RS, [1, 128], t2), [expected])
    # t2 bytes: +1 = 01, -1 = 11 → elements 0..3 = +,-,+,- → 0b11_01_11_01 = 0xDD; multiplier 0.5
    assert t2[0] == 0xDD and t2[1] == 0xFF and t2[31] == 0x7F and t2[256:258] == bytes.fromhex("0038")


def test_q1_0_negative_multiplier_folds_into_codes():
    block = bytes.fromhex("00b8") + bytes([0xFF] * 16)  # d = -0.5, all bits 1 → every element -0.5
    t2 = codecs.transcode_ggml("Q1_0", block, [1, 128], "t2_g128_fp16")
    assert t2[256:258] == bytes.fromhex("0038")  # |d|
    assert t2[:32] == b"\xff" * 32  # every code -1
    np.testing.assert_array_equal(codecs.decode("t2_g128_fp16", RS, [1, 128], t2), np.full((1, 128), -0.5))


def _q2_block(d_hex: str, first: int, n: int = 128) -> bytes:
    # d first, then qs: element j at bits 2(j%4) of byte j/4; q = 1 (value 0) everywhere but qs[0]
    return bytes.fromhex(d_hex) + bytes([first]) + b"\x55" * (n // 4 - 1)


def test_q2_0_legacy_block_by_hand():
    # d = 2.0 (0x4000); qs[0] = 0b11_10_01_00 → q = 0, 1, 2, 3 → values -2, 0, 2, 4
    block = _q2_block("0040", 0xE4)
    expected = np.zeros(128, dtype=np.float32)
    expected[:4] = [-2, 0, 2, 4]
    for name in ("Q2_0_G128", "PQ2_0"):
        np.testing.assert_array_equal(ggml_blocks.DEQUANTIZERS[name](np.frombuffer(block, np.uint8)[None]), [expected])
    for ggml_type in ("Q2_0", 42, "Q2_0_G128", 142, "PQ2_0"):
        q2 = codecs.transcode_ggml(ggml_type, block, [1, 128], "q2_g64_fp16")
        assert q2[:32] == block[2:]  # codes copied bit for bit
        assert q2[256:260] == bytes.fromhex("00400040")  # d for both 64-groups
        np.testing.assert_array_equal(codecs.decode("q2_g64_fp16", RS, [1, 128], q2), [expected])
    assert codecs.exact_targets(142) == {"q2_g64_fp16": "bit_exact", "t2_g128_fp16": "value_exact"}


def test_q2_0_code_3_is_not_ternary():
    # row 1's first block has q = 3 at element 3 (qs[0] = 0b11_00_00_00)
    blocks = _q2_block("0040", 0x24) + _q2_block("003c", 0x55) + _q2_block("003c", 0xC0) + _q2_block("003c", 0x55)
    with pytest.raises(EncodingError, match=r"'blk\.3\.ffn_up\.weight': block 2 \(row 1, elements 0\.\.127\)") as info:
        codecs.transcode_ggml("PQ2_0", blocks, [2, 256], "t2_g128_fp16", tensor="blk.3.ffn_up.weight")
    assert info.value.rule == "unrepresentable_block" and info.value.json_path == "blk.3.ffn_up.weight"


def test_q2_0_legacy_to_t2():
    # qs[0] = 0x24 → q = 0, 1, 2, 0 → values -2, 0, 2, -2 → t2 fields 11, 00, 01, 11 = 0xD3
    block = _q2_block("0040", 0x24)
    t2 = codecs.transcode_ggml(42, block, [1, 128], "t2_g128_fp16")
    assert t2[0] == 0xD3 and t2[1:32] == bytes(31) and t2[256:258] == bytes.fromhex("0040")
    # a negative d folds into the codes: values 2, 0, -2, 2
    t2n = codecs.transcode_ggml(42, _q2_block("00c0", 0x24), [1, 128], "t2_g128_fp16")
    assert t2n[0] == 0b01_11_00_01 and t2n[256:258] == bytes.fromhex("0040")


def test_q2_0_official_g64_pairs():
    # 64/18 blocks: a t2 group takes two; equal |d| or one all-zero block is representable
    a = _q2_block("0040", 0x24, 64)  # d = 2
    b = _q2_block("00c0", 0x06, 64)  # d = -2, q = 2, 1, 0, 0 → values -2, 0, 2, 2
    zero = _q2_block("0044", 0x55, 64)  # d = 4 but every code is 0
    c = _q2_block("0044", 0x24, 64)  # d = 4, non-zero
    shape = [1, 256]
    data = a + b + zero + a
    t2 = codecs.transcode_ggml(42, data, shape, "t2_g128_fp16")  # 4 × 18 bytes → resolved as Q2_0_G64
    ref = ggml_blocks.DEQUANTIZERS["Q2_0_G64"](np.frombuffer(data, np.uint8).reshape(4, 18)).reshape(1, 256)
    np.testing.assert_array_equal(codecs.decode("t2_g128_fp16", RS, shape, t2), ref)
    assert t2[256:260] == bytes.fromhex("00400040")  # group 1 takes |d| of its non-zero block
    q2 = codecs.transcode_ggml("Q2_0_G64", data, shape, "q2_g64_fp16")
    np.testing.assert_array_equal(codecs.decode("q2_g64_fp16", RS, shape, q2), ref)
    with pytest.raises(EncodingError, match="block 1 ") as info:
        codecs.transcode_ggml(42, a + c, [1, 128], "t2_g128_fp16", tensor="w")
    assert info.value.rule == "unrepresentable_block"
    # K = 64: the second half of the only t2 group and q2 group 1 are padding
    t2 = codecs.transcode_ggml(42, a, [1, 64], "t2_g128_fp16")
    assert codecs.check("t2_g128_fp16", RS, [1, 64], t2) == []
    q2 = codecs.transcode_ggml(42, a, [1, 64], "q2_g64_fp16")
    assert q2[16:32] == b"\x55" * 16 and codecs.check("q2_g64_fp16", RS, [1, 64], q2) == []


def test_ptq1_0_block_by_hand():
    # trits (2,0,1,0,0): Q = 2·81 + 9 = 171 → byte ceil(171·256/243) = 181; all-ones trits: 128 (5 trits),
    # 127 (4 trits, qh). qh trits (0,2,1,1): Q = 54 + 9 + 3 = 66 → 70. d = 1.0 (0x3C00) last.
    qs = bytearray([128] * 24)
    qs[0] = 181  # elements 16n + 0: trits 2,0,1,0,0
    qs[17] = 181  # elements 80 + 8n + 1
    qh = bytearray([127, 70])  # qh[1]: elements 120 + 2n + 1: trits 0,2,1,1
    block = bytes(qs + qh) + bytes.fromhex("003c")
    expected = np.zeros(128, dtype=np.float32)
    expected[[0, 81, 123]] = 1.0
    expected[[16, 48, 64, 89, 105, 113, 121]] = -1.0
    got = ggml_blocks.DEQUANTIZERS["PTQ1_0"](np.frombuffer(block, np.uint8)[None])
    np.testing.assert_array_equal(got, [expected])
    t2 = codecs.transcode_ggml(143, block, [1, 128], "t2_g128_fp16")
    np.testing.assert_array_equal(codecs.decode("t2_g128_fp16", RS, [1, 128], t2), [expected])
    assert t2[0] == 0b01  # element 0 = +1, elements 1..3 = 0


def test_trit_formula_against_gguf_py_tq1_0():
    rng = np.random.default_rng(5)
    raw = random_blocks(GGMLQuantizationType.TQ1_0, 4, 3, rng)
    ref = gguf.quants.dequantize(raw, GGMLQuantizationType.TQ1_0)
    mine = ggml_blocks.DEQUANTIZERS["TQ1_0"](raw.reshape(-1, 54)).reshape(4, -1)
    np.testing.assert_array_equal(mine, ref)


# --- transcoders against gguf-py ------------------------------------------------------------------------

def _without_code_3(raw: np.ndarray, qs: slice, t: int) -> np.ndarray:
    """Turn every 2-bit field equal to 3 (0b11) in the qs bytes of every block into 2 (0b10)."""
    blocks = raw.reshape(-1, t)
    q = blocks[:, qs]
    both = q & (q >> 1) & 0x55  # low bit of each field that is 0b11
    blocks[:, qs] = q & ~both
    fields = np.stack([(blocks[:, qs] >> s) & 3 for s in (0, 2, 4, 6)])
    assert not (fields == 3).any() and (fields == 2).any()
    return raw


@pytest.mark.parametrize(
    "src, target",
    [("Q8_0", "q8_g32_fp16"), ("TQ2_0", "t2_g128_fp16"), ("TQ1_0", "t2_g128_fp16"), ("BF16", "bf16"),
     ("F32", "fp32"), ("F16", "fp32")],
)
def test_transcode_value_exact_against_gguf_py(src, target):
    qt = GGMLQuantizationType[src]
    rng = np.random.default_rng(int(qt))
    b, t = GGML_QUANT_SIZES[qt]
    n_blocks = max(1, 768 // b)
    raw = random_blocks(qt, 5, n_blocks, rng)
    if src == "Q8_0":
        raw.reshape(-1, t)[:, 2:][raw.reshape(-1, t)[:, 2:] == 0x80] = 0x81  # -128 is invalid in q8
    if src == "TQ2_0":
        raw = _without_code_3(raw, slice(0, 64), t)
    shape = [5, n_blocks * b]
    out = codecs.transcode_ggml(src, raw, shape, target, tensor="t")
    layout = codecs.FORMATS[target].layout
    np.testing.assert_array_equal(codecs.decode(target, layout, shape, out), gguf.quants.dequantize(raw, qt))
    assert codecs.check(target, layout, shape, out) == []


def test_q8_0_transcode_is_bit_exact_and_a_fixed_point():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 320)).astype(np.float32)
    raw = gguf.quants.quantize(x, GGMLQuantizationType.Q8_0)
    out = codecs.transcode_ggml(8, raw, [3, 320], "q8_g32_fp16")
    blocks = raw.reshape(3, 10, 34)
    low, scale = codecs.planes("q8_g32_fp16", RS, [3, 320])
    codes = np.frombuffer(out, np.uint8)[: low.size].reshape(3, 384)
    np.testing.assert_array_equal(codes[:, :320], blocks[:, :, 2:].reshape(3, 320))
    assert not codes[:, 320:].any()
    words = np.frombuffer(out[scale.offset : scale.offset + scale.size], "<u2").reshape(3, 12)
    np.testing.assert_array_equal(words[:, :10], blocks[:, :, :2].copy().view("<u2")[..., 0])
    assert not words[:, 10:].any()
    # ggml writes a ±127 code in every non-zero block, so absmax re-derives the same multipliers
    assert codecs.encode("q8_g32_fp16", RS, codecs.decode("q8_g32_fp16", RS, [3, 320], out)) == out


def test_ternary_transcodes_are_fixed_points_of_the_encoder():
    x = np.random.default_rng(4).standard_normal((2, 512)).astype(np.float32)
    for qt in (GGMLQuantizationType.TQ1_0, GGMLQuantizationType.TQ2_0):
        raw = gguf.quants.quantize(x, qt)
        out = codecs.transcode_ggml(qt.name, raw, [2, 512], "t2_g128_fp16")
        assert codecs.encode("t2_g128_fp16", RS, codecs.decode("t2_g128_fp16", RS, [2, 512], out)) == out


def test_transcode_errors_name_tensor_and_block():
    raw = np.zeros((2, 2, 34), dtype=np.uint8)
    raw[..., 0:2] = np.frombuffer(np.float16(1.0).tobytes(), np.uint8)
    raw[1, 1, 2 + 5] = 0x80
    with pytest.raises(EncodingError, match=r"'blk\.0\.attn_v\.weight': block 3 \(row 1, elements 32\.\.63\)") as info:
        codecs.transcode_ggml("Q8_0", raw, [2, 64], "q8_g32_fp16", tensor="blk.0.attn_v.weight")
    assert info.value.rule == "invalid_code"
    raw[1, 1, 2 + 5] = 0
    raw[0, 1, 0:2] = [0x00, 0x7C]  # d = +inf
    with pytest.raises(EncodingError, match="block 1 ") as info:
        codecs.transcode_ggml("Q8_0", raw, [2, 64], "q8_g32_fp16", tensor="w")
    assert info.value.rule == "non_finite_multiplier"
    tq2 = np.zeros((1, 66), dtype=np.uint8)
    tq2[0, 10] = 0b11 << 4
    with pytest.raises(EncodingError, match="code 3") as info:
        codecs.transcode_ggml("TQ2_0", tq2, [1, 256], "t2_g128_fp16", tensor="w")
    assert info.value.rule == "unrepresentable_block"


@pytest.mark.parametrize(
    "args, rule",
    [
        (("Q8_0", b"\0" * 33, [1, 32], "q8_g32_fp16"), "ggml_type_size"),
        ((42, b"\0" * 40, [1, 128], "q2_g64_fp16"), "ggml_type_size"),
        (("Q9_9", b"\0" * 34, [1, 32], "q8_g32_fp16"), "unknown_ggml_type"),
        ((999, b"\0" * 34, [1, 32], "q8_g32_fp16"), "unknown_ggml_type"),
        (("Q4_K", b"\0" * 144, [1, 256], "q4_g64_fp16"), "no_exact_transcode"),
        (("Q8_0", b"\0" * 34, [32], "q8_g32_fp16"), "shape_rank"),
        (("Q8_0", b"\0" * 34, [2, 16], "q8_g32_fp16"), "ggml_block_shape"),
        (("Q8_0", b"\0" * 34, [1, 32], "nope"), "no_exact_transcode"),
    ],
)
def test_transcode_refusals(args, rule):
    with pytest.raises(EncodingError) as info:
        codecs.transcode_ggml(*args, tensor="x")
    assert info.value.rule == rule


def test_type_id_table():
    from ninfer_core.codecs import ggml_types

    assert [t.name for t in ggml_types.candidates(42)] == ["Q2_0_G128", "Q2_0_G64"]
    assert ggml_types.resolve(42, 256, 2 * 34).name == "Q2_0_G128"
    assert ggml_types.resolve(42, 256, 4 * 18).name == "Q2_0_G64"
    assert ggml_types.resolve("q2_0", 128, 36).name == "Q2_0_G64"
    assert (ggml_types.BY_NAME["PQ2_0"].type_id, ggml_types.BY_NAME["PTQ1_0"].type_size) == (142, 28)
    assert ggml_types.resolve(41, 128, 18).name == "Q1_0"
    assert codecs.transcode_ggml("BF16", np.arange(6, dtype="<u2").tobytes(), [6], "bf16") == np.arange(
        6, dtype="<u2").tobytes()


def test_q8_0_transcode_inline_runs_in_the_calling_thread(monkeypatch):
    """``inline=True`` (the converter's workers, docs/io-speed.md §Write path) gives the pool's bytes and never
    hands rows to the row-block pool; its refusals name the same block."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 4096)).astype(np.float32)  # 1.2 M elements: several row blocks on the pool
    raw = gguf.quants.quantize(x, GGMLQuantizationType.Q8_0)
    pooled = codecs.transcode_ggml("Q8_0", raw, [300, 4096], "q8_g32_fp16")

    def no_pool():
        raise AssertionError("an inline transcode used the row-block pool")

    monkeypatch.setattr("ninfer_core.codecs.base._get_pool", no_pool)
    assert codecs.transcode_ggml("Q8_0", raw, [300, 4096], "q8_g32_fp16", inline=True) == pooled
    bad = raw.reshape(300, 128, 34).copy()
    bad[250, 7, 2 + 31] = 0x80
    with pytest.raises(EncodingError, match=r"block 32007 \(row 250, elements 224\.\.255\)") as info:
        codecs.transcode_ggml("Q8_0", bad, [300, 4096], "q8_g32_fp16", tensor="w", inline=True)
    assert info.value.rule == "invalid_code"
    bad[250, 7, 2 + 31] = 0
    bad[299, 127, 0:2] = [0x01, 0x7C]  # d = NaN
    with pytest.raises(EncodingError, match=r"block 38399 ") as info:
        codecs.transcode_ggml("Q8_0", bad, [300, 4096], "q8_g32_fp16", tensor="w", inline=True)
    assert info.value.rule == "non_finite_multiplier"
