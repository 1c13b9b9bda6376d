"""The command line's contracts (docs/cli.md): outputs into missing directories, build-then-accept, format
overrides, ``convert recipes`` / ``formats``, one JSON contract (schema, verdict, error documents),
``--version`` and the help order."""

from __future__ import annotations

import json
import os
import stat

import pytest

from converters.cli import main
from tinymodels import qwen35


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("contract") / "m.gguf"
    qwen35.write_gguf(path, qwen35.config(), matrix_type="Q8_0")
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_output_directory_is_created_and_acceptance_ends_with_one_verdict(gguf, tmp_path, capsys):
    out = tmp_path / "new" / "dir" / "m.ninfer"
    rc, stdout, err = run(capsys, "gguf2ninfer", gguf, out)
    assert rc == 0, err
    assert out.is_file()
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("ACCEPT: PASS")


def test_missing_source_leaves_no_directory_behind(tmp_path, capsys):
    rc, _, err = run(capsys, "gguf2ninfer", tmp_path / "nope.gguf", tmp_path / "new" / "m.ninfer")
    assert rc == 1 and "nope.gguf" in err
    assert not (tmp_path / "new").exists()


def test_json_conversion_carries_schema_verdict_and_acceptance(gguf, tmp_path, capsys):
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "j.ninfer", "--json", "--verify-sweep")
    doc = json.loads(stdout)
    assert rc == 0
    assert doc["schema"] == "ninfer-gguf2ninfer/v1" and doc["verdict"] == "pass"
    assert doc["acceptance"]["sweep"] is True and doc["acceptance"]["failures"] == []
    assert [g["gate"] for g in doc["acceptance"]["gates"]] == [1, 2, 3, 4, 5, 6, 7]


def test_no_verify_skips_acceptance(gguf, tmp_path, capsys):
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "n.ninfer", "--json", "--no-verify")
    doc = json.loads(stdout)
    assert rc == 0 and "acceptance" not in doc and "verdict" not in doc


def test_failed_acceptance_keeps_the_artifact_names_gate_parameter_threshold(gguf, tmp_path, capsys, monkeypatch):
    from converters.acceptance.gates import tolerance

    impossible = tolerance.Tolerance(cosine=1.5, max_rel=0.0, row_rel=0.0)
    monkeypatch.setattr(tolerance, "loosest", lambda formats: impossible)
    out = tmp_path / "f.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, out)
    assert rc == 1 and out.is_file()  # written, kept, not accepted
    lines = stdout.strip().splitlines()
    assert lines[-1].startswith("ACCEPT: FAIL")
    fail = next(line for line in lines if line.startswith("FAIL gate 4"))
    assert "parameter text/" in fail and "docs/thresholds.md §Tolerance" in fail
    assert any(line.startswith("next: the artifact is kept at") for line in lines)


def test_tensor_type_overrides_show_the_rule_in_the_plan(gguf, tmp_path, capsys):
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "o.ninfer", "--dry-run", "--json",
                        "--tensor-type", r"text/layers/\d+/mlp/down=q8_g32_fp16", "--output-tensor-type", "bf16",
                        "--token-embedding-type", "exact")
    assert rc == 0
    rows = {r["id"]: r for r in json.loads(stdout)["objects_detail"]}
    down = rows["text/layers/1/mlp/down"]
    assert down["format"] == "q8_g32_fp16" and down["format_rule"].startswith("--tensor-type")
    assert down["exactness"] == "bit-exact"  # Q8_0 source: transcoded, not requantized
    head = rows["text/output_head"]
    assert head["format"] == "bf16" and head["format_rule"] == "--output-tensor-type bf16"
    assert any("requantized into bf16" in n for n in head["notes"])  # a Q8_0 source bf16 cannot hold exactly
    assert rows["text/token_embedding"]["format_rule"] == "--token-embedding-type exact"
    assert rows["text/layers/1/mlp/gate_up"]["format_rule"] == "recipe groupwise-int group mlp/gate_up"


@pytest.mark.parametrize("flag", ["--tensor-type", "--output-tensor-type"])
def test_bad_override_is_refused_before_reading(tmp_path, capsys, flag):
    value = "x=q9_nope" if flag == "--tensor-type" else "q9_nope"
    rc, _, err = run(capsys, "gguf2ninfer", tmp_path / "missing.gguf", tmp_path / "x.ninfer", flag, value)
    assert rc == 1 and "unknown format 'q9_nope'" in err and "missing.gguf" not in err


