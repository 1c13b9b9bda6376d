"""Scale-out conversion (plan → encode → seal): the same bytes as the one-process conversion.

The reference is ``convert()`` in one process with the same ID; the staged conversion is encoded in
shares (as separate machines would), through the CLI, and on a Dask ``LocalCluster`` of two worker
processes. Failure paths: sealing with an object missing names it and publishes nothing; a source
changed after planning is refused by the encode step; an existing output is never replaced.
"""

from __future__ import annotations

import json
import os

import pytest

from converters.cli import main
from converters.errors import ConversionError
from converters.pipeline.convert import convert
from converters.scaleout import job
from converters.scaleout.planfile import PlanFile, Request
from ninfer_core import open_artifact, validate
from ninfer_core.container.staging import staging_dir_for
from tinymodels import qwen3, qwen35

AID = "fedcba98765432100123456789abcdef"
LIMIT = 300_000  # split into parts: part headers and objects across file boundaries are covered


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    qwen35.write_gguf(d / "q35.Q8_0.gguf", qwen35.config(), matrix_type="Q8_0")
    qwen3.write_hf_dir(d / "q3-hf", qwen3.config())
    return d


def files_of(directory, skip=()) -> dict[str, bytes]:
    return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory)) if n not in skip}


@pytest.fixture(scope="module")
def reference(sources, tmp_path_factory):
    cache = {}

    def get(source: str, recipe: str, **kw):
        key = (source, recipe, tuple(sorted(kw.items())))
        if key not in cache:
            d = tmp_path_factory.mktemp("ref")
            convert(sources / source, d / "m.ninfer", recipe=recipe, workers=2, max_file_bytes=LIMIT, **kw)
            cache[key] = files_of(d)
        return cache[key]

    return get


def staged_request(sources, out, source, recipe, **kw) -> Request:
    return Request.make(sources / source, out, recipe=recipe, max_file_bytes=LIMIT, **kw)


@pytest.mark.parametrize("source,recipe", [("q35.Q8_0.gguf", "groupwise-int"), ("q35.Q8_0.gguf", "exact"),
                                           ("q3-hf", "nvfp4")])
def test_shares_then_seal_equals_one_process(tmp_path, sources, reference, source, recipe):
    plan = tmp_path / "plan.json"
    pf = job.stage(staged_request(sources, tmp_path / "m.ninfer", source, recipe, artifact_id=AID), plan)
    assert not (tmp_path / "m.ninfer").exists() and staging_dir_for(tmp_path / "m.ninfer").is_dir()
    shares = [job.shard_of(pf.objects, k, 3) for k in (1, 2, 3)]
    assert sorted(sum(shares, [])) == sorted(o["id"] for o in pf.objects)  # a partition
    for k in (3, 1, 2):  # any order, one process per share
        report = job.encode(plan, shard=(k, 3), workers=2)
        assert report["written"] == shares[k - 1]
    summary = job.seal(plan)
    assert files_of(tmp_path, skip={"plan.json"}) == reference(source, recipe, artifact_id=AID)
    assert not staging_dir_for(tmp_path / "m.ninfer").exists()
    assert summary["artifact_id"] == AID and summary["objects"] == len(pf.objects)
    assert validate(tmp_path / "m.ninfer") == []


def test_content_id_and_measured_errors_match(tmp_path, sources, reference):
    plan = tmp_path / "plan.json"
    job.stage(staged_request(sources, tmp_path / "m.ninfer", "q35.Q8_0.gguf", "groupwise-int",
                             artifact_id_from_content=True), plan)
    job.encode(plan, workers=1)
    job.seal(plan)
    want = reference("q35.Q8_0.gguf", "groupwise-int", artifact_id_from_content=True)
    assert files_of(tmp_path, skip={"plan.json"}) == want
    with open_artifact(tmp_path / "m.ninfer") as art:
        errs = [v["measured_error"] for v in art.provenance["objects"].values() if "measured_error" in v]
        assert errs and all(e["elements"] > 0 for e in errs)  # real measurements, not the reservation
        assert any(e["max_abs"] > 0 for e in errs)


def test_seal_refuses_missing_objects_and_encode_resumes(tmp_path, sources):
    plan = tmp_path / "plan.json"
    pf = job.stage(staged_request(sources, tmp_path / "m.ninfer", "q35.Q8_0.gguf", "exact"), plan)
    job.encode(plan, shard=(1, 2), workers=2)
    missing = job.shard_of(pf.objects, 2, 2)
    assert job.pending(plan) == missing
    with pytest.raises(ConversionError) as e:
        job.seal(plan)
    assert e.value.rule == "coverage_incomplete" and missing[0] in str(e.value)
    assert not (tmp_path / "m.ninfer").exists()
    report = job.encode(plan, workers=2)  # only what is missing
    assert report["written"] == missing and len(report["skipped"]) == len(pf.objects) - len(missing)
    job.seal(plan)
    assert validate(tmp_path / "m.ninfer") == []


def test_changed_source_is_refused(tmp_path, sources):
    src = tmp_path / "copy.gguf"
    src.write_bytes((sources / "q35.Q8_0.gguf").read_bytes())
    plan = tmp_path / "plan.json"
    job.stage(Request.make(src, tmp_path / "m.ninfer", recipe="exact"), plan)
    os.utime(src, ns=(1, 1))  # same bytes, another identity: the planned provenance no longer holds
    with pytest.raises(ConversionError) as e:
        job.encode(plan)
    assert e.value.rule == "plan_stale"
    job.discard(plan)
    assert not staging_dir_for(tmp_path / "m.ninfer").exists()


