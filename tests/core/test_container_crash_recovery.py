"""Recovery after a writer is killed while publishing (docs/format/container.md §11.4, crash recovery).

A child process writes a split artifact and SIGKILLs itself at one publish step (before or after the link
of each part and of the entry). Whatever step it died at, the next writer of the same name — the in-process
writer, ``repack`` or a staged ``seal`` run again — succeeds without anyone deleting files by hand, and a
published artifact is never touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from converters import ROOT
from ninfer_core import ArtifactWriter, Component, cleanup_temporaries, open_artifact, repack
from ninfer_core.container import StagedArtifact, staging_dir_for, tempfiles
from ninfer_core.container.tempfiles import orphan_parts
from ninfer_core.errors import ArtifactExistsError

PARTS = 6  # 50000 B in 8192-B capacities: entry + 6 parts
CALLS = PARTS + 1  # publish calls: the parts, then the entry

KILLED_PUBLISHER = textwrap.dedent("""
    import os, signal, sys
    import ninfer_core.container.fileset as fileset
    import ninfer_core.container.staging as staging
    import ninfer_core.container.tempfiles as tempfiles
    from ninfer_core import ArtifactWriter, Component
    from ninfer_core.container import StagedArtifact, staging_dir_for

    entry, mode, step, phase = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    calls = []
    real_publish = tempfiles.publish_noreplace

    def publish(temp, final):
        calls.append(final)
        if len(calls) == step:
            if phase == "after-link":
                os.link(temp, final)
            os.kill(os.getpid(), signal.SIGKILL)
        real_publish(temp, final)

    fileset.publish_noreplace = staging.publish_noreplace = publish
    w = ArtifactWriter(entry, components={"t": Component({})}, max_file_bytes=3 * 4096, artifact_id="11" * 16)
    w.add_resource("r.a", 50000)
    if mode == "writer":
        w.plan()
        w.write_object("r.a", b"x" * 50000)
        w.commit()
    else:
        staged = w.stage(staging_dir_for(entry))
        staged.write_object("r.a", [b"x" * 50000])
        staged.seal()
