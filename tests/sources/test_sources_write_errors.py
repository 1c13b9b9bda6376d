"""Every file the tool writes fails with one typed line and leaves nothing behind: a missing directory, a
read-only or full file system (simulated at the system call, as the tests run as any user), for
``validate -o``, ``inspect --evidence-output``, the staged plan file, staging markers and the artifact
writer's final flush."""

from __future__ import annotations

import errno
import os

import pytest

import ninfer_core.container.fileset as fileset
from converters.cli import main as cli_main
from converters.sources.atomic_write import OutputWriteError, write_new_json
from ninfer_core import ArtifactWriter, Component
from ninfer_core.errors import WriterError

FAILURES = {"read-only": errno.EROFS, "full": errno.ENOSPC, "io": errno.EIO}


def artifact(d):
    entry = d / "a.ninfer"
    w = ArtifactWriter(entry, components={"t": Component({})})
    w.add_resource("r.a", 100)
    with w:
        w.write_object("r.a", b"x" * 100)
    return entry


def fail_with(monkeypatch, module, name, code):
    def boom(*_a, **_k):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(module, name, boom)


def test_missing_directory_is_typed(tmp_path):
    target = tmp_path / "nowhere" / "v.json"
    with pytest.raises(OutputWriteError) as info:
        write_new_json(target, {"a": 1}, exists=lambda: AssertionError("unused"))
    assert info.value.rule == "output_write" and info.value.file == str(target)
    assert "No such file or directory" in info.value.message


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_failed_flush_is_typed_and_leaves_nothing(tmp_path, monkeypatch, failure):
    fail_with(monkeypatch, os, "fsync", FAILURES[failure])
    with pytest.raises(OutputWriteError, match=os.strerror(FAILURES[failure])):
        write_new_json(tmp_path / "v.json", {"a": 1}, exists=lambda: AssertionError("unused"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", ["validate", "inspect"])
def test_cli_output_errors_are_one_line(tmp_path, capsys, command):
    entry = artifact(tmp_path)
    target = tmp_path / "nowhere" / "out.json"
    argv = ["validate", str(entry), "-o", str(target)] if command == "validate" else \
        ["inspect", str(entry), "--detail", "summary", "--evidence-output", str(target)]
    assert cli_main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and "[rule output_write]" in err and str(target) in err


def test_cli_full_file_system_leaves_no_report(tmp_path, capsys, monkeypatch):
    entry = artifact(tmp_path)
    before = sorted(os.listdir(tmp_path))
    fail_with(monkeypatch, os, "fsync", errno.ENOSPC)
    assert cli_main(["validate", str(entry), "-o", str(tmp_path / "v.json")]) != 0
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == before


def test_plan_file_write_failure_is_typed(tmp_path, monkeypatch):
    from converters.scaleout.planfile import PlanFile

    plan = PlanFile.__new__(PlanFile)
    monkeypatch.setattr(PlanFile, "to_json", lambda self: {"schema": "x"})
    fail_with(monkeypatch, os, "fsync", errno.ENOSPC)
    with pytest.raises(OutputWriteError):
        plan.save(tmp_path / "plan.json")
    assert os.listdir(tmp_path) == []


def test_writer_flush_failure_is_typed_and_leaves_nothing(tmp_path, monkeypatch):
    w = ArtifactWriter(tmp_path / "a.ninfer", components={"t": Component({})}, max_file_bytes=3 * 4096)
    w.add_resource("r.a", 20000)
    w.plan()
    w.write_object("r.a", b"x" * 20000)
    fail_with(monkeypatch, fileset.os, "fsync", errno.EIO)
    with pytest.raises(WriterError) as info:
        w.commit()
    assert info.value.rule == "io_error" and "Input/output error" in info.value.message
    assert os.listdir(tmp_path) == []
