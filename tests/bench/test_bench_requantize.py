"""``make bench`` area ``quality``'s requantization-speed rows (bench/requantize.py) at a tiny scale: three
rows with their targets, every run recorded, the measured error summarised, and the importance file's
weights used under the GGUF names the converter looks up (docs/imatrix.md §Name mapping)."""

from __future__ import annotations

from bench import requantize


def test_speed_rows_at_a_tiny_scale(tmp_path, monkeypatch):
    monkeypatch.setattr(requantize, "DIMS", {})  # tinymodels' default tiny Qwen3.5 dims
    rows = requantize.run(tmp_path, scale=0.0005, repeats=1, drop_cache=False)
    assert [r["name"] for r in rows] == [f"bf16 HF → {n} requantization throughput vs cp"
                                         for n in ("groupwise-int", "nvfp4", "groupwise-int --imatrix")]
    assert [r["target"] for r in rows] == [">= 0.5", ">= 0.3", ">= 0.35"]
    for row, name in zip(rows, requantize.TARGETS, strict=True):
        d = row["detail"]
        assert isinstance(row["met"], bool) and row["unit"] == "× cp"
        assert row["value"] > 0 and row["met"] == (row["value"] >= requantize.TARGETS[name][2])
        assert set(d["runs"]) == {"cp", name} and all(len(v) == 1 and v[0] > 0 for v in d["runs"].values())
        assert d["source_bytes"] > 0 and d["layers"] % 4 == 0 and not d["page_cache_dropped"]
        assert d["source_MBps"] > 0 and d["MB_per_cpu_second"] > 0 and d["ratio_at_full_cpu_use"] > 0
        assert d["cpu_seconds"] in d["runs_cpu_seconds"] and d["generate_seconds"] >= 0
        assert d["exactness"]["requantized"] > 0 and 0.9 < d["worst_cosine"]["cosine"] < 1
        assert len(d["measured_error"]["sha256"]) == 64 and d["measured_error"]["same_in_every_run"]
    gi, _, weighted = (r["detail"] for r in rows)
    assert gi["recipe"] == weighted["recipe"] == "groupwise-int"
    assert gi["measured_error"]["sha256"] != weighted["measured_error"]["sha256"]  # the weights changed the codes
    imp = weighted["importance"]
    assert imp["missing"] == ["model.embed_tokens.weight"]
    assert imp["objects_weighted"] == imp["requantized_objects"] - 1 and "not_run" not in weighted
    assert not (tmp_path / "qwen35-requantize-hf").exists() and not (tmp_path / "requantized.ninfer").exists()


def test_importance_not_used_is_reported():
    summary = {"exactness": {"requantized": 22}, "importance": {"file": "m.imatrix", "objects_weighted": 0}}
    used, figures = requantize._importance_used({"summary": summary, "importance_missing": []}, ["a"], "m.imatrix")
    assert not used and figures["objects_weighted"] == 0
    summary["importance"]["objects_weighted"] = 12  # ten requantized objects unweighted, none for lack of an entry
    assert not requantize._importance_used({"summary": summary, "importance_missing": []}, ["a"], "m.imatrix")[0]
    summary["importance"]["objects_weighted"] = 21
    missing = ["model.embed_tokens.weight"]
    assert requantize._importance_used({"summary": summary, "importance_missing": missing}, ["a"], "m.imatrix")[0]
    assert not requantize._importance_used({"summary": summary, "importance_missing": ["lm_head.weight"]}, ["a"],
                                           "m.imatrix")[0]
