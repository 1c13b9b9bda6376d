"""Crash safety of the writer (container spec §11.4): never a partial or overwritten artifact.

A writer killed with SIGKILL mid-write publishes nothing and leaves only hidden temporaries, which
``cleanup_temporaries`` (and the next writer of the same target) removes. An exception or Ctrl-C
removes everything at once, including parts already published when the entry was not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import ninfer_core.container.fileset as fileset
from converters import ROOT
from ninfer_core import ArtifactWriter, Component, cleanup_temporaries, open_artifact
from ninfer_core.container.tempfiles import stale_temporaries
from ninfer_core.errors import ArtifactExistsError, ReadError

KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from ninfer_core import ArtifactWriter, Component
    w = ArtifactWriter(sys.argv[1], components={"t": Component({})}, max_file_bytes=3 * 4096)
    w.add_resource("r.a", 50000)
    w.plan()
    def chunks():
        yield b"x" * 20000
        print("READY", flush=True)
        time.sleep(120)
        yield b"x" * 30000
    w.write_object("r.a", chunks())
    w.commit()
""")


def small_writer(path: Path, **kw) -> ArtifactWriter:
    w = ArtifactWriter(path, components={"t": Component({})}, max_file_bytes=3 * 4096, **kw)
    w.add_resource("r.a", 50000)
    return w


def kill_writer_mid_write(path: Path) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, env=env,
                            cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == b"READY"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return proc.pid


def test_sigkill_mid_write_publishes_nothing(tmp_path):
    entry = tmp_path / "a.ninfer"
    pid = kill_writer_mid_write(entry)
    names = sorted(os.listdir(tmp_path))
    assert names and all(n.startswith(".a.ninfer") and f".tmp-{pid}-" in n for n in names)
    assert len(names) == 7  # 50000 B in 8192-B capacities: entry + 6 parts, all hidden temporaries
    with pytest.raises(ReadError):
        open_artifact(entry)
    assert sorted(p.name for p in stale_temporaries(entry)) == names
    removed = cleanup_temporaries(entry)
    assert sorted(p.name for p in removed) == names
    assert os.listdir(tmp_path) == []


def test_next_writer_removes_stale_temporaries(tmp_path):
    entry = tmp_path / "a.ninfer"
    kill_writer_mid_write(entry)
    with small_writer(entry) as w:
        w.write_object("r.a", b"y" * 50000)
    assert sorted(os.listdir(tmp_path)) == ["a.ninfer"] + [f"a.ninfer.part-{i:04d}" for i in range(1, 7)]
    with open_artifact(entry) as art:
        assert art.resource("r.a") == b"y" * 50000


def test_cleanup_spares_live_writers_and_other_files(tmp_path):
    entry = tmp_path / "a.ninfer"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          check=True).stdout.decode().strip()
    keep = [f".a.ninfer.tmp-{os.getpid()}-abcd", ".a.ninfer.tmp-x-abcd", ".b.ninfer.tmp-1-abcd", "a.ninfer.part-0001",
            f".a.ninfer.other-{dead}-ab"]
    gone = [f".a.ninfer.tmp-{dead}-0123abcd", f".a.ninfer.part-0007.tmp-{dead}-ff"]
    for name in keep + gone:
        (tmp_path / name).write_bytes(b"x")
    assert sorted(p.name for p in cleanup_temporaries(entry)) == sorted(gone)
    assert sorted(os.listdir(tmp_path)) == sorted(keep)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_interrupt_mid_write_leaves_nothing(tmp_path, interrupt):
    def chunks():
        yield b"x" * 20000
        raise interrupt("stop")

    with pytest.raises(interrupt):
        with small_writer(tmp_path / "a.ninfer") as w:
            w.write_object("r.a", chunks())
    assert os.listdir(tmp_path) == []


def test_failure_in_worker_threads_leaves_nothing(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    w = ArtifactWriter(tmp_path / "a.ninfer", components={"t": Component({})}, max_file_bytes=3 * 4096)
    for i in range(8):
        w.add_resource(f"r.{i}", 5000)
    started = threading.Barrier(4)

    def produce(i):
        started.wait(timeout=10)
        if i == 5:
            raise ValueError("encoder failed")
        return bytes([i]) * 5000

    with pytest.raises(ValueError):
        with w, ThreadPoolExecutor(4) as pool:
            for f in [pool.submit(w.write_object, f"r.{i}", lambda i=i: produce(i)) for i in range(8)]:
                f.result()
    assert os.listdir(tmp_path) == []


def test_interrupt_while_publishing_removes_published_parts(tmp_path, monkeypatch):
    real = fileset.publish_noreplace
    calls = []

    def publish_then_interrupt(temp, final):
        calls.append(final.name)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(temp, final)

    monkeypatch.setattr(fileset, "publish_noreplace", publish_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        with small_writer(tmp_path / "a.ninfer") as w:
            w.write_object("r.a", b"z" * 50000)
    assert calls[:2] == ["a.ninfer.part-0001", "a.ninfer.part-0002"]  # parts first …
    assert os.listdir(tmp_path) == []  # … and removed again when the entry was not published


def test_entry_published_last(tmp_path, monkeypatch):
    real = fileset.publish_noreplace
    order = []
    monkeypatch.setattr(fileset, "publish_noreplace", lambda t, f: (order.append(f.name), real(t, f)))
    with small_writer(tmp_path / "a.ninfer") as w:
        w.write_object("r.a", b"z" * 50000)
    assert order == [f"a.ninfer.part-{i:04d}" for i in range(1, 7)] + ["a.ninfer"]


def test_refuses_existing_target_before_writing(tmp_path):
    entry = tmp_path / "a.ninfer"
    entry.write_bytes(b"precious")
    with pytest.raises(ArtifactExistsError) as info:
        small_writer(entry)
    assert info.value.rule == "target_exists" and info.value.file == str(entry)
    assert entry.read_bytes() == b"precious" and os.listdir(tmp_path) == ["a.ninfer"]


def test_refuses_existing_part_name(tmp_path):
    part = tmp_path / "a.ninfer.part-0003"
    part.write_bytes(b"precious")
    w = small_writer(tmp_path / "a.ninfer")
    with pytest.raises(ArtifactExistsError) as info:
        w.plan()
    assert "a.ninfer.part-0003" in str(info.value)
    assert part.read_bytes() == b"precious" and os.listdir(tmp_path) == ["a.ninfer.part-0003"]


def test_target_appearing_during_write_is_not_overwritten(tmp_path):
    entry = tmp_path / "a.ninfer"
    w = small_writer(entry)
    w.write_object("r.a", b"z" * 50000)
    entry.write_bytes(b"someone else's")
    with pytest.raises(ArtifactExistsError):
        with w:
            pass  # leaving the block commits
    assert entry.read_bytes() == b"someone else's"
    assert os.listdir(tmp_path) == ["a.ninfer"]  # our parts and temporaries are gone


def test_unfinished_writer_is_cleaned_at_garbage_collection(tmp_path):
    import gc

    w = small_writer(tmp_path / "a.ninfer")
    w.plan()
    assert len(os.listdir(tmp_path)) == 7
    del w
    gc.collect()
    assert os.listdir(tmp_path) == []