def test_recipes_and_formats_list_the_registries(capsys):
    rc, stdout, _ = run(capsys, "recipes", "--json")
    doc = json.loads(stdout)
    assert rc == 0 and doc["schema"] == "ninfer-recipes/v1"
    gi = next(r for r in doc["recipes"] if r["name"] == "groupwise-int")
    assert gi["roles"]["embedding"] == "q8_g32_fp16" and "mlp/gate_up" in gi["groups"]
    rc, stdout, _ = run(capsys, "formats", "--json")
    formats = {f["format"]: f for f in json.loads(stdout)["formats"]}
    assert formats["q8_g32_fp16"]["exact_from"] == {"Q8_0": "bit_exact"}
    assert formats["q4_g64_fp16"]["bits_per_weight"] == 4.25 and formats["q4_g64_fp16"]["group"] == 64


def test_error_with_json_is_one_document_on_stdout(tmp_path, capsys):
    rc, stdout, err = run(capsys, "verify", tmp_path / "nope.ninfer", "--json")
    doc = json.loads(stdout)
    assert rc == 1 and "verify_target" in err
    assert doc == {"schema": "ninfer-error/v1", "error": {
        "code": "converter", "category": "converter", "rule": "verify_target", "file": str(tmp_path / "nope.ninfer"),
        "field": None, "section": None, "message": "artifact does not exist"}}
    rc, stdout, _ = run(capsys, "verify", "--json")
    doc = json.loads(stdout)
    assert rc == 2 and doc["error"]["code"] == "usage" and doc["error"]["field"] == "artifact"


def test_version_flag_and_help_order(capsys):
    rc, stdout, _ = run(capsys, "--version")
    assert rc == 0 and stdout.startswith("ninfer-convert ")
    rc, stdout, _ = run(capsys, "version", "--json")
    assert json.loads(stdout)["schema"] == "ninfer-version/v1"
    rc, stdout, _ = run(capsys, "--help")
    names = ["inspect", "gguf2ninfer", "st2ninfer", "verify", "validate", "check", "repack", "recipes", "formats",
             "encode", "seal", "regress", "version"]
    at = [stdout.index(f"│ {n} ") for n in names]
    assert at == sorted(at)


def test_check_takes_a_positional_gguf_or_hf_source(gguf, tmp_path, capsys):
    hf = qwen35.write_hf_dir(tmp_path / "hf", qwen35.config())
    for src in (gguf, hf):
        rc, stdout, err = run(capsys, "check", src, "--json")
        assert rc == 0, err
        assert json.loads(stdout)["verdict"] == "pass"
    rc, _, err = run(capsys, "check", gguf, "--gguf", gguf)
    assert rc == 2 and "give the source once" in err


def test_ternary_environment_defaults(gguf, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NINFER_TERNARY_GGUF", str(gguf))
    rc, stdout, _ = run(capsys, "check", "--json")
    assert rc == 0 and json.loads(stdout)["source"] == str(gguf.resolve())
    monkeypatch.setenv("NINFER_TERNARY_TEMPLATE", str(tmp_path / "no-tpl.ninfer"))
    rc, _, err = run(capsys, "check")
    assert rc == 1 and "$NINFER_TERNARY_TEMPLATE" in err and "README.md §Ternary packing" in err
    rc, _, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "t.ninfer", "--recipe", "ternary")
    assert rc == 1 and "NINFER_TERNARY_TEMPLATE" in err and not (tmp_path / "t.ninfer").exists()
    monkeypatch.delenv("NINFER_TERNARY_GGUF")
    rc, _, err = run(capsys, "check")
    assert rc == 1 and "NINFER_TERNARY_GGUF" in err


