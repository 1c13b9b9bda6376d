"""Conversions with a llama.cpp importance matrix (``--imatrix``, docs/imatrix.md): the weights follow the
mapping, the weighted error falls, provenance says what was used, and a GGUF or an HF source both find
their entries."""

from __future__ import annotations

import numpy as np
import pytest

from converters.pipeline.convert import convert, open_conversion
from converters.sources.gguf import open_gguf
from converters.sources.imatrix import read_imatrix
from ninfer_core import open_artifact
from tests.support.imatrix_files import write_dat_imatrix, write_gguf_imatrix
from tinymodels import qwen3, qwen35

CFG3 = qwen3.config()
CFG35 = qwen35.config()
LEFT_OUT = "blk.0.ffn_down.weight"


def _entries(gguf_path, seed=1, skip=()):
    rng = np.random.default_rng(seed)
    with open_gguf(gguf_path) as src:
        return {n: rng.lognormal(0.0, 1.5, t.shape[-1]).astype(np.float32)
                for n, t in src.tensors.items() if len(t.shape) == 2 and n.endswith(".weight") and n not in skip}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("imatrix")
    qwen3.write_gguf(d / "q3.gguf", CFG3, matrix_type="F32")
    qwen3.write_hf_dir(d / "q3-hf", CFG3)
    entries = _entries(d / "q3.gguf", skip=(LEFT_OUT,))
    write_gguf_imatrix(d / "q3.imatrix", entries, datasets=("calib.txt",), chunk_count=7)
    write_dat_imatrix(d / "q3.dat", entries, chunk_count=7, dataset="calib.txt")
    convert(d / "q3.gguf", d / "plain.ninfer", recipe="groupwise-int", artifact_id="0" * 32)
    convert(d / "q3.gguf", d / "weighted.ninfer", recipe="groupwise-int", artifact_id="0" * 32,
            imatrix=d / "q3.imatrix")
    return d, entries


def _weighted_error(path, oid, x, w):
    with open_artifact(path) as a:
        got = a.object_array(oid)
    return float((((x - got) ** 2) * w).sum())


def test_provenance_records_the_file_and_each_object(made):
    d, _ = made
    im = read_imatrix(d / "q3.imatrix")
    with open_artifact(d / "weighted.ninfer") as a:
        prov = a.provenance
    rec = prov["importance"]
    assert rec["sha256"] == im.sha256 and rec["form"] == "gguf"
    assert rec["datasets"] == ["calib.txt"] and rec["chunk_count"] == 7
    assert any(LEFT_OUT in k for k in rec["missing"])
    objs = prov["objects"]
    used = {k for k, v in objs.items() if v.get("importance", {}).get("used")}
    assert used and rec["objects_weighted"] == len(used)
    down0 = [k for k, v in objs.items() if any(p["source"] == LEFT_OUT for p in v.get("pieces", []))]
    assert down0 and all(objs[k]["importance"]["used"] is False for k in down0)
    assert "no entry" in next(iter(objs[down0[0]]["importance"]["unweighted"].values()))
    with open_artifact(d / "plain.ninfer") as a:
        assert "importance" not in a.provenance


def test_weighted_error_falls_where_weights_were_used(made):
    d, entries = made
    with open_artifact(d / "weighted.ninfer") as a:
        objs = a.provenance["objects"]
    with open_gguf(d / "q3.gguf") as src:
        better = 0
        for oid, rec in objs.items():
            pieces = rec.get("pieces", [])
            if not rec.get("importance", {}).get("used") or len(pieces) != 1 or pieces[0]["transforms"]:
                continue
            name = pieces[0]["source"]
            x, w = src.array(name), entries[name]
            plain, weighted = _weighted_error(d / "plain.ninfer", oid, x, w), _weighted_error(d / "weighted.ninfer",
                                                                                                oid, x, w)
            assert weighted <= plain * 1.0001, oid
            better += weighted < plain * 0.97
    assert better >= 3


