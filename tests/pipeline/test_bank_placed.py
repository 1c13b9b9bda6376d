"""Expert banks placed in one pass (docs/io-speed.md §Write path): the plane parts of every row block go to
their offsets as they are made; the bytes equal the plane-major stream's, memory stays one row block,
and a whole conversion writes the same files either way."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import pytest

from converters.mapping.recipes import load_recipe
from converters.model.engine import open_model
from converters.pipeline import expert_bank, produce
from converters.pipeline.convert import convert
from converters.pipeline.plan import make_plan
from converters.pipeline.produce import Producer
from ninfer_core.container.object_data import Placed
from tinymodels import qwen3_moe

AID = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    cfg = qwen3_moe.config(num_hidden_layers=1, hidden_size=256, head_dim=64, moe_intermediate_size=512,
                           num_experts=16)
    return qwen3_moe.write_gguf(tmp_path_factory.mktemp("moe") / "big.gguf", cfg, matrix_type="Q8_0")


@pytest.mark.parametrize("recipe, oid", [("exact", "text/layers/0/moe/experts/down"),
                                         ("groupwise-int", "text/layers/0/moe/experts/up")])
def test_placed_bank_equals_the_plane_major_stream(gguf, monkeypatch, recipe, oid):
    monkeypatch.setattr(produce, "CHUNK_BYTES", 64 * 1024)
    with open_model(gguf) as model:
        plan = make_plan(model.bound, load_recipe(recipe), model.sources)
        bank = plan.object(oid)
        producer = Producer(model.sources)
        want = producer.produce(bank)
        got = np.zeros(bank.bytes, dtype=np.uint8)
        times = np.zeros(bank.bytes, dtype=np.uint8)
        tracemalloc.start()
        peak_chunk = 0
        for chunk in producer.stream(bank, placed=True):
            assert isinstance(chunk, Placed)
            part = np.asarray(chunk.data).reshape(-1).view(np.uint8)
            got[chunk.offset:chunk.offset + part.size] = part
            times[chunk.offset:chunk.offset + part.size] += 1
            peak_chunk = max(peak_chunk, part.size)
            del chunk, part
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert (times == 1).all()  # every byte placed exactly once
    assert got.tobytes() == want
    expert_matrix = 4 * bank.shape[0] // 16 * bank.shape[1]
    assert peak - got.nbytes - times.nbytes < expert_matrix, (peak, expert_matrix)


def test_conversion_writes_the_same_files(tmp_path, gguf, monkeypatch):
    def run(name: str, placed: bool) -> dict[str, bytes]:
        with monkeypatch.context() as m:
            if not placed:
                m.setattr(produce, "place_bank",
                          lambda blocks, obj, stats: expert_bank.stream_bank(blocks, obj, stats, produce.ErrorStats))
            m.setattr(expert_bank, "TAIL_BUDGET", 0)  # the plane-major stream takes a pass per plane
            out = tmp_path / name
            out.mkdir()
            convert(gguf, out / "m.ninfer", recipe="exact", artifact_id=AID, workers=2, max_file_bytes=2_000_000)
        return {n: (out / n).read_bytes() for n in sorted(os.listdir(out))}

    placed, streamed = run("placed", True), run("streamed", False)
    assert len(placed) > 1 and placed == streamed


@pytest.mark.parametrize("recipe", ["exact", "groupwise-int", "nvfp4"])
def test_banks_written_in_shares_write_the_same_files(tmp_path, gguf, monkeypatch, recipe):
    """A bank cut into shares of experts, written at once by several workers (docs/io-speed.md §Write path),
    gives the files of the bank written by one worker."""
    from converters.pipeline import convert as conversion

    calls = []
    shares = conversion.bank_shares

    def counted(obj, parts):
        calls.append(len(got := shares(obj, parts)))
        return got

    def run(name: str, share_bytes: int) -> dict[str, bytes]:
        with monkeypatch.context() as m:
            m.setattr(conversion, "SHARE_BYTES", share_bytes)
            m.setattr(conversion, "bank_shares", counted)
            out = tmp_path / name
            out.mkdir()
            convert(gguf, out / "m.ninfer", recipe=recipe, artifact_id=AID, workers=3, max_file_bytes=2_000_000)
        return {n: (out / n).read_bytes() for n in sorted(os.listdir(out))}

    whole = run("whole", 1 << 62)
    assert calls == []
    shared = run("shares", 0)
    assert calls == [3, 3, 3]  # every bank of the layer in 3 shares
    assert len(whole) > 1 and shared == whole


def test_bank_shares_cut_experts_evenly(gguf):
    with open_model(gguf) as model:
        exact = make_plan(model.bound, load_recipe("exact"), model.sources).object("text/layers/0/moe/experts/up")
        nvfp4 = make_plan(model.bound, load_recipe("nvfp4"), model.sources).object("text/layers/0/moe/experts/up")
    shares = expert_bank.bank_shares(exact, 3)
    assert [len(s) for s in shares] == [5, 5, 6]
    assert [p for s in shares for p in s] == list(exact.pieces)
    assert len(expert_bank.bank_shares(exact, 64)) == 16  # at most one share per expert
    assert nvfp4.divisors == 16 and len(expert_bank.bank_shares(nvfp4, 2)) == 2  # a divisor per expert: cut
    one = type(nvfp4)(**{**vars(nvfp4), "divisors": 1})  # one divisor for the whole bank: encoded whole
    assert expert_bank.bank_shares(one, 4) == [tuple(one.pieces)]


def test_kept_nvfp4_banks_in_shares_write_the_same_file(tmp_path, monkeypatch):
    """Kept prequantized NVFP4 experts (one source divisor each) cut into shares: same bytes."""
    from pathlib import Path

    from converters.pipeline import convert as conversion

    src = Path(__file__).resolve().parents[1] / "fixtures" / "prequantized" / "ct-nvfp4-moe"
    convert(src, tmp_path / "whole.ninfer", recipe="exact", artifact_id=AID, workers=3)
    monkeypatch.setattr(conversion, "SHARE_BYTES", 0)
    shares = conversion.bank_shares
    cut = []
    monkeypatch.setattr(conversion, "bank_shares", lambda o, n: cut.append(len(got := shares(o, n))) or got)
    convert(src, tmp_path / "shares.ninfer", recipe="exact", artifact_id=AID, workers=3)
    assert cut and all(n > 1 for n in cut)
    assert (tmp_path / "shares.ninfer").read_bytes() == (tmp_path / "whole.ninfer").read_bytes()