""")

STEPS = [(step, phase) for step in range(1, CALLS + 1) for phase in ("before-link", "after-link")]


def kill_while_publishing(entry: Path, mode: str, step: int, phase: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", KILLED_PUBLISHER, str(entry), mode, str(step), phase], env=env,
                          cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def visible(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if not n.startswith("."))


def new_writer(entry: Path) -> ArtifactWriter:
    w = ArtifactWriter(entry, components={"t": Component({})}, max_file_bytes=3 * 4096)
    w.add_resource("r.a", 50000)
    return w


ALL_FILES = ["a.ninfer"] + [f"a.ninfer.part-{i:04d}" for i in range(1, PARTS + 1)]


@pytest.mark.parametrize(("step", "phase"), STEPS)
def test_next_writer_recovers_from_sigkill_at_each_publish_step(tmp_path, step, phase):
    entry = tmp_path / "a.ninfer"
    kill_while_publishing(entry, "writer", step, phase)
    published = step - 1 + (phase == "after-link")
    assert visible(tmp_path) == sorted(ALL_FILES[1:published + 1] if published < CALLS else ALL_FILES)
    if published == CALLS:  # the entry was published: a complete artifact that nobody may touch
        before = {n: (tmp_path / n).read_bytes() for n in ALL_FILES}
        with pytest.raises(ArtifactExistsError):
            new_writer(entry)
        assert orphan_parts(entry) == []
        cleanup_temporaries(entry)
        assert {n: (tmp_path / n).read_bytes() for n in ALL_FILES} == before
        with open_artifact(entry) as art:
            assert art.resource("r.a") == b"x" * 50000
        return
    assert len(orphan_parts(entry)) == published
    with new_writer(entry) as w:  # no target_exists: the dead writer's parts are recognised and removed
        w.write_object("r.a", b"y" * 50000)
    assert sorted(os.listdir(tmp_path)) == ALL_FILES
    with open_artifact(entry) as art:
        assert art.resource("r.a") == b"y" * 50000 and art.check_files() == []


@pytest.mark.parametrize("step", [2, CALLS])
def test_repack_recovers_from_a_killed_writer(tmp_path, step):
    source = tmp_path / "src.ninfer"
    with new_writer(source) as w:
        w.write_object("r.a", b"s" * 50000)
    (tmp_path / "out").mkdir()
    entry = tmp_path / "out" / "a.ninfer"
    kill_while_publishing(entry, "writer", step, "before-link")
    repack(source, entry, max_file_bytes=3 * 4096, durable=False)
    assert sorted(os.listdir(tmp_path / "out")) == ALL_FILES
    with open_artifact(entry) as art:
        assert art.resource("r.a") == b"s" * 50000


@pytest.mark.parametrize(("step", "phase"), [(1, "after-link"), (3, "after-link"), (CALLS, "before-link")])
def test_seal_again_after_sigkill_while_sealing(tmp_path, step, phase):
    entry = tmp_path / "a.ninfer"
    kill_while_publishing(entry, "staged", step, phase)
    assert not entry.exists()
    StagedArtifact.open(staging_dir_for(entry)).seal()
    assert sorted(os.listdir(tmp_path)) == ALL_FILES
    with open_artifact(entry) as art:
        assert art.resource("r.a") == b"x" * 50000 and art.check_files() == []


def test_discard_after_sigkill_while_sealing_removes_its_parts(tmp_path):
    entry = tmp_path / "a.ninfer"
    kill_while_publishing(entry, "staged", 4, "before-link")
    assert len(visible(tmp_path)) == 3
    StagedArtifact.open(staging_dir_for(entry)).discard()
    assert os.listdir(tmp_path) == []
    with new_writer(entry) as w:
        w.write_object("r.a", b"y" * 50000)
    assert sorted(os.listdir(tmp_path)) == ALL_FILES


def _orphans_of(tmp_path: Path, pid: int) -> Path:
    """A dead-looking crash: parts 1-2 published with ID 0x11…, an entry temporary of ``pid`` with that ID."""
    entry = tmp_path / "a.ninfer"
    kill_while_publishing(entry, "writer", 3, "before-link")
    temps = [n for n in os.listdir(tmp_path) if n.startswith(".a.ninfer.tmp-")]
    assert len(temps) == 1
    os.rename(tmp_path / temps[0], tmp_path / f".a.ninfer.tmp-{pid}-abcd")
    return entry


def test_parts_of_a_live_writer_are_never_touched(tmp_path):
    entry = _orphans_of(tmp_path, os.getpid())  # this process is alive
    assert orphan_parts(entry) == []
    cleanup_temporaries(entry)
    assert visible(tmp_path) == ["a.ninfer.part-0001", "a.ninfer.part-0002"]
    with pytest.raises(ArtifactExistsError):
        new_writer(entry).plan()


def test_parts_of_an_existing_entry_are_never_touched(tmp_path):
    entry = _orphans_of(tmp_path, 2**22 + 12345)  # beyond pid_max on common systems: dead
    entry.write_bytes(b"someone's entry")
    assert orphan_parts(entry) == []
    cleanup_temporaries(entry)
    assert visible(tmp_path) == ["a.ninfer", "a.ninfer.part-0001", "a.ninfer.part-0002"]


def test_foreign_parts_with_another_id_are_never_touched(tmp_path):
    entry = _orphans_of(tmp_path, 2**22 + 12345)
    part = tmp_path / "a.ninfer.part-0002"
    raw = bytearray(part.read_bytes())
    raw[16:32] = bytes.fromhex("22" * 16)
    part.write_bytes(bytes(raw))
    assert [p.name for p in orphan_parts(entry)] == ["a.ninfer.part-0001"]
    with pytest.raises(ArtifactExistsError, match="part-0002"):
        new_writer(entry).plan()
    assert visible(tmp_path) == ["a.ninfer.part-0002"]


def test_a_rerun_removes_the_temporary_left_beside_a_published_entry(tmp_path):
    """Killed between linking the entry and removing its temporary: the temporary is a hard link to the
    published entry. The next write to that name is refused (the entry exists) and removes the leftover;
    so does the conversion commands' output check."""
    from converters.pipeline.convert import check_output_free

    entry = tmp_path / "a.ninfer"
    kill_while_publishing(entry, "writer", CALLS, "after-link")
    leftover = [n for n in os.listdir(tmp_path) if n.startswith(".")]
    assert len(leftover) == 1 and os.path.samefile(tmp_path / leftover[0], entry)
    with pytest.raises(ArtifactExistsError):
        new_writer(entry)
    assert sorted(os.listdir(tmp_path)) == ALL_FILES
    os.link(entry, tmp_path / ".a.ninfer.tmp-4194999-abcd")  # beyond pid_max on common systems: dead
    with pytest.raises(ArtifactExistsError):
        check_output_free(entry)
    assert sorted(os.listdir(tmp_path)) == ALL_FILES


@pytest.mark.parametrize("length", [233, 248])
def test_a_name_that_fits_is_written_though_its_temporaries_would_not(tmp_path, length):
    """``.<name>.tmp-<pid>-<token>`` passes 255 bytes for a long name: the temporary carries a hash of it
    instead, and a dead writer's such temporaries are still recognised and removed."""
    entry = tmp_path / ("n" * (length - len(".ninfer")) + ".ninfer")
    limit = 3 * 4096 if length + len(".part-0001") <= 255 else None
    w = ArtifactWriter(entry, components={"t": Component({})}, max_file_bytes=limit)
    w.add_resource("r.a", 50000)
    with w:
        w.write_object("r.a", b"z" * 50000)
    with open_artifact(entry) as art:
        assert art.resource("r.a") == b"z" * 50000 and art.check_files() == []
    stale = tmp_path / tempfiles.temp_name(entry.name + ".part-0001", "abcd").replace(str(os.getpid()), "4194999")
    stale.write_bytes(b"x")
    assert len(stale.name) <= 255 and cleanup_temporaries(entry) == [stale]
