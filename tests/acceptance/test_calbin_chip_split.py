"""Multi-chip calbin packages: per-chip past_key/past_value op inputs carry kv_heads / chips heads and a
context dimension of the declared past or the full context; read against that split they pass, with the
reading reported, and a difference no split explains stays XREF_GRAPH_INPUTS (docs/calbin.md §6)."""

from __future__ import annotations

import pytest

from converters.acceptance.calbin import validate_calbin
from tinymodels.calbin import write_calbin_package

DECLARED = "[1, 2, 63, 16]"  # the tiny package's decode past shape: 2 KV heads, context 64, head_dim 16, 2 chips


def with_decode_past(tmp_path, shape: str):
    fx = write_calbin_package(tmp_path)
    ops = next(fx.submodel_dir("decode").glob("*_op_io_buf_ptr.yaml"))
    text = ops.read_text()
    assert DECLARED in text
    ops.write_text(text.replace(DECLARED, shape))
    return validate_calbin(fx.root)


@pytest.mark.parametrize(("shape", "reading"), [("[1, 1, 64, 16]", "full context"),
                                                ("[1, 1, 63, 16]", "declared past length")])
def test_per_chip_kv_inputs_pass(tmp_path, shape, reading):
    report = with_decode_past(tmp_path, shape)
    assert not report.by_code("XREF_GRAPH_INPUTS")
    info = report.by_code("XREF_GRAPH_INPUTS_CHIP_SPLIT")
    assert len(info) == 1 and info[0].severity == "INFO" and reading in info[0].evidence
    assert info[0].detail["chips"] == 2


def test_prefill_per_chip_kv_inputs_hold_the_full_context(tmp_path):
    """Prefill declares past 0 (``[1, 2, 0, 16]``) while each chip's buffer holds the whole context,
    ``max_seq_len`` (64): the full context, not past + 1."""
    fx = write_calbin_package(tmp_path)
    ops = next(fx.submodel_dir("prefill").glob("*_op_io_buf_ptr.yaml"))
    text = ops.read_text()
    assert "[1, 2, 0, 16]" in text
    ops.write_text(text.replace("[1, 2, 0, 16]", "[1, 1, 64, 16]"))
    report = validate_calbin(fx.root)
    assert not report.by_code("XREF_GRAPH_INPUTS")
    info = report.by_code("XREF_GRAPH_INPUTS_CHIP_SPLIT")
    assert len(info) == 1 and "full context" in info[0].evidence


@pytest.mark.parametrize("shape", ["[1, 1, 64, 8]",    # head_dim differs
                                   "[1, 2, 64, 16]",   # heads not divided by the chips
                                   "[1, 1, 65, 16]"])  # context neither past nor max_seq_len
def test_unexplained_shapes_stay_errors(tmp_path, shape):
    report = with_decode_past(tmp_path, shape)
    errors = report.by_code("XREF_GRAPH_INPUTS")
    assert errors and all(f.severity == "ERROR" for f in errors)
    assert not report.by_code("XREF_GRAPH_INPUTS_CHIP_SPLIT")
