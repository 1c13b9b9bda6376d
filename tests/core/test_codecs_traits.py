"""Codec traits: every registered format answers what the converters ask about it, the answers agree with
the codec's own geometry, and docs/format/codec-traits.md is the registry's table."""

from __future__ import annotations

import pytest

from converters import ROOT
from ninfer_core import codecs
from ninfer_core.codecs.ggml_types import BY_NAME
from ninfer_core.codecs.traits import DOC_PATH, render_doc
from ninfer_core.errors import EncodingError


def test_nvfp4_declares_member_divisors_tiles_and_whole_encoding():
    t = codecs.codec_traits("nvfp4")
    assert (t.divisors_per_member, t.row_tile, t.whole_object, t.bits_per_weight) == (True, 128, True, 4.5)
    assert codecs.formats_with(divisors_per_member=True) == ("nvfp4",)
    assert codecs.formats_with(whole_object=True) == ("nvfp4",)


def test_divisors_are_refused_where_the_trait_says_so():
    codecs.validate_combination("nvfp4", "block_scale_k16_m128x4_v1", (256, 64), 2)
    with pytest.raises(EncodingError, match="only allowed for nvfp4, not q4_g64_fp16") as exc:
        codecs.validate_combination("q4_g64_fp16", "row_split_k128_v1", (256, 64), 2)
    assert exc.value.rule == "divisors_not_allowed"


def test_row_tile_is_the_unit_a_row_view_covers():
    for fmt, t in codecs.all_traits().items():
        if t.ggml_passthrough and t.ggml_type not in ("Q8_0", "F32"):
            continue
        shape = (2 * max(t.row_tile, 1) * 64, 256) if fmt != "int32" else (256, 4)
        for name, _offset, size in codecs.row_view(fmt, t.layout, shape, 1, 2):
            assert size > 0, (fmt, name)
            plane = next(p for p in codecs.planes(fmt, t.layout, shape) if p.name == name)
            assert plane.unit_rows in (1, t.row_tile, shape[0]), (fmt, name, plane.unit_rows)


def test_bits_per_weight_matches_the_encoded_size():
    """For a shape with no padding, the encoded size is bits_per_weight per element (plus the per-row and
    per-tensor extras the trait leaves out, and the 256-byte plane alignment)."""
    n, k = 256, 1024
    for fmt, t in codecs.all_traits().items():
        if t.ggml_passthrough and fmt not in ("gguf_q4_k", "gguf_q8_0", "gguf_tq1_0", "gguf_f16"):
            continue
        size = codecs.encoded_size(fmt, t.layout, (n, k), 1)
        extras = {"fp8_e4m3fn_row_bf16": 2 * n, "nvfp4": 4}.get(fmt, 0)
        assert abs(size - extras - n * k * t.bits_per_weight / 8) < 256 * 3, fmt


def test_group_and_passthrough_traits_follow_the_codec():
    assert codecs.codec_traits("q8_g32_fp16").group == 32
    assert codecs.codec_traits("t2_g128_fp16").group == 128
    assert codecs.codec_traits("nvfp4").group is None
    q4k = codecs.codec_traits("gguf_q4_k")
    assert (q4k.ggml_passthrough, q4k.ggml_type, q4k.tolerance_class) == (True, "Q4_K", "passthrough")
    assert codecs.passthrough_format("Q1_0") == "gguf_q1_0"
    assert codecs.passthrough_format("PTQ1_0") is None  # a fork type: transcoded, never passed through
    ints = {f: t.integer_word for f, t in codecs.all_traits().items() if t.integer_word}
    assert ints == {"int32": "<i4", "gguf_i8": "<i1", "gguf_i16": "<i2", "gguf_i32": "<i4", "gguf_i64": "<i8"}


def test_unknown_format_is_a_typed_error():
    with pytest.raises(EncodingError) as exc:
        codecs.codec_traits("q3_g64_fp16")
    assert exc.value.rule == "unknown_format"


def test_the_ggml_table_places_multipliers_inside_the_block():
    for t in BY_NAME.values():
        for offset in t.multipliers:
            assert 0 <= offset <= t.type_size - 2, t.name
        if t.d_non_negative is not None:
            assert t.multipliers, t.name
    assert BY_NAME["PTQ1_0"].multipliers == (26,) and BY_NAME["TQ1_0"].multipliers == (52,)


def test_doc_page_is_the_registry():
    page = (ROOT / DOC_PATH).read_text(encoding="utf-8")
    assert page == render_doc(), (
        f"{DOC_PATH} is out of date; rewrite it with: .venv/bin/python -c \"from ninfer_core.codecs.traits import "
        f"render_doc; open('{DOC_PATH}', 'w').write(render_doc())\"")
