"""Row gathers of kept prequantized tensors (docs/prequantized.md §Row gathers): Qwen3.5's gated ``q_proj`` holds, per
head, ``[query rows | gate rows]``, and Qwen3-Next's ``in_proj_qkvz`` holds, per key head, ``[q | k | v | z]``. With
heads of 64 rows (the fixtures ``*-qwen35``, ``*-qwen3next-h64``, made with the real libraries) every piece is
whole 128-row nvfp4 tiles gathered from runs that cut the source's tiles: the pieces keep the library's codes, the
block scales of their own rows (read back out of the artifact's 128x4 tiles here) and the source divisor. Where a
piece is not whole tiles (``ct-nvfp4-qwen35-h3``: 192 rows) it is requantized, and the plan says why."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.cli import main
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tests.support.prequantized import FIXTURES, components, object_bytes, same_divisor, source_rows


def untiled(tiles: np.ndarray, n: int, k: int) -> np.ndarray:
    """nvfp4's 128x4 block-scale tiles (docs/format/layouts.md §3) back to rows ``[n, k/16]``."""
    c = k // 64
    return tiles.reshape(-1, c, 32, 4, 4).transpose(0, 3, 2, 1, 4).reshape(n, k // 16)


def kept_pieces(art, comp: dict, module: str, objects: list[str]) -> None:
    """Each object in ``objects`` is a bit-exact nvfp4 piece of ``module``: its codes, its block scales (un-tiled)
    and its divisor are the library's, row for row, of the source rows its row selection names."""
    packed = comp.get(f"{module}.weight_packed", comp.get(f"{module}.weight"))
    for oid in objects:
        rec = art.provenance["objects"][oid]
        (pc,) = rec["pieces"]
        o = art.object(oid)
        assert o.format == "nvfp4" and rec["exactness"] == "bit-exact" and pc["method"] == "transcode", oid
        assert rec["max_ulp"] <= 1 and pc["source"] == f"{module}.weight"
        n, k = o.shape
        rows = source_rows(pc["transforms"], packed.shape[0])
        assert len(rows) == n and np.any(rows[1:] - rows[:-1] != 1)  # gathered from several runs
        data = np.frombuffer(object_bytes(art, oid), dtype=np.uint8)
        codes, tiles, divisor = data[:n * k // 2], data[n * k // 2:n * k * 9 // 16], data[n * k * 9 // 16:]
        assert codes.tobytes() == packed[rows].tobytes(), oid
        assert untiled(tiles, n, k).tobytes() == comp[f"{module}.weight_scale"].view(np.uint8)[rows].tobytes(), oid
        same_divisor(comp, module, divisor.view("<f4")[0])


@pytest.mark.parametrize("recipe", ["prequantized", "exact"])
@pytest.mark.parametrize("scheme", ["ct-nvfp4-qwen35", "modelopt-nvfp4-qwen35"])
def test_the_gated_query_and_gate_keep_their_nvfp4_codes_and_inspect_shows_them(tmp_path, capsys, scheme, recipe):
    out = tmp_path / "a.ninfer"
    result = convert(FIXTURES / scheme, out, recipe=recipe, workers=1)
    pieces = [f"text/layers/1/attention/{p}" for p in ("query", "gate")]
    assert not [n for n in result.summary()["notes"] if "attention/" in n]
    with open_artifact(out) as art:
        kept_pieces(art, components(scheme), "model.layers.1.self_attn.q_proj", pieces)
    assert main(["inspect", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    types = {t["name"]: t["type"] for t in doc["tensors"]}
    for oid in pieces:
        assert types[oid] == "nvfp4" and doc["provenance"]["objects"][oid]["exactness"] == "bit-exact"


def test_qwen3_next_grouped_qkvz_pieces_keep_their_nvfp4_codes(tmp_path):
    out = tmp_path / "a.ninfer"
    result = convert(FIXTURES / "ct-nvfp4-qwen3next-h64", out, recipe="prequantized", workers=1)
    assert not [n for n in result.summary()["notes"] if "gdn/" in n and "in_proj_qkvz" in n]
    with open_artifact(out) as art:
        kept_pieces(art, components("ct-nvfp4-qwen3next-h64"), "model.layers.0.linear_attn.in_proj_qkvz",
                    [f"text/layers/0/gdn/{p}" for p in ("query", "key", "value", "z")])


def test_pieces_that_are_not_whole_tiles_are_requantized_with_the_reason(tmp_path):
    out = tmp_path / "a.ninfer"
    notes = convert(FIXTURES / "ct-nvfp4-qwen35-h3", out, recipe="prequantized", workers=1).summary()["notes"]
    for piece in ("query", "gate"):
        oid = f"text/layers/1/attention/{piece}"
        (note,) = [n for n in notes if n.startswith(f"{oid}:")]
        assert "the mapping selects 192 of its 384 rows, not whole nvfp4 128-row scale tiles" in note
        assert note.endswith("requantized into fp8_e4m3fn_row_bf16")
    with open_artifact(out) as art:
        assert {art.provenance["objects"][f"text/layers/1/attention/{p}"]["exactness"]
                for p in ("query", "gate")} == {"requantized"}
    # the nvfp4 recipe stacks query | key | gate | value in one parent: query and gate start off the tiles too
    notes = convert(FIXTURES / "ct-nvfp4-qwen35-h3", tmp_path / "n.ninfer", recipe="nvfp4", workers=1).summary()["notes"]
    assert [n for n in notes if "attention/" in n] == [
        f"text/layers/1/attention/{p}: the mapping selects 192 of its 384 rows, not whole nvfp4 128-row scale tiles: "
        "requantized into nvfp4" for p in ("query", "gate")]
    out = tmp_path / "b.ninfer"
    convert(FIXTURES / "ct-nvfp4-qwen35-h3", out, recipe="exact", workers=1)  # exact: the library's bf16 values
    with open_artifact(out) as art:
        for p in ("query", "gate"):
            oid = f"text/layers/1/attention/{p}"
            assert art.object(oid).format == "bf16" and art.provenance["objects"][oid]["exactness"] == "value-exact"
