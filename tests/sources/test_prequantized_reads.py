"""How the prequantized source layer reads what planning needs (docs/io-speed.md §Prequantized bench): small
components by ``pread`` instead of a memory map, a scale tensor scanned once for its byte range, the ulp bound
from that range where it is 0 (the distinct scales only otherwise), and where the source holds a kept code
plane byte for byte. Every answer is compared with one computed here from ``model.safetensors`` directly or by
the slower path it replaces."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from converters.errors import SourceError
from converters.sources import open_hf_dir
from converters.sources.prequantized import numeric, targets
from tests.support.prequantized import FIXTURES, components, schemes

NVFP4 = [s for s in schemes() if "nvfp4" in s]


def nvfp4_weights(src):
    return [qw for qw in src.quantized_weights.values() if qw.family == "nvfp4" and "nvfp4" in qw.exact_targets()]


@pytest.mark.parametrize("scheme", NVFP4)
def test_scale_range_and_ulp_bound_equal_the_histogram_path(scheme, monkeypatch):
    """The (min, max) of each block-scale tensor is that of the bytes in the file; max_ulp equals the bound over
    the distinct scales (the histogram the planner read before), which is read only where the bound over the
    whole byte range is not 0."""
    raw = components(scheme)
    histogram = targets.distinct_scales
    read = []
    monkeypatch.setattr(targets, "distinct_scales", lambda qw: read.append(qw.name) or histogram(qw))
    with open_hf_dir(FIXTURES / scheme) as src:
        weights = nvfp4_weights(src)
        assert weights
        for qw in weights:
            scales = raw[qw.parts[qw.SCALES].name].view(np.uint8)
            assert targets.scale_byte_range(qw) == (int(scales.min()), int(scales.max()))
            bound = qw.max_ulp("nvfp4")
            span = targets.scale_byte_range(qw)
            wide = targets._nvfp4_ulp(qw, np.arange(span[0], span[1] + 1, dtype=np.uint8))
            assert (qw.name in read) == (wide != 0)
            assert bound == targets._nvfp4_ulp(qw, histogram(qw).view(np.uint8))


def test_a_range_bound_above_0_reads_the_distinct_scales(monkeypatch):
    """modelopt-nvfp4-moe has experts whose library rule is 1 bf16 ulp from v3's for some scale: there the
    distinct scales decide, and the bound is the same as before."""
    read = []
    histogram = targets.distinct_scales
    monkeypatch.setattr(targets, "distinct_scales", lambda qw: read.append(qw.name) or histogram(qw))
    with open_hf_dir(FIXTURES / "modelopt-nvfp4-moe") as src:
        bounds = {qw.name: qw.max_ulp("nvfp4") for qw in nvfp4_weights(src)}
    assert read and set(bounds.values()) == {0, 1}
    assert all(bounds[name] in (0, 1) for name in read)


def test_a_nan_or_negative_block_scale_is_seen_by_the_range(tmp_path):
    """Every byte from 0x7F up is a NaN or a negative E4M3 scale: one such byte takes nvfp4 off the exact targets."""
    with open_hf_dir(FIXTURES / "ct-nvfp4") as src:
        qw = nvfp4_weights(src)[0]
        t = qw.parts[qw.SCALES]
    for byte in (0x7F, 0x80, 0xFF):
        d = tmp_path / f"b{byte:x}"
        shutil.copytree(FIXTURES / "ct-nvfp4", d)
        f = d / t.file.name
        data = bytearray(f.read_bytes())
        data[t.file_offset + 5] = byte
        f.write_bytes(bytes(data))
        with open_hf_dir(d) as src:
            got = src.quantized(qw.name)
            assert targets.scale_byte_range(got)[1] == byte
            assert "nvfp4" not in got.exact_targets()


@pytest.mark.parametrize("scheme", ["ct-nvfp4", "modelopt-nvfp4", "modelopt-nvfp4-moe-fused"])
def test_code_span_is_the_code_rows_in_the_file(scheme):
    """code_span names bytes of the file equal to the transcoded object's code plane, for a row range inside."""
    with open_hf_dir(FIXTURES / scheme) as src:
        weights = nvfp4_weights(src)
        assert weights
        for qw in weights:
            n = qw.shape[0]
            r0, r1 = (128, n) if n > 128 else (0, n)
            path, offset, length = qw.code_span("nvfp4", r0, r1)
            with open(path, "rb") as f:
                f.seek(offset)
                held = f.read(length)
            assert bytes(qw.transcode("nvfp4", r0, r1)[:length]) == held
            assert qw.code_span("fp32", r0, r1) is None


@pytest.mark.parametrize("scheme", ["ct-w4a16-g128", "ct-fp8-channel", "modelopt-fp8"])
def test_no_code_span_for_other_kinds(scheme):
    """INT4 codes are repacked into q4/q5/q8 words; FP8 codes are read for their NaN check anyway (no copy
    offered); and ``codes=False`` makes the whole object for them."""
    with open_hf_dir(FIXTURES / scheme) as src:
        for qw in src.quantized_weights.values():
            n = qw.shape[0]
            for fmt in qw.exact_targets():
                assert qw.code_span(fmt, 0, n) is None
                assert bytes(qw.transcode(fmt, 0, n, codes=False)) == bytes(qw.transcode(fmt, 0, n))


def test_transcode_without_codes_fills_the_other_planes():
    from ninfer_core import codecs

    with open_hf_dir(FIXTURES / "ct-nvfp4") as src:
        qw = nvfp4_weights(src)[0]
        n = qw.shape[0]
        whole = qw.transcode("nvfp4", 0, n)
        rest = qw.transcode("nvfp4", 0, n, codes=False)
        first = codecs.planes("nvfp4", codecs.FORMATS["nvfp4"].layout, qw.shape)[0]
        assert first.name == "codes" and first.offset == 0
        assert bytes(rest[first.size:]) == bytes(whole[first.size:])


def test_small_reads_and_scans_match_the_file_and_report_a_short_file(tmp_path):
    raw = components("ct-nvfp4")
    with open_hf_dir(FIXTURES / "ct-nvfp4") as src:
        qw = nvfp4_weights(src)[0]
        g, scales = qw.parts["weight_global_scale"], qw.parts[qw.SCALES]
    assert numeric.component_rows(g, 0, 1).tobytes() == raw[g.name].tobytes()  # pread, not a map
    assert b"".join(bytes(x) for x in numeric.component_bytes(scales, size=1000)) == raw[scales.name].tobytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(scales.file.read_bytes()[:scales.file_offset + 10])
    short = dataclasses.replace(scales, file=cut)
    for read in (lambda: numeric.component_rows(short, 0, 1), lambda: list(numeric.component_bytes(short))):
        with pytest.raises(SourceError) as exc:
            read()
        assert exc.value.rule == "read_tensor" and scales.name in str(exc.value)
    gone = dataclasses.replace(g, file=tmp_path / "missing.safetensors")
    with pytest.raises(SourceError) as exc:
        numeric.component_rows(gone, 0, 1)
    assert exc.value.rule == "read_tensor"
