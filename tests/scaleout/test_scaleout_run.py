"""The conversion commands' one library call: ``ConvertOptions`` → ``scaleout.run.run_conversion``, here or staged."""

from __future__ import annotations

import os

import pytest

from converters.errors import ConversionError
from converters.pipeline.convert import ConvertOptions, Result
from converters.scaleout import job
from converters.scaleout.planfile import Request
from converters.scaleout.run import StagedRun, resume_hint, run_conversion, run_staged
from ninfer_core.errors import ArtifactExistsError
from tinymodels import qwen35

AID = "00112233445566778899aabbccddeeff"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    return qwen35.write_gguf(tmp_path_factory.mktemp("src") / "m.gguf", qwen35.config(), matrix_type="Q8_0")


def test_here_and_plan_only_then_encode_seal_give_the_same_bytes(gguf, tmp_path):
    here, staged = tmp_path / "here", tmp_path / "staged"
    here.mkdir()
    staged.mkdir()
    planned = []
    result = run_conversion(ConvertOptions(gguf, here / "m.ninfer", kind="gguf", recipe="exact", artifact_id=AID),
                            on_plan=planned.append)
    assert isinstance(result, Result) and result.artifact_id == AID and len(planned) == 1
    plan = tmp_path / "m.plan.json"
    run = run_conversion(ConvertOptions(gguf, staged / "m.ninfer", kind="gguf", recipe="exact", artifact_id=AID,
                                        plan_only=plan))
    assert isinstance(run, StagedRun) and run.summary is None and not (staged / "m.ninfer").exists()
    assert run.staged["plan"] == str(plan.resolve()) and run.staged["objects"] == len(result.objects)
    assert run.staged["total_bytes"] == result.summary()["total_bytes"]
    job.encode(plan, workers=2)
    job.seal(plan)
    names = sorted(os.listdir(here))
    assert names == sorted(os.listdir(staged))
    assert all((here / n).read_bytes() == (staged / n).read_bytes() for n in names)


def test_options_resolve_paths_and_check_components(gguf, tmp_path, monkeypatch):
    monkeypatch.chdir(gguf.parent)
    o = ConvertOptions("m.gguf", tmp_path / "x.ninfer", template="t.ninfer", inputs={"drafter": ["d"], "mmproj": None},
                       components=("text", "mtp", "text")).resolved()
    assert o.source == gguf and o.template == gguf.parent / "t.ninfer" and o.inputs["drafter"] == [gguf.parent / "d"]
    assert o.components == ("text", "mtp") and o.output == tmp_path / "x.ninfer"  # the output is kept as given
    with pytest.raises(ConversionError, match="unknown component"):
        ConvertOptions(gguf, tmp_path / "x.ninfer", components=("text", "audio")).resolved()


@pytest.mark.parametrize("staging", [{}, {"plan_only": "p.json"}])
def test_an_existing_output_is_refused_before_the_input_is_read(tmp_path, staging):
    out = tmp_path / "exists.ninfer"
    out.write_bytes(b"precious")
    with pytest.raises(ArtifactExistsError):
        run_conversion(ConvertOptions(tmp_path / "no-such.gguf", out, **staging))
    assert out.read_bytes() == b"precious" and sorted(os.listdir(tmp_path)) == ["exists.ninfer"]


def test_staging_option_conflicts_are_refused(gguf, tmp_path):
    with pytest.raises(ConversionError, match="dry run"):
        run_conversion(ConvertOptions(gguf, tmp_path / "o.ninfer", dry_run=True, backend="dask"))
    with pytest.raises(ConversionError, match="does not stage"):
        run_staged(Request.make(gguf, tmp_path / "o.ninfer"), plan_only=None)
    assert os.listdir(tmp_path) == []


def test_a_failed_encode_keeps_the_staged_files_and_says_how_to_resume(gguf, tmp_path, monkeypatch):
    from converters.scaleout import dask_backend

    def broken(plan_path, **kw):
        raise RuntimeError("cluster gone")

    monkeypatch.setattr(dask_backend, "encode_on_dask", broken)
    told = []
    with pytest.raises(RuntimeError, match="cluster gone"):
        run_conversion(ConvertOptions(gguf, tmp_path / "o.ninfer", recipe="exact", backend="dask"), on_kept=told.append)
    staging = tmp_path / ".o.ninfer.staging"
    assert staging.is_dir() and told == [resume_hint(staging / "convert-plan.json")]
    assert "convert seal" in told[0] and "--discard" in told[0]