def test_accept_quiet_silences_the_verdict_line_not_the_status(gguf, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NINFER_ACCEPT_QUIET", "1")
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "q.ninfer")
    assert rc == 0 and "ACCEPT:" not in stdout and "conversion summary" in stdout


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_written_reports_honour_the_umask(gguf, tmp_path, capsys, mask):
    art = tmp_path / "u.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, art, "--no-verify", "--json")[0] == 0
    old = os.umask(mask)
    try:
        assert run(capsys, "validate", art, "-o", tmp_path / "v.json", "--json")[0] == 0
        assert run(capsys, "inspect", art, "--json", "--evidence-output", tmp_path / "e.json")[0] == 0
    finally:
        os.umask(old)
    for name in ("v.json", "e.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~mask


def test_inspect_ninfer_shows_components_by_format_recipe_and_exactness(gguf, tmp_path, capsys):
    from converters.inspect.composition import composition

    art = tmp_path / "c.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, art, "--no-verify", "--json", "--output-tensor-type", "bf16")[0] == 0
    c = composition(art)
    rows = {(r["component"], r["format"]): r for r in c["composition"]}
    assert rows[("text", "q4_g64_fp16")]["bits_per_weight"] == 4.25 and rows[("text", "bf16")]["bits_per_weight"] == 16
    assert c["recipe"] == "groupwise-int" and c["overrides"] == [{"rule": "--output-tensor-type bf16", "format": "bf16"}]
    assert set(c["exactness"]) == {"bit-exact", "value-exact", "requantized"}
    rc, stdout, _ = run(capsys, "inspect", art)
    assert rc == 0 and "components × formats" in stdout and "--output-tensor-type bf16" in stdout


def test_ctrl_c_prints_one_line_and_exits_130(gguf, tmp_path, capsys, monkeypatch):
    import converters.scaleout.run as run_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "run_conversion", interrupted)
    rc, stdout, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "i.ninfer")
    assert rc == 130 and stdout == ""
    assert err.strip().splitlines() == ["interrupted (Ctrl-C): nothing was published"]
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "i.ninfer", "--json")
    assert rc == 130 and json.loads(stdout)["error"]["code"] == "interrupted"


def test_an_input_error_prints_no_progress_line_first(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    rc, stdout, err = run(capsys, "gguf2ninfer", bad, tmp_path / "o.ninfer")
    assert rc == 1 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")


def test_summary_throughput_is_the_writing_rate(gguf, tmp_path, capsys):
    rc, stdout, _ = run(capsys, "gguf2ninfer", gguf, tmp_path / "t.ninfer", "--json", "--no-verify")
    s = json.loads(stdout)
    assert s["write_seconds"] <= s["seconds"]
    assert abs(s["write_bytes_per_second"] * s["write_seconds"] - s["total_bytes"]) < 0.01 * s["total_bytes"]
    assert s["write_bytes_per_second"] >= s["bytes_per_second"]


@pytest.mark.parametrize("view", ["[" * 50000 + "]" * 50000, '{"a":' * 50000 + "1" + "}" * 50000,
                                  '{"collection": "tensors", "collection": "metadata"}'])
def test_view_nested_deep_is_a_usage_error(tmp_path, capsys, view):
    """``--view`` is read as every JSON input is: strict, nesting at most 32 levels (a RecursionError was a
    traceback)."""
    from tests.support.inspect_models import tiny_gguf

    rc = main(["inspect", str(tiny_gguf(tmp_path / "m.gguf")), "--detail", "summary", "--view", view])
    err = capsys.readouterr().err
    assert rc == 2 and "--view is not JSON" in err and "Traceback" not in err


def test_kernels_that_cannot_load_are_one_typed_resource_error(monkeypatch):
    """Under ``ulimit -v`` numba's import fails (ImportError / OSError): the encode that needs the compiled
    kernels raises the typed ResourceError instead of a traceback."""
    import sys

    import numpy as np

    from ninfer_core import codecs
    from ninfer_core.codecs import base
    from ninfer_core.errors import ResourceError

    monkeypatch.setattr(base, "_KERNELS_FAILED", {})  # the failure is remembered for this test only
    for name in ("numba", "ninfer_core.codecs.nvfp4_kernel", "ninfer_core.codecs.row_split_kernel"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it raises ImportError
    x = np.linspace(-1, 1, 128 * 128, dtype=np.float32).reshape(128, 128)
    for fmt, layout in 2 * (("nvfp4", "block_scale_k16_m128x4_v1"), ("q4_g64_fp16", "row_split_k128_v1")):
        with pytest.raises(ResourceError, match="cannot be loaded") as info:  # the second time too
            codecs.encode(fmt, layout, x, encoder="mse" if fmt.startswith("q") else "absmax")
        assert info.value.rule == "kernels_unavailable"


def test_running_out_of_memory_is_one_typed_line(monkeypatch, capsys):
    """A MemoryError (the host's limit) is one line and, with --json, one ninfer-error/v1 document."""
    from converters.cli import inspect as inspect_cli

    def out_of_memory(*_a, **_k):
        raise MemoryError

    monkeypatch.setattr(inspect_cli, "inspect_model_artifact", out_of_memory, raising=False)
    monkeypatch.setattr("converters.inspect.inspect_model_artifact", out_of_memory)
    assert main(["inspect", "/dev/null"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "out of memory" in err and "Traceback" not in err
    assert main(["inspect", "/dev/null", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "ninfer-error/v1" and doc["error"]["rule"] == "memory"
