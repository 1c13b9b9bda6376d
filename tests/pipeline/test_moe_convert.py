"""Converted MoE artifacts: expert banks hold every expert's values at its own rows, per expert.

References are independent of the converter: the generator's per-expert float values
(``tinymodels``), gguf-py's ``dequantize`` of the source GGUF bank, and the source file's raw bytes. A
check that only compared sizes or whole-bank norms would pass with two experts swapped; every
comparison here is per expert, and :func:`expert_order_problems` is shown to catch a swap that keeps
every byte count right (and that the container validator cannot see).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize

from converters.mapping.recipes import load_recipe
from converters.model.engine import logical_array, open_model
from converters.pipeline import expert_bank, produce
from converters.pipeline.convert import convert
from converters.pipeline.plan import make_plan
from converters.pipeline.produce import Producer
from ninfer_core import codecs, open_artifact, validate
from tests.support.moe import legacy_next_gguf
from tinymodels import qwen3_moe, qwen3_next, qwen35_moe

E = 8
CFG3 = qwen3_moe.config()
# nvfp4 needs experts of whole 128-row scale tiles: gate/up [128, 128], down [128, 128]
CFG35 = qwen35_moe.config(moe_intermediate_size=128)
CFGN = qwen3_next.config()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("moe")
    qwen3_moe.write_gguf(d / "q3m.Q8_0.gguf", CFG3, matrix_type="Q8_0")
    qwen35_moe.write_gguf(d / "q35m.BF16.gguf", CFG35, matrix_type="BF16", fused_gate_up=True)
    qwen35_moe.write_hf_dir(d / "q35m-per", CFG35, expert_layout="per_expert")
    qwen35_moe.write_hf_dir(d / "q35m-fused", CFG35, expert_layout="fused", shards=1)
    qwen3_next.write_gguf(d / "q3n.F32.gguf", CFGN)
    qwen3_next.write_hf_dir(d / "q3n-fused", CFGN, expert_layout="fused", dtype="f32")
    return d


@pytest.fixture(scope="module")
def artifact(work):
    cache = {}

    def get(source: str, recipe: str):
        if (source, recipe) not in cache:
            path = work / f"{source}.{recipe}.ninfer"
            cache[source, recipe] = (path, convert(work / source, path, recipe=recipe, workers=2))
        return cache[source, recipe]

    return get


def experts(art, layer: int, proj: str, shape) -> list[np.ndarray]:
    return [logical_array(art, f"text/layers/{layer}/moe/experts/{e}/{proj}", shape) for e in range(E)]


def expert_order_problems(got: list[np.ndarray], want: list[np.ndarray]) -> list[int]:
    """Experts whose decoded matrix is not closest to the reference expert of the same index."""
    bad = []
    for i, g in enumerate(got):
        errors = [float(np.linalg.norm(g - w) / np.linalg.norm(w)) for w in want]
        if int(np.argmin(errors)) != i:
            bad.append(i)
    return bad


def expert_bytes(art, bank, e: int, rows: int) -> bytes:
    """Expert ``e`` of ``bank`` as a standalone ``[rows, K]`` object, assembled from the parent's row view
    (container §7.3: the bytes a consumer reads for rows ``[e·N, (e+1)·N)``, nvfp4 divisor included)."""
    small = codecs.planes(bank.format, bank.layout, (rows, bank.shape[1]), 1)
    view = codecs.row_view(bank.format, bank.layout, bank.shape, e * rows, (e + 1) * rows, bank.divisors)
    out = bytearray(codecs.encoded_size(bank.format, bank.layout, (rows, bank.shape[1]), 1))
    for plane, (name, off, size) in zip(small, view, strict=True):
        assert plane.name == name and plane.size == size
        out[plane.offset:plane.offset + size] = art.read_range(bank.offset + off, size)
    return bytes(out)


def gguf_bank(path, name: str) -> np.ndarray:
    """A GGUF bank ``(E, N, K)`` decoded by gguf-py (independent of our readers and codecs)."""
    t = next(t for t in GGUFReader(path).tensors if t.name == name)
    return np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(tuple(reversed(t.shape.tolist())))


def test_exact_q8_0_banks_are_the_source_blocks(work, artifact):
    path, result = artifact("q3m.Q8_0.gguf", "exact")
    i = CFG3["moe_intermediate_size"]
    with open_artifact(path) as art:
        for layer in range(2):
            for proj, rows in (("gate", i), ("up", i), ("down", 128)):
                oid = f"text/layers/{layer}/moe/experts/{proj}"
                bank = art.object(oid)
                assert (bank.format, bank.shape, bank.divisors) == ("q8_g32_fp16", (E * rows, bank.shape[1]), 1)
                src = gguf_bank(work / "q3m.Q8_0.gguf", f"blk.{layer}.ffn_{proj}_exps.weight")
                np.testing.assert_array_equal(art.object_array(oid), src.reshape(E * rows, -1))
                k = bank.shape[1]
                for e in (0, 3, 7):
                    b = art.bindings[f"text/layers/{layer}/moe/experts/{e}/{proj}"]
                    assert [(p.object, tuple(p.range)) for p in b.parts] == [(oid, (e * rows * k, (e + 1) * rows * k))]
        uses = {(u.parameter, u.input) for u in art.uses}
        assert ("text/layers/1/moe/experts/6/down", "text/layers/1/moe/experts/6/product") in uses
        assert ("text/layers/1/moe/router", "text/layers/1/mlp_input") in uses
        router = art.object("text/layers/1/moe/router")
        assert router.format == "fp32"  # F32 in the GGUF, kept exactly
        prov = art.provenance["objects"]["text/layers/0/moe/experts/down"]
        assert prov["exactness"] == "bit-exact" and len(prov["pieces"]) == E
        assert prov["pieces"][5]["rows"] == [5 * 128, 6 * 128] and prov["pieces"][5]["transforms"] == ["pick(index=5)"]
    assert not [f for f in validate(path) if f.severity == "ERROR"]
    banks = [r for r in result.object_rows() if "/moe/experts/" in r["id"]]
    assert len(banks) == 6 and {r["exactness"] for r in banks} == {"bit-exact"}


def test_expert_row_views_are_exactly_one_expert(artifact):
    for source, recipe, rows in (("q3m.Q8_0.gguf", "exact", 64), ("q35m.BF16.gguf", "nvfp4", 128),
                                 ("q35m.BF16.gguf", "groupwise-int", 128)):
        path, _ = artifact(source, recipe)
        with open_artifact(path) as art:
            bank = art.object("text/layers/1/moe/experts/up")
            for e in range(E):
                alone = codecs.decode(bank.format, bank.layout, (rows, bank.shape[1]), expert_bytes(art, bank, e, rows))
                np.testing.assert_array_equal(alone, logical_array(art, f"text/layers/1/moe/experts/{e}/up",
                                                                   (rows, bank.shape[1])), err_msg=f"{recipe} {e}")


def test_nvfp4_bank_has_one_divisor_per_expert(artifact):
    path, _ = artifact("q35m.BF16.gguf", "nvfp4")
    ref = qwen35_moe.logical_parameters(CFG35)
    with open_artifact(path) as art:
        for proj in ("gate", "up", "down"):
            bank = art.object(f"text/layers/2/moe/experts/{proj}")
            assert (bank.format, bank.divisors, bank.shape) == ("nvfp4", E, (E * 128, 128))
            divisors_plane = codecs.planes(bank.format, bank.layout, bank.shape, E)[2]
            stored = np.frombuffer(art.read_range(bank.offset + divisors_plane.offset, 4 * E), "<f4")
            want = [ref[f"text/layers/2/moe/experts/{e}/{proj}"] for e in range(E)]
            # absmax encoder (storage-layouts §3 encoder): divisor = 448 * 6 / amax of that expert alone
            np.testing.assert_array_equal(stored, [np.float32(448 * 6) / np.abs(w).max() for w in want])
            whole_bank = np.float32(448 * 6) / max(np.abs(w).max() for w in want)
            assert np.count_nonzero(stored != whole_bank) >= E // 2  # not one divisor shared by the bank
            got = experts(art, 2, proj, (128, 128))
            for e in range(E):
                cos = float(np.dot(got[e].ravel(), want[e].ravel()) / np.linalg.norm(got[e]) / np.linalg.norm(want[e]))
                assert cos > 0.99, (proj, e, cos)
            assert expert_order_problems(got, want) == []


def test_expert_order_probe_catches_two_swapped_experts(tmp_path, artifact):
    path, _ = artifact("q3m.Q8_0.gguf", "exact")
    ref = qwen3_moe.logical_parameters(CFG3)
    want = [ref[f"text/layers/1/moe/experts/{e}/gate"] for e in range(E)]
    with open_artifact(path) as art:
        got = experts(art, 1, "gate", (64, 128))
        bank = art.object("text/layers/1/moe/experts/gate")
        blob = bytes(art.object_bytes(bank.id))
        views = [codecs.row_view(bank.format, bank.layout, bank.shape, e * 64, (e + 1) * 64) for e in (2, 5)]
    assert expert_order_problems(got, want) == []
    swapped_ref = list(want)
    swapped_ref[2], swapped_ref[5] = want[5], want[2]
    assert expert_order_problems(got, swapped_ref) == [2, 5]
    # the same swap inside the artifact: every byte count right, the directory untouched
    data = bytearray(path.read_bytes())
    base = data.find(blob)
    assert base > 0 and data.find(blob, base + 1) < 0
    for (_, off2, n), (_, off5, _) in zip(*views, strict=True):
        a, b = base + off2, base + off5
        data[a:a + n], data[b:b + n] = data[b:b + n], data[a:a + n]
    bad = tmp_path / "swapped" / path.name
    bad.parent.mkdir()
    bad.write_bytes(bytes(data))
    assert not [f for f in validate(bad) if f.severity == "ERROR"]  # structure cannot tell
    with open_artifact(bad) as art:
        assert expert_order_problems(experts(art, 1, "gate", (64, 128)), want) == [2, 5]
        np.testing.assert_array_equal(experts(art, 1, "gate", (64, 128))[0], got[0])


def test_gguf_and_hf_artifacts_agree(artifact):
    """Same model, three sources (GGUF with fused ffn_gate_up_exps, HF per expert, HF fused): the bf16
    artifacts hold the same bytes in every tensor object, banks included."""
    arts = [artifact(s, "bf16")[0] for s in ("q35m.BF16.gguf", "q35m-per", "q35m-fused")]
    opened = [open_artifact(p) for p in arts]
    try:
        tensors = [{o.id for o in a.objects if o.kind == "tensor"} for a in opened]
        assert tensors[0] == tensors[1] == tensors[2]
        assert {f"text/layers/{n}/moe/experts/{p}" for n in range(4) for p in ("gate", "up", "down")} <= tensors[0]
        for oid in sorted(tensors[0]):
            if oid.endswith("/a_log"):  # GGUF: log(-ssm_a) of ssm_a = -exp(A_log), not bit-exact (mapping rule a_log)
                np.testing.assert_allclose(opened[0].object_array(oid), opened[1].object_array(oid), rtol=2e-7)
                continue
            first = bytes(opened[0].object_bytes(oid))
            assert all(bytes(a.object_bytes(oid)) == first for a in opened[1:]), oid
        assert opened[0].bindings.keys() == opened[1].bindings.keys()
    finally:
        for a in opened:
            a.close()


def test_qwen3next_sources_agree_and_match_the_generator(tmp_path, monkeypatch, artifact, work):
    legacy = legacy_next_gguf(work / "q3n.legacy.gguf", CFGN, monkeypatch)
    ref = qwen3_next.logical_parameters(CFGN)
    paths = [artifact("q3n.F32.gguf", "groupwise-int")[0], artifact("q3n-fused", "groupwise-int")[0],
             artifact(legacy.name, "groupwise-int")[0]]
    opened = [open_artifact(p) for p in paths]
    try:
        for oid in sorted(o.id for o in opened[0].objects if o.kind == "tensor" and not o.id.endswith("/a_log")):
            first = bytes(opened[0].object_bytes(oid))
            assert all(bytes(a.object_bytes(oid)) == first for a in opened[1:]), oid
        art = opened[0]
        for name in ("gdn/query", "gdn/key", "gdn/value", "gdn/z", "gdn/b", "gdn/a"):
            want = ref[f"text/layers/0/{name}"]
            got = logical_array(art, f"text/layers/0/{name}", want.shape)
            assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.12, name
        got = experts(art, 3, "down", (128, 64))
        assert expert_order_problems(got, [ref[f"text/layers/3/moe/experts/{e}/down"] for e in range(E)]) == []
        shared = art.object("text/layers/3/moe/shared_expert_gate_up")
        assert shared.shape == (256, 128) and shared.format == "q4_g64_fp16"
    finally:
        for a in opened:
            a.close()


@pytest.mark.parametrize(("matrix", "bank_format", "exactness"), [("TQ2_0", "t2_g128_fp16", "value-exact"),
                                                                  ("Q4_0", "gguf_q4_0", "bit-exact")])
def test_exact_ternary_and_passthrough_banks(tmp_path, matrix, bank_format, exactness):
    cfg = qwen3_moe.config(hidden_size=256, head_dim=64, moe_intermediate_size=256)
    src = qwen3_moe.write_gguf(tmp_path / f"m.{matrix}.gguf", cfg, matrix_type=matrix)
    out = tmp_path / "m.ninfer"
    convert(src, out, recipe="exact", workers=2)
    with open_artifact(out) as art:
        for proj in ("gate", "up", "down"):
            oid = f"text/layers/1/moe/experts/{proj}"
            bank = art.object(oid)
            assert (bank.format, bank.shape) == (bank_format, (E * 256, 256))
            assert art.provenance["objects"][oid]["exactness"] == exactness
            np.testing.assert_array_equal(art.object_array(oid),
                                          gguf_bank(src, f"blk.1.ffn_{proj}_exps.weight").reshape(E * 256, 256))
            if bank_format.startswith("gguf_"):  # passthrough: the GGUF tensor's block stream, byte for byte
                t = next(t for t in GGUFReader(src).tensors if t.name == f"blk.1.ffn_{proj}_exps.weight")
                assert bytes(art.object_bytes(oid)) == np.asarray(t.data).tobytes()
                assert expert_bytes(art, bank, 3, 256) == np.asarray(t.data)[3].tobytes()


def test_requantized_experts_keep_their_order(artifact):
    ref = qwen3_moe.logical_parameters(CFG3)
    for recipe, floor in (("groupwise-int", 0.99), ("fp8-row", 0.998), ("nvfp4", 0.99)):
        path, result = artifact("q3m.Q8_0.gguf", recipe)
        with open_artifact(path) as art:
            for proj, shape in (("gate", (64, 128)), ("down", (128, 64))):
                want = [ref[f"text/layers/0/moe/experts/{e}/{proj}"] for e in range(E)]
                got = experts(art, 0, proj, shape)
                assert expert_order_problems(got, want) == [], (recipe, proj)
                cos = min(float(np.dot(g.ravel(), w.ravel()) / np.linalg.norm(g) / np.linalg.norm(w))
                          for g, w in zip(got, want, strict=True))
                assert cos > floor, (recipe, proj, cos)
            if recipe == "nvfp4":  # experts of 64 rows are not whole 128-row tiles: the recipe's fallback
                bank = art.object("text/layers/0/moe/experts/gate")
                assert bank.format == "q8_g32_fp16" and bank.divisors == 1
                assert any("128-row scale tiles" in n for n in art.provenance["objects"][bank.id]["notes"])


def test_bank_is_streamed_plane_major_in_bounded_memory(tmp_path, monkeypatch):
    cfg = qwen3_moe.config(num_hidden_layers=1, hidden_size=256, head_dim=64, moe_intermediate_size=512,
                           num_experts=16)
    src = qwen3_moe.write_gguf(tmp_path / "big.gguf", cfg, matrix_type="Q8_0")
    monkeypatch.setattr(produce, "CHUNK_BYTES", 64 * 1024)
    default_budget = expert_bank.TAIL_BUDGET
    for recipe, oid in (("exact", "text/layers/0/moe/experts/down"), ("groupwise-int", "text/layers/0/moe/experts/up")):
        with open_model(src) as model:
            plan = make_plan(model.bound, load_recipe(recipe), model.sources)
            bank = plan.object(oid)
            producer = Producer(model.sources)
            one_pass = producer.produce(bank)  # tails fit the default budget: one pass
            monkeypatch.setattr(expert_bank, "TAIL_BUDGET", 0)  # every later plane gets its own pass
            tracemalloc.start()
            streamed = 0
            for chunk in producer.stream(bank):
                streamed += memoryview(chunk).nbytes
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            plane_major = producer.produce(bank)
            monkeypatch.setattr(expert_bank, "TAIL_BUDGET", default_budget)
        assert streamed == bank.bytes == len(one_pass) and plane_major == one_pass, recipe
        expert_matrix = 4 * bank.shape[0] // 16 * bank.shape[1]  # one expert's float32 values
        assert peak < expert_matrix and peak < bank.bytes / 3, (recipe, peak, expert_matrix, bank.bytes)


def test_only_layer_keeps_that_layers_banks(tmp_path, work):
    out = tmp_path / "l1.ninfer"
    result = convert(work / "q3m.Q8_0.gguf", out, recipe="exact", only_layer=1, workers=1)
    ids = {o.id for o in result.objects}
    assert {f"text/layers/1/moe/experts/{p}" for p in ("gate", "up", "down")} <= ids
    assert not any(i.startswith("text/layers/0/") for i in ids)
    with open_artifact(out) as art:
        assert len([b for b in art.bindings if b.startswith("text/layers/1/moe/experts/")]) == 3 * E
