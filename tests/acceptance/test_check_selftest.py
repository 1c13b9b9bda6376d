"""``convert check``: CHECK 1 geometry, CHECK 2 round trip + decode equality + the offset probe, CHECK 3
producer smoke (docs/ternary.md §5) on tiny GGUFs; read-only; the seed's lesson that bytes_equal and decode_equal
both pass on a wrong offset while the multiplier probe does not."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType as Q
from gguf.quants import quantize

from converters.acceptance.check import DISASSEMBLERS, plausibility, run_check
from converters.cli import main
from converters.pipeline.convert import convert
from converters.sources import open_source
from ninfer_core import codecs
from tests.support.gates import CFG3, CFG35, rewrite
from tinymodels import qwen3, qwen35


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    d = tmp_path_factory.mktemp("ggufs")
    paths = {"q35": d / "q35.Q8_0.gguf", "q3": d / "q3.Q8_0.gguf", "q41": d / "q35.Q4_1.gguf"}
    qwen35.write_gguf(paths["q35"], CFG35, matrix_type="Q8_0")
    qwen3.write_gguf(paths["q3"], CFG3, matrix_type="Q8_0")
    qwen35.write_gguf(paths["q41"], CFG35, matrix_type="Q4_1")
    return paths


def shifted(path, tensor: str, by: int):
    """The source with one tensor read ``by`` bytes past its declared offset (a reader's offset bug)."""
    src = open_source(path)
    t = src.tensors[tensor]
    src.tensors[tensor] = dataclasses.replace(t, file_offset=t.file_offset + by)
    return src


@pytest.mark.parametrize("model, recipe", [("q35", "groupwise-int"), ("q35", "exact"), ("q3", "groupwise-int"),
                                           ("q41", "exact")])
def test_clean_sources_pass_all_three_checks(ggufs, model, recipe):
    before = sorted(p.name for p in ggufs[model].parent.iterdir())
    r = run_check(ggufs[model], recipe=recipe)
    assert r["result"] == "OK" and r["check1"]["ok"] and r["check2"]["ok"] and r["check3"]["ok"]
    assert sorted(p.name for p in ggufs[model].parent.iterdir()) == before  # read-only
    samples = r["check2"]["samples"]
    roles = {s["role"] for s in samples}
    assert {"embedding", "norm", "mlp.down", "attention.query"} <= roles  # one tensor per role
    for s in samples:
        assert s["decode_equal"] is True and s["bytes_equal"] is True, s
        assert s["probe"] is None or s["probe"]["plausible"], s
    for g in r["check1"]["groups"]:  # exact transcodes hold the source's bytes: no padding
        if g["method"] == "transcode":
            assert g["pad"] == 0, g
    c3 = r["check3"]
    assert c3["produced"] == len(c3["objects"]) and all(o["status"] == "OK" for o in c3["objects"])
    assert all(o["produced"] == o["bytes"] for o in c3["objects"])


def test_geometry_groups_count_every_piece(ggufs):
    r = run_check(ggufs["q35"], recipe="exact")
    q8 = [g for g in r["check1"]["groups"] if g["source_type"] == "Q8_0"]
    assert all(g["format"] == "q8_g32_fp16" and g["groups_per_row"] == g["k"] // 32 for g in q8)
    emb = next(g for g in q8 if g["n"] == CFG35["vocab_size"])
    assert emb["tensors"] == 2 and emb["source_bytes"] == 2 * 512 * 128 // 32 * 34 == emb["payload_bytes"]


def test_a_wrong_offset_passes_the_round_trip_but_not_the_probe(ggufs):
    """Seed 003 §5: wrong bytes in, the same wrong bytes out — only the content probe can tell."""
    r = run_check(ggufs["q41"], recipe="exact", source=shifted(ggufs["q41"], "token_embd.weight", 2))
    assert r["result"] == "FAILED"
    s = next(s for s in r["check2"]["samples"] if s["tensor"] == "token_embd.weight")
    assert s["bytes_equal"] is True and s["decode_equal"] is True
    assert s["probe"]["plausible"] is False and s["problems"] == ["IMPLAUSIBLE -- offset bug?"]
    assert s["probe"]["negative"] > 0  # Q4_1's d is never negative


def test_a_wrong_offset_in_a_q8_source_is_implausible_and_refused(ggufs):
    r = run_check(ggufs["q35"], source=shifted(ggufs["q35"], "token_embd.weight", 2))
    s = next(s for s in r["check2"]["samples"] if s["tensor"] == "token_embd.weight")
    assert "IMPLAUSIBLE -- offset bug?" in s["problems"]
    assert any(p.startswith("transcode refused") for p in s["problems"])
    failed = [o for o in r["check3"]["objects"] if o["status"].startswith("FAILED")]
    assert [o["object"] for o in failed] == ["text/token_embedding"]


def test_template_objects_to_borrow_are_listed_not_produced(ggufs, tmp_path):
    base = tmp_path / "base.ninfer"
    convert(ggufs["q35"], base, recipe="groupwise-int", workers=2)
    tpl = rewrite(base, tmp_path / "tpl.ninfer", extra={"vision/patch_embed": np.ones((4, 8))})
    r = run_check(ggufs["q35"], template=tpl)
    assert r["result"] == "OK" and r["recipe"] == "groupwise-int"  # the template's weights_id
    borrowed = [o for o in r["check3"]["objects"] if o["status"] == "borrowed"]
    assert [o["object"] for o in borrowed] == ["vision/patch_embed"] and r["check3"]["borrowed"] == {"vision": 1}


def test_cli_prints_result_and_exits_by_it(ggufs, tmp_path, capsys):
    assert main(["check", "--gguf", str(ggufs["q35"])]) == 0
    out = capsys.readouterr().out
    assert "CHECK 1" in out and "CHECK 2" in out and "CHECK 3" in out and "RESULT: OK" in out
    bad = tmp_path / "nan.gguf"
    data = bytearray(ggufs["q35"].read_bytes())
    with open_source(ggufs["q35"]) as s:
        at = s.tensors["token_embd.weight"].file_offset
    data[at:at + 2] = np.float16(np.nan).tobytes()  # one multiplier of the first block
    bad.write_bytes(bytes(data))
    assert main(["check", "--gguf", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "IMPLAUSIBLE -- offset bug?" in out and "RESULT: FAILED" in out
    assert main(["check", "--gguf", str(ggufs["q35"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == "OK"


# --- the probe and the disassemblers alone --------------------------------------------------------------


def test_probe_accepts_real_multipliers_and_rejects_misaligned_reads(rng=np.random.default_rng(3)):
    w = (rng.standard_normal((64, 256)) * 0.02).astype(np.float32)
    blocks = np.frombuffer(quantize(w, Q.Q8_0).tobytes(), np.uint8).reshape(-1, 34)
    assert plausibility(blocks, "Q8_0")["plausible"]
    misread = np.roll(blocks.reshape(-1), -2)[: blocks.size].reshape(-1, 34)
    p = plausibility(misread, "Q8_0")
    assert not p["plausible"] and (p["negative"] or p["nonfinite"] or p["hi_distinct"] > 64)
    q40 = np.frombuffer(quantize(w, Q.Q4_0).tobytes(), np.uint8).reshape(-1, 18)
    assert plausibility(q40, "Q4_0")["plausible"]  # Q4_0 stores d = max / -8: signed, allowed
    assert plausibility(blocks, "F32") is None


@pytest.mark.parametrize("kind, fmt, block, size", [("Q8_0", "q8_g32_fp16", 32, 34), ("PQ2_0", "q2_g64_fp16", 128, 34),
                                                    ("Q2_0_G64", "q2_g64_fp16", 64, 18)])
def test_disassemblers_invert_the_transcoders(kind, fmt, block, size, rng=np.random.default_rng(4)):
    n, k = 6, 256
    raw = rng.integers(0, 256, size=(n, k // block, size), dtype=np.uint8)
    raw[:, :, :2] = np.frombuffer(np.abs(rng.standard_normal(n * k // block) * 0.01).astype(np.float16).tobytes(),
                                  np.uint8).reshape(n, k // block, 2)
    if kind == "Q8_0":
        raw[:, :, 2:][raw[:, :, 2:] == 0x80] = 0x7F  # -128 is not a q8 code
    data = codecs.transcode_ggml(kind, raw.reshape(-1), (n, k), fmt)
    back = DISASSEMBLERS[(kind, fmt)](data, (n, k), size)
    assert np.array_equal(np.asarray(back).reshape(-1), raw.reshape(-1))