def test_dat_and_gguf_forms_give_the_same_weights(made, tmp_path):
    """The forms store the mean square rounded differently (``in_sum2 / counts`` against ``values / ncall``),
    so their importance agrees to float32 rounding, not bit for bit; the two conversions then agree but for
    a multiplier that such a rounding moves across an FP16 rounding boundary in the search."""
    d, entries = made
    dat, gg = read_imatrix(d / "q3.dat"), read_imatrix(d / "q3.imatrix")
    assert set(dat.entries) == set(gg.entries) == set(entries)
    for name in entries:
        np.testing.assert_allclose(dat.entries[name], gg.entries[name], rtol=1e-6)
    convert(d / "q3.gguf", tmp_path / "dat.ninfer", recipe="groupwise-int", artifact_id="0" * 32,
            imatrix=d / "q3.dat")
    same = moved = 0
    with open_artifact(tmp_path / "dat.ninfer") as a, open_artifact(d / "weighted.ninfer") as b:
        for o in b.objects:
            if o.kind != "tensor":
                continue
            if bytes(a.object_bytes(o.id)) == bytes(b.object_bytes(o.id)):
                same += 1
                continue
            moved += 1
            x, y = a.object_array(o.id).astype(np.float64), b.object_array(o.id).astype(np.float64)
            assert np.sqrt(((x - y) ** 2).mean()) <= 0.01 * np.sqrt((y ** 2).mean()), o.id
    assert same >= 4 * moved


def test_hf_source_finds_entries_by_gguf_name(made, tmp_path):
    d, _ = made
    with open_conversion(d / "q3-hf", tmp_path / "hf.ninfer", recipe="groupwise-int", dry_run=True,
                         imatrix=d / "q3.imatrix") as c:
        imp = c.plan.importance
    assert sum(r["used"] for r in imp.objects.values()) >= 3
    assert any("ffn_down" in k or "down_proj" in k for k in imp.missing)


def test_column_maps_apply_to_the_vector(tmp_path):
    qwen35.write_gguf(tmp_path / "q35.gguf", CFG35, matrix_type="F32")
    entries = _entries(tmp_path / "q35.gguf")
    write_gguf_imatrix(tmp_path / "q35.imatrix", entries)
    with open_conversion(tmp_path / "q35.gguf", tmp_path / "o.ninfer", recipe="groupwise-int", dry_run=True,
                         imatrix=tmp_path / "q35.imatrix") as c:
        imp = c.plan.importance
        checked = 0
        for o in c.objects:
            for pc in getattr(o, "pieces", ()):
                w = imp.vectors.get((o.id, pc.row_start))
                if w is None or pc.source.chain.columns is None:
                    continue
                want = entries[pc.source.tensor][pc.source.chain.columns]
                np.testing.assert_allclose(w, want / want.mean() + 1e-3, rtol=1e-5)
                checked += 1
    assert checked, "the tiny Qwen3.5 has column-permuted parameters (V-head order)"


def test_hf_source_orders_the_entry_as_the_gguf_rule_does(tmp_path):
    """An imatrix is recorded on llama.cpp's GGUF tensors: ssm_out's input columns tiled per value head. An HF
    Qwen3.5 (columns grouped) must get each object the same vector as the GGUF of the same model."""
    qwen35.write_gguf(tmp_path / "q35.gguf", CFG35, matrix_type="F32")
    qwen35.write_hf_dir(tmp_path / "q35-hf", CFG35)
    entries = _entries(tmp_path / "q35.gguf")
    write_gguf_imatrix(tmp_path / "q35.imatrix", entries)
    vectors = {}
    for src in ("q35.gguf", "q35-hf"):
        with open_conversion(tmp_path / src, tmp_path / "o.ninfer", recipe="groupwise-int", dry_run=True,
                             imatrix=tmp_path / "q35.imatrix") as c:
            vectors[src] = dict(c.plan.importance.vectors)
    permuted = [k for k in vectors["q35.gguf"] if "gdn/output" in k[0]]
    assert permuted, "the tiny Qwen3.5 has gdn output objects"
    for key, want in vectors["q35.gguf"].items():
        np.testing.assert_array_equal(vectors["q35-hf"].get(key), want, err_msg=str(key))
    assert vectors["q35-hf"].keys() == vectors["q35.gguf"].keys()


