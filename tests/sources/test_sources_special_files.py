"""Special files never hang a reader: a FIFO (or directory) where a reader expects a file gives a typed
"not a regular file" error naming it (docs/inspect.md §Identity and reading); a part that is a symlink
leaving the artifact's directory is an error in validate and a warning in inspect."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from converters.cli import main as cli_main
from converters.errors import ConverterError
from converters.sources import open_gguf, open_hf_dir, open_safetensors, open_source
from converters.sources.frontend import frontend_resources
from ninfer_core import ArtifactWriter, Component, open_artifact, validate
from ninfer_core.errors import NinferError
from tinymodels import qwen35


@pytest.fixture(autouse=True)
def no_hang():
    """A hang becomes a test failure after 20 s instead of a stuck suite."""
    def hung(*_):
        raise TimeoutError("a reader blocked on a special file")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def split_artifact(d: Path) -> Path:
    entry = d / "a.ninfer"
    w = ArtifactWriter(entry, components={"t": Component({})}, max_file_bytes=3 * 4096)
    w.add_resource("r.a", 50000)
    with w:
        w.write_object("r.a", b"x" * 50000)
    return entry


def fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("opener", [open_gguf, open_safetensors, open_source])
def test_fifo_source_is_a_typed_error(tmp_path, opener):
    with pytest.raises(ConverterError, match="not a regular file"):
        opener(fifo(tmp_path / "m.gguf"))


@pytest.mark.parametrize("command", [["repack", "{f}", "{o}"], ["validate", "{f}"], ["inspect", "{f}"],
                                     ["verify", "{f}"]])
def test_fifo_given_to_a_command_is_one_typed_line(tmp_path, capsys, command):
    f, o = fifo(tmp_path / "f"), tmp_path / "o.ninfer"
    assert cli_main([a.format(f=f, o=o) for a in command]) != 0
    err = capsys.readouterr().err
    assert "not a regular file" in err and "Traceback" not in err and not o.exists()


def test_fifo_hf_config_is_a_typed_error(tmp_path):
    hf = qwen35.write_hf_dir(tmp_path / "hf")
    fifo(hf / "config.json")
    with pytest.raises(ConverterError, match="not a regular file"):
        open_hf_dir(hf)


def test_fifo_frontend_file_swapped_in_after_open(tmp_path):
    hf = qwen35.write_hf_dir(tmp_path / "hf")
    with open_hf_dir(hf) as src:
        fifo(hf / "tokenizer.json")
        with pytest.raises(ConverterError, match="not a regular file") as info:
            frontend_resources(src)
    assert info.value.file == str(hf / "tokenizer.json")


def test_fifo_entry_is_a_typed_error(tmp_path):
    entry = fifo(tmp_path / "a.ninfer")
    with pytest.raises(NinferError, match="not a regular file"):
        open_artifact(entry)
    assert [f.rule for f in validate(entry)] == ["entry_unreadable"]


def test_fifo_part_is_a_typed_finding_everywhere(tmp_path, capsys):
    entry = split_artifact(tmp_path)
    fifo(tmp_path / "a.ninfer.part-0002")
    with open_artifact(entry) as art:
        problems = art.check_files()
        assert [(p.rule, p.json_path) for p in problems] == [("part_unreadable", "$.files[2]")]
        assert "not a regular file (a FIFO)" in problems[0].message
    assert any(f.rule == "part_unreadable" and "FIFO" in f.message for f in validate(entry))

    assert cli_main(["validate", str(entry), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert "NINFER_PART_MISSING" in {f["code"] for f in doc["findings"]}
    assert cli_main(["inspect", str(entry), "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert files[2]["state"] == "unreadable" and "FIFO" in files[2]["error"]["message"]
    assert cli_main(["verify", str(entry), "--json"]) == 1
    capsys.readouterr()
    assert cli_main(["repack", str(entry), str(tmp_path / "o.ninfer")]) == 1
    assert "not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "o.ninfer").exists()


def test_part_symlink_leaving_the_directory(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    entry = split_artifact(tmp_path / "a")
    part = tmp_path / "a" / "a.ninfer.part-0002"
    os.rename(part, tmp_path / "b" / part.name)
    part.symlink_to(Path("..") / "b" / part.name)
    assert cli_main(["validate", str(entry), "--json"]) == 1
    escape = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "NINFER_SYMLINK_ESCAPE"]
    assert [f["severity"] for f in escape] == ["ERROR"]
    assert cli_main(["inspect", str(entry), "--json"]) == 0
    lims = json.loads(capsys.readouterr().out)["limitations"]
    assert [x["code"] for x in lims if "symlink" in x["code"]] == ["part_symlink_outside"]
    for command in (["repack", str(entry), str(tmp_path / "r.ninfer")], ["report", str(entry), "-o",
                                                                           str(tmp_path / "r.html")]):
        assert cli_main(command) == 1  # they read the set's own files only: refused, as validate flags it
        err = capsys.readouterr().err
        assert "outside the artifact's directory" in err and "part_symlink_outside" in err
    assert not (tmp_path / "r.ninfer").exists() and not (tmp_path / "r.html").exists()


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "m.gguf"
    qwen35.write_gguf(path, qwen35.config(), matrix_type="Q8_0")
    return path


PATH_COMMANDS = [["inspect", "{p}"], ["gguf2ninfer", "{p}", "{o}"], ["st2ninfer", "{p}", "{o}"],
                 ["repack", "{p}", "{o}"], ["check", "{p}"], ["verify", "{p}"], ["validate", "{p}"],
                 ["encode", "{p}"], ["seal", "{p}"], ["gguf2ninfer", "{g}", "{o}", "--mmproj", "{p}"],
                 ["gguf2ninfer", "{g}", "{o}", "--imatrix", "{p}"], ["gguf2ninfer", "{g}", "{o}", "--recipe", "{p}"],
                 ["gguf2ninfer", "{g}", "{o}", "--proposal-counts", "{p}"], ["gguf2ninfer", "{g}", "{p}"]]


@pytest.mark.parametrize("bad", ["long_name", "long_path", "loop"])
@pytest.mark.parametrize("command", PATH_COMMANDS, ids=lambda c: " ".join(c).replace("{", "").replace("}", ""))
def test_unusable_path_is_one_typed_line(tmp_path, capsys, gguf_file, command, bad):
    """A name over 255 bytes, a path over 4,096 bytes, a symlink loop: wherever a path enters, one typed line
    (and with --json one ninfer-error/v1 document), exit 1, nothing written (docs/robustness.md §Promises);
    verify given a symlink loop reports it in its FAIL report instead."""
    if bad == "loop":
        p = tmp_path / "loop.yaml"
        os.symlink(tmp_path / "loop2.yaml", p)
        os.symlink(p, tmp_path / "loop2.yaml")
    else:
        p = tmp_path / ("x" * 300 + ".yaml") if bad == "long_name" else tmp_path / "/".join(["y" * 200] * 25)
    o = tmp_path / "o.ninfer"
    args = [a.format(p=p, o=o, g=gguf_file) for a in command]
    report = bad == "loop" and command[0] == "verify"
    assert cli_main(args) == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not re.match(r"verify \d/\d ", line)]  # verify's gate progress lines (docs/acceptance.md §Progress)
    assert "Traceback" not in "".join(err) and len(err) == (0 if report else 1), err
    assert cli_main([*args, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] != "ninfer-error/v1" if report else doc["schema"] == "ninfer-error/v1"
    assert not o.exists()


@pytest.mark.parametrize("name", ["chat_template.jinja", "tokenizer_config.json"])
@pytest.mark.parametrize("special", ["fifo", "device"])
def test_special_frontend_file_is_refused_not_skipped(tmp_path, name, special):
    """A FIFO or a device by a frontend file's name was skipped as if absent: it is refused, naming it."""
    hf = qwen35.write_hf_dir(tmp_path / "hf")
    target = hf / name
    target.unlink(missing_ok=True)
    fifo(target) if special == "fifo" else os.symlink("/dev/zero", target)
    with open_hf_dir(hf) as src:
        with pytest.raises(ConverterError, match="not a regular file") as info:
            frontend_resources(src)
    assert info.value.file == str(target)


def test_a_path_with_a_nul_byte_is_typed(tmp_path):
    """No command line carries a NUL, but an API caller (the MCP server, the fuzzed paths) may: every checked
    path helper answers it with the typed error, not Python's ValueError."""
    from converters.mapping.recipes import load_recipe
    from converters.sources.kind import detect_kind

    for read in (detect_kind, load_recipe, open_source):
        with pytest.raises(ConverterError, match="NUL byte"):
            read(str(tmp_path / "a\0b.yaml"))
