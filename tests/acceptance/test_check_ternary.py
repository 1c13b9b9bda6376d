"""``convert check --gguf`` on Ternary Bonsai sources (docs/ternary.md §5): CHECK 1 geometry of ternary transcodes
(the padding of trits and bits widened to t2 explained, not failed), CHECK 2 codes-and-multipliers round trip
into t2 and the format-aware multiplier probe — PTQ1_0 keeps ``d`` last, so a shifted read and the seed
packer's hard-coded ``34 / slice(0, 2)`` reading are IMPLAUSIBLE while the right reading is PLAUSIBLE —
and ``RESULT: OK`` on every type and on the rotated variant."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest

from converters.acceptance import check
from converters.acceptance.check import (
    multiplier_words,
    plausibility,
    probe_words,
    run_check,
    ternary_padding,
)
from converters.cli import main
from converters.cli.check import print_check
from converters.cli.output import console
from converters.sources import open_source
from converters.sources.rows import TensorRows
from ninfer_core import codecs
from tinymodels import bonsai

CFG = bonsai.config(linear_value_head_dim=128)
CFG_ROT = bonsai.rotated_config(intermediate_size=1024)
TYPES = ("PTQ1_0", "PQ2_0", "Q2_0_LEGACY", "Q1_0", "TQ1_0", "TQ2_0")
#: GGML type name the converter resolves each generator type to, and the padding class of its t2 transcode
RESOLVED = {"PTQ1_0": "PTQ1_0", "PQ2_0": "PQ2_0", "Q2_0_LEGACY": "Q2_0_G128", "Q1_0": "Q1_0", "TQ1_0": "TQ1_0",
            "TQ2_0": "TQ2_0"}
NO_PAD = ("PQ2_0", "Q2_0_G128")


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bonsai-check")
    paths = {t: bonsai.write_gguf(d / f"{t}.gguf", CFG, ternary_type=t) for t in TYPES}
    paths["rotated"] = bonsai.write_gguf(d / "rotated.gguf", CFG_ROT, rotated=True)
    return paths


def printed_row(r: dict, tensor: str, monkeypatch, capsys) -> tuple[str, str]:
    """(CHECK 2 table line of ``tensor``, whole output) as ``convert check`` prints ``r`` (wide: no wrapping)."""
    monkeypatch.setattr(console, "width", 400)
    print_check(r)
    out = capsys.readouterr().out
    return next(line for line in out.splitlines() if f" {tensor} " in line and "│" in line), out


def shifted(path, tensor: str, by: int):
    """The source with one tensor read ``by`` bytes past its declared offset (a reader's offset bug)."""
    src = open_source(path)
    t = src.tensors[tensor]
    src.tensors[tensor] = dataclasses.replace(t, file_offset=t.file_offset + by)
    return src


@pytest.mark.parametrize("name", [*TYPES, "rotated"])
def test_every_ternary_source_checks_ok(ggufs, name, capsys):
    before = sorted(p.name for p in ggufs[name].parent.iterdir())
    assert main(["check", "--gguf", str(ggufs[name]), "--recipe", "ternary"]) == 0
    out = capsys.readouterr().out
    assert "RESULT: OK" in out and "IMPLAUSIBLE" not in out
    assert sorted(p.name for p in ggufs[name].parent.iterdir()) == before  # read-only
    kind = RESOLVED.get(name, "PTQ1_0")
    r = run_check(ggufs[name], recipe="ternary")
    ternary = [s for s in r["check2"]["samples"] if s["type"] == kind]
    assert ternary and all(s["target"] == "t2_g128_fp16" for s in ternary)
    for s in ternary:  # the t2 path: codes and multipliers read back from the planes equal the source's
        assert s["codes_equal"] is True and s["decode_equal"] is True and s["probe"]["plausible"], s
    roles = {s["role"] for s in ternary}
    assert {"embedding", "mlp.down", "attention.query"} <= roles


@pytest.mark.parametrize("name", TYPES)
def test_geometry_of_ternary_transcodes_explains_its_padding(ggufs, name):
    kind = RESOLVED[name]
    r = run_check(ggufs[name], recipe="ternary")
    assert r["check1"]["ok"]
    groups = [g for g in r["check1"]["groups"] if g["source_type"] == kind]
    assert groups and all(g["format"] == "t2_g128_fp16" and g["method"] == "transcode" for g in groups)
    block, size = {"PTQ1_0": (128, 28), "PQ2_0": (128, 34), "Q2_0_G128": (128, 34), "Q1_0": (128, 18),
                   "TQ1_0": (256, 54), "TQ2_0": (256, 66)}[kind]  # qwen-gguf-conventions.md, by hand
    for g in groups:
        n, k, pieces = g["n"], g["k"], g["tensors"]
        assert g["source_bytes"] == pieces * n * k // block * size
        assert g["payload_bytes"] == pieces * n * k // 128 * 34  # t2: 32 code bytes + FP16 per 128 (k % 512 == 0)
        assert g["blocks_per_row"] == k // block and g["groups_per_row"] == k // 128
        assert sum(g["explained"].values()) == g["pad"]
        if kind in NO_PAD:
            assert g["pad"] == 0 and g["note"] == ""
        else:  # trits and bits widen to 2 bits; TQ2_0 keeps one 256-block d per 128-group
            assert g["pad"] > 0 and g["note"].startswith("expected: ")
            assert (g["explained"]["codes"] > 0) == (kind != "TQ2_0")
            assert (g["explained"]["multipliers"] > 0) == (block == 256)


def test_a_codec_size_the_layout_does_not_give_fails_check_1(ggufs, monkeypatch):
    real = codecs.encoded_size

    def two_bytes_more(fmt, layout, shape, *a, **kw):
        return real(fmt, layout, shape, *a, **kw) + (2 if fmt == "t2_g128_fp16" else 0)

    monkeypatch.setattr(codecs, "encoded_size", two_bytes_more)
    r = run_check(ggufs["PTQ1_0"], recipe="ternary")
    assert not r["check1"]["ok"] and r["result"] == "FAILED"
    bad = [g for g in r["check1"]["groups"] if g["note"].startswith("MISMATCH: storage-layouts §1 gives")]
    assert bad and all(g["source_type"] == "PTQ1_0" and g["payload_bytes"] == g["layout_payload"] + 2 * g["tensors"]
                       for g in bad)


def test_padding_arithmetic_against_worked_numbers():
    """Per 128 elements, t2 holds 32 code bytes + 2 multiplier bytes (storage-layouts §1 / §6)."""
    assert ternary_padding("PTQ1_0", 1, 1024, "t2_g128_fp16") == \
        {"codes": 8 * (32 - 26), "multipliers": 0, "alignment": 0, "payload": 256 + 16}
    assert ternary_padding("TQ1_0", 4, 256, "t2_g128_fp16") == \
        {"codes": 4 * (64 - 52), "multipliers": 4 * 2, "alignment": 0, "payload": 256 + 16}
    assert ternary_padding("Q2_0_G64", 4, 512, "t2_g128_fp16")["multipliers"] == -4 * 4 * 2  # 8 d → 4 groups
    assert ternary_padding("PQ2_0", 4, 512, "q2_g64_fp16") == \
        {"codes": 0, "multipliers": 4 * 4 * 2, "alignment": 0, "payload": 512 + 64}
    for t, n, k, fmt in (("PTQ1_0", 3, 384, "t2_g128_fp16"), ("Q1_0", 5, 128, "t2_g128_fp16"),
                         ("TQ2_0", 7, 768, "t2_g128_fp16"), ("PQ2_0", 3, 256, "q2_g64_fp16")):
        pad = ternary_padding(t, n, k, fmt)
        assert pad["payload"] == codecs.encoded_size(fmt, codecs.FORMATS[fmt].layout, (n, k))
        assert 0 < pad["alignment"] < 256  # the scale plane starts at the next multiple of 256


def test_ptq1_0_read_at_a_shifted_offset_is_implausible(ggufs, capsys, monkeypatch):
    """Seed 003 §5: the probe of ``d`` (bytes 26..27 of each 28-byte PTQ1_0 block) tells a shifted read from
    the right one. (Here the t2 transcoder also refuses the misread blocks — some of the code bytes read as
    ``d`` are non-finite FP16 — but the probe does not depend on that: see the hard-coded reading below.)"""
    tensor = "blk.0.ffn_down.weight"
    ok = run_check(ggufs["PTQ1_0"], recipe="ternary")
    row, out = printed_row(ok, tensor, monkeypatch, capsys)
    assert "PTQ1_0" in row and "PLAUSIBLE (nonfinite 0, negative 0" in row and "IMPLAUSIBLE" not in row
    assert "RESULT: OK" in out

    for by in (2, 14, 27):
        bad = run_check(ggufs["PTQ1_0"], recipe="ternary", source=shifted(ggufs["PTQ1_0"], tensor, by))
        row, out = printed_row(bad, tensor, monkeypatch, capsys)
        assert "IMPLAUSIBLE -- offset bug?" in row and "FAILED" in row
        assert f"{tensor}: IMPLAUSIBLE -- offset bug?" in out and "RESULT: FAILED" in out
        s = next(s for s in bad["check2"]["samples"] if s["tensor"] == tensor)
        p = s["probe"]
        assert p["blocks"] == CFG["hidden_size"] * CFG["intermediate_size"] // 128
        assert p["negative"] > 0 and p["hi_distinct"] > 64, p  # uniform 16-bit samples, not a cluster


def test_hard_coded_34_byte_reading_of_ptq1_0_is_caught(ggufs):
    """The seed's released packer probed every source as 34-byte blocks with ``d`` at ``slice(0, 2)``: right
    for PQ2_0, wrong for PTQ1_0 (28-byte blocks, ``d`` last). On a real file the reshape itself fails (the
    seed's ValueError); a reading trimmed to fit is IMPLAUSIBLE, the format-aware one PLAUSIBLE."""
    with open_source(ggufs["PTQ1_0"]) as src:
        raw = np.ascontiguousarray(TensorRows(src, "blk.0.ffn_down.weight").raw(slice(0, None))).reshape(-1)
    assert raw.size == CFG["hidden_size"] * CFG["intermediate_size"] // 128 * 28
    with pytest.raises(ValueError, match="cannot reshape"):
        raw.reshape(-1, 34)
    hard_coded = probe_words(multiplier_words(raw[: raw.size // 34 * 34].reshape(-1, 34), slice(0, 2)))
    assert not hard_coded["plausible"]
    assert plausibility(raw.reshape(-1, 28), "PTQ1_0")["plausible"]
    with open_source(ggufs["PQ2_0"]) as src:
        pq2 = np.ascontiguousarray(TensorRows(src, "blk.0.ffn_down.weight").raw(slice(0, None))).reshape(-1, 34)
    assert probe_words(multiplier_words(pq2, slice(0, 2)))["plausible"]  # where the hard-coded reading is right
    assert plausibility(pq2, "PQ2_0")["plausible"]


def test_a_transcode_that_changes_codes_fails_check_2(ggufs, monkeypatch):
    """The t2 path compares codes and multipliers with the source blocks: a transcoder (as CHECK 2 calls it)
    that changes four codes of row 0 is reported, though every byte count still matches."""

    def four_codes_changed(kind, raw, shape, fmt, **kw):
        data = bytearray(codecs.transcode_ggml(kind, raw, shape, fmt, **kw))
        if fmt == "t2_g128_fp16":
            data[5] = 0x55 if data[5] != 0x55 else 0x00  # codes of elements 20..23
        return bytes(data)

    patched = types.SimpleNamespace(**{k: getattr(codecs, k) for k in dir(codecs) if not k.startswith("__")})
    patched.transcode_ggml = four_codes_changed
    monkeypatch.setattr(check, "codecs", patched)  # the source's own decoder keeps the real transcoder
    r = run_check(ggufs["PTQ1_0"], recipe="ternary")
    assert r["result"] == "FAILED" and not r["check2"]["ok"]
    s = next(s for s in r["check2"]["samples"] if s["tensor"] == "token_embd.weight")
    assert s["codes_equal"] is False and s["codes_differ"] == ["codes"] and s["decode_equal"] is False
    assert "codes differ from the source blocks' after the transcode" in s["problems"]
