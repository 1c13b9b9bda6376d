"""Registry, combination rules (container §6.2), sizes (§12.3), planes and row views (§7.3), buffers."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES

from ninfer_core import codecs
from ninfer_core.errors import EncodingError

RS = "row_split_k128_v1"
NV = "block_scale_k16_m128x4_v1"


# --- container §12.3 sizes --------------------------------------------------------------------------

@pytest.mark.parametrize(
    "fmt, layout, shape, size",
    [
        ("q4_g64_fp16", RS, [7168, 5120], 19_496_960),
        ("q5_g64_fp16", RS, [7168, 5120], 24_084_480),
        ("fp8_e4m3fn_row_bf16", "row_scale_v1", [14336, 5120], 73_428_992),
        ("nvfp4", NV, [14336, 5120], 41_287_684),
    ],
)
def test_spec_sizes(fmt, layout, shape, size):
    assert codecs.encoded_size(fmt, layout, shape) == size


def test_plane_breakdown_of_spec_sizes():
    q5 = codecs.planes("q5_g64_fp16", RS, [7168, 5120])
    assert [(p.name, p.size) for p in q5] == [("low", 18_350_080), ("high", 4_587_520), ("scale", 1_146_880)]
    nv = codecs.planes("nvfp4", NV, [14336, 5120])
    assert [(p.name, p.offset, p.size) for p in nv] == [
        ("codes", 0, 36_700_160), ("block_scales", 36_700_160, 4_587_520), ("divisors", 41_287_680, 4)]


@pytest.mark.parametrize(
    "fmt, shape, expected",
    [
        # K = 100 → Kp = 128; planes after the first start at multiples of 256
        ("q2_g64_fp16", [3, 100], [("low", 0, 96), ("scale", 256, 12)]),
        ("q5_g64_fp16", [3, 100], [("low", 0, 192), ("high", 256, 48), ("scale", 512, 12)]),
        ("q6_g64_fp16", [1, 129], [("low", 0, 128), ("high", 256, 64), ("scale", 512, 8)]),
        ("q8_g32_fp16", [2, 300], [("low", 0, 768), ("scale", 768, 48)]),
        ("t2_g128_fp16", [5, 128], [("low", 0, 160), ("scale", 256, 10)]),
    ],
)
def test_row_split_planes(fmt, shape, expected):
    assert [(p.name, p.offset, p.size) for p in codecs.planes(fmt, RS, shape)] == expected
    last = expected[-1]
    assert codecs.encoded_size(fmt, RS, shape) == last[1] + last[2]


def test_contiguous_and_passthrough_sizes():
    assert codecs.encoded_size("bf16", "contiguous_le_v1", []) == 2
    assert codecs.encoded_size("fp32", "contiguous_le_v1", [2, 3, 4]) == 96
    assert codecs.encoded_size("int32", "contiguous_le_v1", [1] * 16) == 4
    assert codecs.encoded_size("gguf_q4_k", "ggml_blocks_v1", [3, 512]) == 3 * 2 * 144
    assert codecs.encoded_size("gguf_iq4_xs", "ggml_blocks_v1", [2, 256]) == 2 * 136


def test_a_passthrough_format_for_every_gguf_py_type():
    names = {f"gguf_{t.name.lower()}" for t in GGML_QUANT_SIZES}
    assert names <= set(codecs.FORMATS)
    for name in names:
        assert codecs.is_known(name, "ggml_blocks_v1")


def test_registry_and_helpers():
    expected = {"bf16", "fp32", "int32", "q2_g64_fp16", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16",
                "t2_g128_fp16", "nvfp4", "fp8_e4m3fn_row_bf16"}
    assert expected <= set(codecs.FORMATS)
    assert codecs.ENCODERS == ("absmax", "mse")
    assert codecs.element_count([]) == 1 and codecs.element_count([3, 4, 5]) == 60
    assert codecs.element_count([2**40, 2**40]) == 2**80  # Python ints, no wrap
    assert codecs.is_known("q4_g64_fp16", RS) and not codecs.is_known("q4_g64_fp16", "row_scale_v1")
    assert not codecs.is_known("q3_g64_fp16", RS)
    assert codecs.RAW_BYTES_ENCODING in codecs.LAYOUTS


# --- combination rules --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "fmt, layout, shape, divisors, rule",
    [
        ("q3_g64_fp16", RS, [1, 1], 1, "unknown_format"),
        ("q4_g64_fp16", "row_split_k64_v1", [1, 1], 1, "unknown_layout"),
        ("q4_g64_fp16", "contiguous_le_v1", [1, 1], 1, "format_layout_mismatch"),
        ("bf16", RS, [1, 1], 1, "format_layout_mismatch"),
        ("bf16", "raw_bytes_v1", [1], 1, "format_layout_mismatch"),
        ("q4_g64_fp16", RS, [4], 1, "shape_rank"),
        ("q4_g64_fp16", RS, [2, 2, 2], 1, "shape_rank"),
        ("fp8_e4m3fn_row_bf16", "row_scale_v1", [], 1, "shape_rank"),
        ("bf16", "contiguous_le_v1", [1] * 17, 1, "shape_rank"),
        ("q4_g64_fp16", RS, [0, 4], 1, "shape_dims"),
        ("q4_g64_fp16", RS, [2, -4], 1, "shape_dims"),
        ("q4_g64_fp16", RS, [2, 4.0], 1, "shape_dims"),
        ("q4_g64_fp16", RS, [2, True], 1, "shape_dims"),
        ("nvfp4", NV, [100, 64], 1, "nvfp4_shape"),
        ("nvfp4", NV, [128, 48], 1, "nvfp4_shape"),
        ("nvfp4", NV, [128], 1, "nvfp4_shape"),
        ("nvfp4", NV, [384, 64], 5, "nvfp4_divisors"),
        ("nvfp4", NV, [128, 64], 0, "divisors_invalid"),
        ("q4_g64_fp16", RS, [128, 64], 2, "divisors_not_allowed"),
        ("gguf_q4_k", "ggml_blocks_v1", [2, 300], 1, "ggml_block_shape"),
        ("gguf_q4_k", "ggml_blocks_v1", [512], 1, "shape_rank"),
    ],
)
def test_validate_combination_rules(fmt, layout, shape, divisors, rule):
    with pytest.raises(EncodingError) as info:
        codecs.validate_combination(fmt, layout, shape, divisors)
    assert info.value.rule == rule
    with pytest.raises(EncodingError):
        codecs.encoded_size(fmt, layout, shape, divisors)


def test_nvfp4_divisors_need_not_make_tile_multiples():
    # N / divisors must be an integer; it need not be a multiple of 128
    assert codecs.encoded_size("nvfp4", NV, [384, 64], 3) == 384 * 32 + 384 * 4 + 12
    assert codecs.planes("nvfp4", NV, [384, 64], 3)[2].rows(127, 129) == (384 * 32 + 384 * 4, 8)


def test_wrong_length_and_bad_buffers():
    with pytest.raises(EncodingError) as info:
        codecs.decode("q4_g64_fp16", RS, [1, 64], b"\0" * 10)
    assert info.value.rule == "encoded_size_mismatch"
    with pytest.raises(EncodingError) as info:
        codecs.decode("q4_g64_fp16", RS, [1, 64], 12345)
    assert info.value.rule == "not_a_buffer"
    findings = codecs.check("q4_g64_fp16", RS, [1, 64], b"\0" * 10)
    assert [(f.rule, f.severity) for f in findings] == [("encoded_size_mismatch", "ERROR")]
    findings = codecs.check("q9", RS, [1, 64], b"")
    assert [f.rule for f in findings] == ["unknown_format"]


def test_encode_refusals():
    x = np.ones((2, 64), dtype=np.float32)
    with pytest.raises(EncodingError) as info:
        codecs.encode("q4_g64_fp16", RS, x, encoder="gptq")
    assert info.value.rule == "unknown_encoder"
    with pytest.raises(EncodingError) as info:
        codecs.encode("fp8_e4m3fn_row_bf16", "row_scale_v1", x, encoder="mse")
    assert info.value.rule == "encoder_unsupported"
    with pytest.raises(EncodingError) as info:
        codecs.encode("q4_g64_fp16", RS, np.array([["a"] * 64]))
    assert info.value.rule == "input_dtype"
    bad = x.copy()
    bad[1, 7] = np.inf
    for fmt, layout in (("q4_g64_fp16", RS), ("q2_g64_fp16", RS), ("fp8_e4m3fn_row_bf16", "row_scale_v1")):
        with pytest.raises(EncodingError, match=r"\(1, 7\)") as info:
            codecs.encode(fmt, layout, bad)
        assert info.value.rule == "non_finite_input"
    nv = np.zeros((128, 64), dtype=np.float32)
    nv[100, 3] = np.nan
    with pytest.raises(EncodingError, match=r"\(100, 3\)"):
        codecs.encode("nvfp4", NV, nv)
    with pytest.raises(EncodingError) as info:
        codecs.encode("int32", "contiguous_le_v1", np.array([1.5]))
    assert info.value.rule == "not_integer"
    with pytest.raises(EncodingError) as info:
        codecs.encode("int32", "contiguous_le_v1", np.array([2**31]))
    assert info.value.rule == "int32_range"
    with pytest.raises(EncodingError) as info:
        codecs.encode("gguf_q4_k", "ggml_blocks_v1", np.zeros((1, 256), np.float32))
    assert info.value.rule == "encoder_unsupported"


# --- row views (§7.3) ---------------------------------------------------------------------------------

def _sub_object(fmt, layout, shape, data, r0, r1, divisors=1, sub_divisors=1):
    """Assemble an object of rows [r0, r1) from the row view's byte ranges, at the sub-shape's offsets."""
    sub_shape = [r1 - r0, *shape[1:]]
    out = bytearray(codecs.encoded_size(fmt, layout, sub_shape, sub_divisors))
    sub_planes = {p.name: p for p in codecs.planes(fmt, layout, sub_shape, sub_divisors)}
    for name, off, size in codecs.row_view(fmt, layout, shape, r0, r1, divisors):
        assert size == sub_planes[name].size
        out[sub_planes[name].offset : sub_planes[name].offset + size] = data[off : off + size]
    return sub_shape, bytes(out)


@pytest.mark.parametrize(
    "fmt, layout, shape",
    [
        ("q2_g64_fp16", RS, [7, 200]),
        ("q4_g64_fp16", RS, [7, 200]),
        ("q5_g64_fp16", RS, [7, 130]),
        ("q6_g64_fp16", RS, [7, 64]),
        ("q8_g32_fp16", RS, [7, 96]),
        ("t2_g128_fp16", RS, [7, 300]),
        ("fp8_e4m3fn_row_bf16", "row_scale_v1", [7, 33]),
        ("bf16", "contiguous_le_v1", [7, 3, 5]),
        ("fp32", "contiguous_le_v1", [7]),
        ("gguf_q4_0", "ggml_blocks_v1", [7, 64]),
    ],
)
def test_row_view_matches_slicing(fmt, layout, shape):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    data = codecs.encode(fmt, layout, x)
    full = codecs.decode(fmt, layout, shape, data)
    for r0, r1 in [(0, 7), (0, 1), (3, 5), (6, 7), (2, 6)]:
        sub_shape, sub = _sub_object(fmt, layout, shape, data, r0, r1)
        np.testing.assert_array_equal(codecs.decode(fmt, layout, sub_shape, sub), full[r0:r1])
        np.testing.assert_array_equal(codecs.decode(fmt, layout, shape, data, rows=(r0, r1)), full[r0:r1])


def test_nvfp4_row_view_tiles_and_divisors():
    rng = np.random.default_rng(3)
    shape = [512, 128]
    x = rng.standard_normal(shape).astype(np.float32) * np.repeat([1.0, 10.0, 0.1, 3.0], 128)[:, None]
    data = codecs.encode("nvfp4", NV, x, divisors=4)
    full = codecs.decode("nvfp4", NV, shape, data, divisors=4)
    for r0, r1 in [(0, 128), (128, 384), (384, 512), (0, 512)]:
        sub_shape, sub = _sub_object("nvfp4", NV, shape, data, r0, r1, 4, (r1 - r0) // 128)
        np.testing.assert_array_equal(codecs.decode("nvfp4", NV, sub_shape, sub, divisors=(r1 - r0) // 128),
                                      full[r0:r1])
    # an unaligned range is covered by whole tiles and whole divisors
    view = dict((n, (o, s)) for n, o, s in codecs.row_view("nvfp4", NV, shape, 130, 260, 4))
    assert view["codes"] == (130 * 64, 130 * 64)
    assert view["block_scales"] == (512 * 64 + 1 * 1024, 2 * 1024)
    assert view["divisors"] == (512 * 64 + 512 * 8 + 4, 8)
    np.testing.assert_array_equal(codecs.decode("nvfp4", NV, shape, data, divisors=4, rows=(130, 260)), full[130:260])


def test_row_range_errors():
    with pytest.raises(EncodingError) as info:
        codecs.row_view("q4_g64_fp16", RS, [4, 64], 3, 5)
    assert info.value.rule == "row_range"
    with pytest.raises(EncodingError):
        codecs.planes("q4_g64_fp16", RS, [4, 64])[0].rows(2, 1)
    assert codecs.planes("q4_g64_fp16", RS, [4, 64])[1].rows(2, 2) == (256 + 2 * 4, 0)


# --- buffers ----------------------------------------------------------------------------------------------

def test_buffers_of_every_kind_and_memmap(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((130, 256)).astype(np.float32)
    data = codecs.encode("q5_g64_fp16", RS, x)
    ref = codecs.decode("q5_g64_fp16", RS, x.shape, data)
    path = tmp_path / "obj.bin"
    path.write_bytes(b"\xff" * 100 + data)
    mm = np.memmap(path, dtype=np.uint8, mode="r")[100:]
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8), mm):
        np.testing.assert_array_equal(codecs.decode("q5_g64_fp16", RS, x.shape, buf), ref)
    assert codecs.check("q5_g64_fp16", RS, x.shape, mm) == []
    assert np.shares_memory(codecs.base.as_u8(mm), mm)  # read in place, not copied


def test_threads_do_not_change_results():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3000, 700)).astype(np.float32)  # several row blocks
    before = codecs.get_threads()
    try:
        codecs.set_threads(1)
        one = codecs.encode("q6_g64_fp16", RS, x, encoder="mse")
        codecs.set_threads(4)
        four = codecs.encode("q6_g64_fp16", RS, x, encoder="mse")
        assert one == four
        np.testing.assert_array_equal(codecs.decode("q6_g64_fp16", RS, x.shape, four),
                                      codecs.decode("q6_g64_fp16", RS, x.shape, one))
    finally:
        codecs.set_threads(before)


def test_errors_from_worker_blocks_propagate_first_in_row_order():
    x = np.zeros((3000, 1024), dtype=np.float32)  # three row blocks
    x[2500, 3] = np.nan
    x[1500, 9] = np.inf
    with pytest.raises(EncodingError, match=r"\(1500, 9\)"):
        codecs.encode("q4_g64_fp16", RS, x)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork start method only")
def test_worker_pool_in_a_forked_child():
    import multiprocessing

    x = np.random.default_rng(0).standard_normal((3000, 700)).astype(np.float32)
    data = codecs.encode("q4_g64_fp16", RS, x)  # the parent's pool is running
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_encode_in_child, args=(x, queue))
    child.start()
    assert queue.get(timeout=60) == data
    child.join(timeout=60)


def _encode_in_child(x, queue):
    queue.put(codecs.encode("q4_g64_fp16", RS, x))