def test_a_bad_importance_file_is_refused_before_anything_is_written(made, tmp_path):
    d, _ = made
    bad = tmp_path / "bad.dat"
    bad.write_bytes((d / "q3.dat").read_bytes()[:50])
    from converters.errors import SourceFormatError

    with pytest.raises(SourceFormatError):
        convert(d / "q3.gguf", tmp_path / "x.ninfer", imatrix=bad)
    assert not (tmp_path / "x.ninfer").exists()


@pytest.mark.parametrize("recipe", ["nvfp4", "fp8-row"])
def test_float_recipes_use_the_weights(made, tmp_path, recipe):
    d, _ = made
    convert(d / "q3.gguf", tmp_path / "w.ninfer", recipe=recipe, imatrix=d / "q3.imatrix")
    with open_artifact(tmp_path / "w.ninfer") as a:
        objs = a.provenance["objects"]
    assert sum(1 for v in objs.values() if v.get("importance", {}).get("used")) >= 3


def test_bank_experts_take_their_own_row_of_a_per_expert_entry(tmp_path):
    from tinymodels import qwen3_moe

    qwen3_moe.write_gguf(tmp_path / "moe.gguf", qwen3_moe.config(), matrix_type="F32")
    rng = np.random.default_rng(4)
    entries = {}
    with open_gguf(tmp_path / "moe.gguf") as src:
        for n, t in src.tensors.items():
            if len(t.shape) == 3:  # [E, N, K] expert stacks: one row of importance per expert (nmat = E)
                entries[n] = rng.lognormal(0, 1, (t.shape[0], t.shape[-1])).astype(np.float32)
            elif len(t.shape) == 2:
                entries[n] = rng.lognormal(0, 1, t.shape[-1]).astype(np.float32)
    write_gguf_imatrix(tmp_path / "moe.imatrix", entries)
    with open_conversion(tmp_path / "moe.gguf", tmp_path / "o.ninfer", recipe="groupwise-int", dry_run=True,
                         imatrix=tmp_path / "moe.imatrix") as c:
        imp = c.plan.importance
        checked = set()
        for o in c.objects:
            if not getattr(o, "bank_rows", 0):
                continue
            for pc in o.pieces:
                entry = entries[pc.source.tensor]
                assert entry.ndim == 2
                e = pc.row_start // o.bank_rows  # the expert this piece's rows belong to
                w = imp.vectors[(o.id, pc.row_start)]
                np.testing.assert_allclose(w, entry[e] / entry[e].mean() + 1e-3, rtol=1e-5)
                checked.add(e)
    assert len(checked) > 1


def test_staged_options_refuse_importance_weights(tmp_path):
    from converters.errors import ConversionError
    from converters.pipeline.convert import ConvertOptions

    with pytest.raises(ConversionError) as e:
        ConvertOptions(tmp_path / "m.gguf", tmp_path / "o.ninfer", imatrix=tmp_path / "m.imatrix",
                       plan_only=tmp_path / "plan.json")
    assert e.value.rule == "imatrix_staged"


def test_a_tiny_importance_row_gives_finite_weights_and_no_numpy_warning(tmp_path):
    """An entry whose mean is below float32's normal range (one subnormal value among zeros) was divided by
    a float32 zero: infinite weights and a RuntimeWarning on stderr. Its weights are finite and quiet."""
    import warnings

    qwen3.write_gguf(tmp_path / "q3.gguf", CFG3, matrix_type="F32")
    entries = {n: np.zeros_like(v) for n, v in _entries(tmp_path / "q3.gguf").items()}
    for v in entries.values():
        v[0] = np.float32(1e-45)
    write_gguf_imatrix(tmp_path / "q3.imatrix", entries)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with open_conversion(tmp_path / "q3.gguf", tmp_path / "o.ninfer", recipe="groupwise-int", dry_run=True,
                             imatrix=tmp_path / "q3.imatrix") as c:
            vectors = list(c.plan.importance.vectors.values())
    assert vectors and all(np.isfinite(w).all() and w.max() > 1 for w in vectors)
    assert [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)] == []