def test_existing_output_and_plan_are_never_replaced(tmp_path, sources):
    (tmp_path / "m.ninfer").write_bytes(b"keep")
    with pytest.raises(Exception) as e:
        job.stage(staged_request(sources, tmp_path / "m.ninfer", "q35.Q8_0.gguf", "exact"), tmp_path / "p.json")
    assert getattr(e.value, "rule", None) == "target_exists"
    assert (tmp_path / "m.ninfer").read_bytes() == b"keep" and not (tmp_path / "p.json").exists()
    plan = tmp_path / "p2.json"
    job.stage(staged_request(sources, tmp_path / "n.ninfer", "q35.Q8_0.gguf", "exact"), plan)
    job.encode(plan)
    (tmp_path / "n.ninfer").write_bytes(b"raced")  # the name appeared while encoding
    with pytest.raises(Exception) as e:
        job.seal(plan)
    assert getattr(e.value, "rule", None) == "target_exists"
    assert (tmp_path / "n.ninfer").read_bytes() == b"raced"
    assert not (tmp_path / "n.ninfer.part-0001").exists()


def test_plan_file_is_checked(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"schema": "ninfer-convert-plan/v1", "request": {}}))
    with pytest.raises(ConversionError) as e:
        PlanFile.load(bad)
    assert e.value.rule == "plan_schema" and e.value.json_path == "$.staging"
    with pytest.raises(ConversionError) as e:
        PlanFile.load(tmp_path / "none.json")
    assert e.value.rule == "plan_missing"


def test_cli_plan_encode_seal(tmp_path, sources, reference, capsys):
    plan, out = tmp_path / "m.plan.json", tmp_path / "m.ninfer"
    args = ["gguf2ninfer", str(sources / "q35.Q8_0.gguf"), str(out), "--recipe", "groupwise-int",
            "--artifact-id", AID, "--max-file-bytes", str(LIMIT)]
    assert main(args + ["--plan-only", str(plan), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["objects"] > 0 and not out.exists()
    assert main(["encode", str(plan), "--shard", "2/2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pending"] > 0
    assert main(["seal", str(plan)]) == 1  # objects missing
    assert "not written yet" in capsys.readouterr().err and not out.exists()
    assert main(["encode", str(plan), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pending"] == 0
    assert main(["seal", str(plan), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["artifact_id"] == AID
    assert files_of(tmp_path, skip={plan.name}) == reference("q35.Q8_0.gguf", "groupwise-int", artifact_id=AID)
    assert main(["encode", str(plan), "--shard", "3/2"]) == 2


def test_dask_local_cluster_equals_local(tmp_path, sources, reference, capsys):
    pytest.importorskip("distributed", reason="the scale extra (dask[distributed]) is not installed")
    out = tmp_path / "m.ninfer"
    assert main(["gguf2ninfer", str(sources / "q35.Q8_0.gguf"), str(out), "--recipe", "groupwise-int",
                 "--artifact-id-from-content", "--max-file-bytes", str(LIMIT), "--backend", "dask", "--workers", "2",
                 "--json", "--no-verify"]) == 0  # bytes, not acceptance, are what this compares
    summary = json.loads(capsys.readouterr().out)
    assert files_of(tmp_path) == reference("q35.Q8_0.gguf", "groupwise-int", artifact_id_from_content=True)
    with open_artifact(out) as art:
        assert art.artifact_id == summary["artifact_id"]
    assert not staging_dir_for(out).exists()


def test_encode_named_objects(tmp_path, sources):
    plan = tmp_path / "plan.json"
    pf = job.stage(staged_request(sources, tmp_path / "m.ninfer", "q35.Q8_0.gguf", "exact"), plan)
    first, last = pf.objects[0]["id"], pf.objects[-1]["id"]
    assert job.encode(plan, objects=[last, first])["written"] == [first, last]  # directory order
    assert first not in job.pending(plan) and len(job.pending(plan)) == len(pf.objects) - 2
    assert job.encode(plan, objects=[first])["skipped"] == [first]
    assert job.encode(plan, objects=[first], redo=True)["written"] == [first]
    with pytest.raises(ConversionError) as e:
        job.encode(plan, objects=["no/such/object"])
    assert e.value.rule == "object_unknown" and "no/such/object" in str(e.value)
    job.discard(plan)


def test_template_borrowed_objects_staged(tmp_path, made):
    tpl = (made / "template.ninfer").resolve()
    (tmp_path / "one").mkdir()
    convert(made / "m.gguf", tmp_path / "one" / "m.ninfer", template=tpl, artifact_id=AID, workers=2)
    plan = tmp_path / "plan.json"
    (tmp_path / "st").mkdir()
    pf = job.stage(Request.make(made / "m.gguf", tmp_path / "st" / "m.ninfer", template=tpl, artifact_id=AID), plan)
    assert {o["id"] for o in pf.objects if o["origin"] == "borrowed"} == {
        "mtp/fc", "vision/patch_embed", "frontend/vision/preprocessor_config.json"}
    job.encode(plan, shard=(2, 2))
    job.encode(plan, shard=(1, 2))
    job.seal(plan)
    assert files_of(tmp_path / "st") == files_of(tmp_path / "one")
