"""What a path holds, by content (``converters.sources.kind``), and the one wrong-kind message every command gives."""

from __future__ import annotations

import pytest

from converters.cli import main
from converters.errors import SourceError
from converters.sources.kind import detect_kind, require_kind, wrong_kind
from tinymodels import qwen35
from tinymodels.calbin import write_calbin_package


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    cfg = qwen35.config()
    hf = qwen35.write_hf_dir(d / "hf", cfg)
    out = {
        "gguf": qwen35.write_gguf(d / "m.bin", cfg, matrix_type="Q8_0"),  # the name says nothing
        "hf": hf,
        "safetensors": next(hf.glob("*.safetensors")),
        "calbin": write_calbin_package(d / "pkgs").root,
        "ninfer": d / "a.dat",
        "ninfer_part": d / "a.ninfer",
        "json": d / "e.ninfer",
        "unknown": d / "m.gguf",
    }
    out["ninfer"].write_bytes(b"NINFER\x00\x03" + bytes(56))
    out["ninfer_part"].write_bytes(b"NINPRT\x00\x03" + bytes(56))
    out["json"].write_text('{"schema": "x"}')
    out["unknown"].write_bytes(b"hello, not a model")
    return out


@pytest.mark.parametrize("kind", ["gguf", "hf", "safetensors", "calbin", "ninfer", "ninfer_part", "json", "unknown"])
def test_kind_is_read_from_content_not_the_name(paths, kind):
    assert detect_kind(paths[kind]) == kind


def test_missing_path_is_a_typed_error(tmp_path):
    with pytest.raises(SourceError) as e:
        detect_kind(tmp_path / "nope")
    assert e.value.code == "target_unavailable"


def test_wrong_kind_names_the_kind_the_command_and_who_reads_it(paths):
    err = wrong_kind(paths["gguf"], "gguf", ("hf",), command="st2ninfer")
    text = str(err)
    assert "m.bin is a GGUF file (detected by content)" in text
    assert "convert st2ninfer reads a checkpoint directory" in text and "use gguf2ninfer" in text
    assert err.rule == "source_kind" and err.category == "unsupported_target"
    part = wrong_kind(paths["ninfer_part"], "ninfer_part", ("ninfer",), command="inspect", rule="x")
    assert part.rule == "ninfer_entry" and "continuation part" in str(part) and "entry file" in str(part)
    many = str(wrong_kind(paths["unknown"], "unknown", ("gguf", "hf", "ninfer"), command="inspect"))
    assert "reads a GGUF file, a checkpoint directory or a .ninfer artifact" in many and "; use" not in many


def test_require_kind_passes_unrecognised_files_only_when_asked(paths):
    assert require_kind(paths["calbin"], ("calbin", "ninfer"), command="validate") == "calbin"
    for kind in ("unknown", "ninfer_part"):
        assert require_kind(paths[kind], ("ninfer",), command="verify", pass_unrecognised=True) == kind
        with pytest.raises(SourceError):
            require_kind(paths[kind], ("ninfer",), command="verify")
    with pytest.raises(SourceError, match="use gguf2ninfer"):
        require_kind(paths["gguf"], ("ninfer",), command="verify", pass_unrecognised=True)


@pytest.mark.parametrize("argv", [
    ["st2ninfer", "{gguf}", "{tmp}/o.ninfer"],
    ["validate", "{gguf}"],
    ["verify", "{gguf}"],
    ["repack", "{gguf}", "{tmp}/r.ninfer"],
    ["check", "{ninfer}"],
    ["inspect", "{unknown}"],
    ["encode", "{gguf}"],
    ["seal", "{hf}"],
])
def test_every_command_gives_the_same_wrong_kind_message(paths, tmp_path, capsys, argv):
    rc = main([a.format(tmp=tmp_path, **paths) for a in argv])
    err = capsys.readouterr().err
    assert rc == 1 and "(detected by content)" in err and f"convert {argv[0]}" in err and " reads " in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_open_source_refuses_other_kinds_with_the_same_message(paths):
    from converters.sources import open_source

    with pytest.raises(SourceError, match="a model source is a GGUF file, a safetensors file or a checkpoint "
                                          "directory; use verify, validate, repack or inspect"):
        open_source(paths["ninfer"])
    with pytest.raises(SourceError, match="is a calbin package"):
        open_source(paths["calbin"])  # a directory, but no checkpoint
