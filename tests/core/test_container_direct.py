"""Durable writes past the page cache (docs/io-speed.md §Direct writes): a run queues whole aligned units
and gives the rest to the shared units, every byte lands where it belongs, no buffered write touches a
directly written unit, the queue writes on its own thread with bounded buffers and keeps its first
error, a refusal falls back to buffered writes, and a failing direct write is a typed error that leaves
no temporaries."""

from __future__ import annotations

import errno
import os
import threading
import time

import numpy as np
import pytest

from ninfer_core import ArtifactWriter, Component, open_artifact
from ninfer_core.container import direct, fileset
from ninfer_core.container.direct import QUEUE_BYTES, STAGE_BYTES, UNIT, DirectQueue, DirectRun, open_direct
from ninfer_core.container.filecopy import FileRange
from ninfer_core.container.object_data import Placed
from ninfer_core.errors import WriterError


class Recorder:
    """Fake file writes: the bytes each file got, and which ranges went which way."""

    def __init__(self) -> None:
        self.files: dict[int, bytearray] = {}
        self.buffered_ranges: list[tuple[int, int, int]] = []
        self.direct_ranges: list[tuple[int, int, int]] = []
        self.lock = threading.Lock()

    def _put(self, index: int, data: memoryview, offset: int) -> None:
        with self.lock:  # the queue's thread writes too
            self._put_locked(index, data, offset)

    def _put_locked(self, index: int, data: memoryview, offset: int) -> None:
        f = self.files.setdefault(index, bytearray())
        if len(f) < offset + len(data):
            f.extend(bytes(offset + len(data) - len(f)))
        assert f.count(0, offset, offset + len(data)) == len(data), "a byte was written twice"  # all still zero
        f[offset:offset + len(data)] = data

    def buffered(self, index: int, data: memoryview, offset: int) -> None:
        self.buffered_ranges.append((index, offset, offset + len(data)))
        self._put(index, data, offset)

    def direct(self, index: int, data: memoryview, offset: int) -> None:
        assert offset % UNIT == 0 and len(data) % UNIT == 0 and len(data) > 0
        self.direct_ranges.append((index, offset, offset + len(data)))
        self._put(index, data, offset)

    def run(self) -> tuple[DirectQueue, DirectRun]:
        queue = DirectQueue(self.direct)
        return queue, DirectRun(queue, self.buffered, self.buffered)


def _check_units_exclusive(rec: Recorder) -> None:
    """No buffered range shares a unit with a directly written range."""
    direct_units = {(i, u) for i, a, b in rec.direct_ranges for u in range(a // UNIT, b // UNIT)}
    for i, a, b in rec.buffered_ranges:
        for u in range(a // UNIT, (b - 1) // UNIT + 1):
            assert (i, u) not in direct_units, f"buffered [{a}, {b}) of file {i} touches direct unit {u}"


@pytest.mark.parametrize("seed", range(6))
def test_run_writes_every_byte_once_whole_units_directly(seed):
    rng = np.random.default_rng(seed)
    rec, expected = Recorder(), {}
    queue, run = rec.run()
    try:
        cursor = {0: int(rng.integers(0, 3 * UNIT)), 1: 4096}
        for _ in range(40):  # chunks of one object, a jump now and then (a new object, another file)
            index = int(rng.integers(0, 2))
            if rng.random() < 0.2:
                cursor[index] += int(rng.integers(1, UNIT))
            size = int(rng.choice([rng.integers(1, 5000), rng.integers(1, 3 * STAGE_BYTES // 2)]))
            data = rng.integers(0, 256, size, dtype=np.uint8)
            data[data == 0] = 1  # zero marks "never written" in the recorder
            run.write(index, memoryview(data), cursor[index])
            f = expected.setdefault(index, bytearray())
            f.extend(bytes(cursor[index] + size - len(f)))
            f[cursor[index]:cursor[index] + size] = data.tobytes()
            cursor[index] += size
        run.close()
    finally:
        run.release()
    queue.drain()
    for index, f in expected.items():
        assert bytes(rec.files[index]) == bytes(f)
    assert rec.direct_ranges, "a run of several stages wrote nothing directly"
    _check_units_exclusive(rec)


def test_run_aligned_start_is_all_direct_but_the_last_partial_unit():
    rec = Recorder()
    queue, run = rec.run()
    data = np.full(3 * UNIT + 100, 7, dtype=np.uint8)
    run.write(0, memoryview(data[:UNIT + 5]), 2 * UNIT)  # one run in two writes
    run.write(0, memoryview(data[UNIT + 5:]), 3 * UNIT + 5)
    run.close()
    run.release()
    queue.drain()
    assert rec.direct_ranges == [(0, 2 * UNIT, 5 * UNIT)]
    assert rec.buffered_ranges == [(0, 5 * UNIT, 5 * UNIT + 100)]


def test_queue_writes_on_its_own_thread_and_bounds_what_it_holds():
    gate, threads, written = threading.Event(), set(), []

    def write(index, data, offset):
        threads.add(threading.current_thread().name)
        gate.wait(10)
        written.append(offset)

    queue = DirectQueue(write)
    held = [queue.buffer() for _ in range(QUEUE_BYTES // STAGE_BYTES)]
    for k, buf in enumerate(held):
        queue.submit(0, buf, STAGE_BYTES, k * STAGE_BYTES)  # returns at once: the write waits on the gate
    more = queue.buffer()
    assert all(more.obj is not b.obj for b in held)  # none written yet: a new buffer
    waiter = threading.Thread(target=lambda: queue.submit(0, more, UNIT, 99 * STAGE_BYTES))
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()  # QUEUE_BYTES queued: a producer waits for the disk
    gate.set()
    waiter.join(10)
    queue.drain()
    assert any(queue.buffer().obj is b.obj for b in held)  # a written buffer, reused
    assert written == [k * STAGE_BYTES for k in range(len(held))] + [99 * STAGE_BYTES]  # in the order queued
    assert threads == {"ninfer-direct-writes"}


def test_queue_keeps_its_first_error_and_writes_nothing_after_it():
    written = []

    def write(index, data, offset):
        if offset == UNIT:
            raise OSError(errno.EIO, "Input/output error")
        written.append(offset)

    queue = DirectQueue(write)
    refused = 0
    for k in range(4):
        try:
            queue.submit(0, queue.buffer(), UNIT, k * UNIT)
        except OSError:  # the error came back already
            refused += 1
    assert refused <= 2
    with pytest.raises(OSError):
        queue.drain()
    assert written == [0]
    with pytest.raises(OSError):
        queue.submit(0, queue.buffer(), UNIT, 9 * UNIT)


OBJECTS = {f"r.{i}": np.random.default_rng(i).integers(0, 256, 5 * UNIT + 4099 * i + 13, dtype=np.uint8)
           for i in range(3)}


def _write(path, **kw):
    with ArtifactWriter(path, components={"text": Component({"architectures": ["Test"]},
                                                            resources={k: k for k in OBJECTS})},
                        metadata={"name": "t"}, provenance={}, **kw) as w:
        for k, v in OBJECTS.items():
            w.add_resource(k, v.size)
        w.plan()
        for k, v in OBJECTS.items():
            w.write_object(k, [v[:UNIT // 3], v[UNIT // 3:]])  # two chunks, one run
        return w._files


def _check(path):
    with open_artifact(path) as art:
        for k, v in OBJECTS.items():
            assert art.resource(k) == v.tobytes()


def test_durable_writer_writes_whole_units_directly_where_the_file_system_allows(tmp_path):
    probe = tmp_path / "probe"
    probe.touch()
    fd = open_direct(probe)
    if fd is not None:
        os.close(fd)
    fds_before = len(os.listdir("/proc/self/fd"))
    files = _write(tmp_path / "m.ninfer")
    assert len(os.listdir("/proc/self/fd")) == fds_before  # the direct descriptors were closed
    _check(tmp_path / "m.ninfer")
    # each object holds at least 3 whole units after its first boundary
    assert (files.direct_bytes >= 3 * UNIT * len(OBJECTS)) == (fd is not None)
    assert files.direct_bytes % UNIT == 0


def test_page_cache_writer_writes_nothing_directly(tmp_path):
    files = _write(tmp_path / "m.ninfer", durable=False)
    _check(tmp_path / "m.ninfer")
    assert files.direct_bytes == 0


def test_pwrite_direct_reports_a_refusal_and_raises_other_errors(tmp_path, monkeypatch):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        for code, refused in ((errno.EINVAL, True), (errno.EOPNOTSUPP, True), (errno.ENOSPC, False)):
            def pwrite(fd, data, offset, code=code):
                raise OSError(code, os.strerror(code))
            monkeypatch.setattr(direct.os, "pwrite", pwrite)
            if refused:
                assert direct.pwrite_direct(fd, memoryview(bytes(UNIT)), 0) is False
            else:
                with pytest.raises(OSError):
                    direct.pwrite_direct(fd, memoryview(bytes(UNIT)), 0)
    finally:
        monkeypatch.undo()
        os.close(fd)


def test_refused_direct_writes_fall_back_to_buffered(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(fileset, "open_direct", lambda path: os.open(path, os.O_WRONLY))
    monkeypatch.setattr(fileset, "pwrite_direct", lambda fd, data, offset: calls.append(offset) or False)
    files = _write(tmp_path / "m.ninfer")
    _check(tmp_path / "m.ninfer")
    assert files.direct_bytes == 0
    assert len(calls) == 1  # refused once, then never tried again for that file


def test_failing_direct_write_is_a_typed_error_and_leaves_nothing(tmp_path, monkeypatch):
    def fail(fd, data, offset):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fileset, "open_direct", lambda path: os.open(path, os.O_WRONLY))
    monkeypatch.setattr(fileset, "pwrite_direct", fail)
    with pytest.raises(WriterError) as err:
        _write(tmp_path / "m.ninfer")
    assert err.value.rule == "io_error" and "Input/output error" in str(err.value)
    assert sorted(os.listdir(tmp_path)) == []


def test_durable_copy_moves_whole_units_in_the_kernel_and_assembles_its_ends(tmp_path, monkeypatch):
    src = tmp_path / "source.bin"
    payload = np.random.default_rng(5).integers(0, 256, 7 * UNIT, dtype=np.uint8)
    src.write_bytes(payload.tobytes())
    copied = []
    real = fileset.RangeCopier.copy.__func__

    def copy(cls, rng, start, length, fd, dst_offset, dst_path):
        copied.append((dst_offset, length))
        return real(cls, rng, start, length, fd, dst_offset, dst_path)

    monkeypatch.setattr(fileset.RangeCopier, "copy", classmethod(copy))
    path = tmp_path / "m.ninfer"
    sizes = {"a": 3 * UNIT + 777, "b": 3 * UNIT + 5}  # b starts inside a unit a ends in
    with ArtifactWriter(path, components={"text": Component({"architectures": ["Test"]},
                                                            resources={k: k for k in sizes})},
                        metadata={"name": "t"}, provenance={}) as w:
        for k, n in sizes.items():
            w.add_resource(k, n)
        w.plan()
        w.write_object("a", FileRange(src, 13, sizes["a"]))
        w.write_object("b", payload[5:5 + sizes["b"]])
        direct_ok = w._files._boundary is not None
        files = w._files
    with open_artifact(path) as art:
        assert art.resource("a") == payload[13:13 + sizes["a"]].tobytes()
        assert art.resource("b") == payload[5:5 + sizes["b"]].tobytes()
    if not direct_ok:  # no O_DIRECT on this file system: the whole range is copied in the kernel
        assert [n for _, n in copied] == [sizes["a"]]
    else:
        assert copied and all(off % UNIT == 0 and n % UNIT == 0 for off, n in copied)
        assert files.direct_bytes >= 2 * UNIT  # at least the unit a and b share, and b's own


@pytest.mark.parametrize("gathering", [1, 2, 32])
def test_boundary_units_write_each_unit_once_as_a_whole_or_buffered(monkeypatch, gathering):
    """Objects of random sizes and gaps written in random order, through runs that share a writer's
    BoundaryUnits; with few units gathered at once the oldest are written buffered (eviction)."""
    monkeypatch.setattr(direct, "MAX_GATHERING", gathering)
    rng = np.random.default_rng(gathering)
    head, pos, objects = 5000, 5000, []
    for _ in range(30):
        pos += int(rng.integers(0, 256))
        n = int(rng.choice([rng.integers(1, 4096), rng.integers(1, 3 * UNIT)]))
        objects.append((pos, pos + n))
        pos += n
    file_end = pos + 1234
    starts, ends = [a for a, _ in objects], [b for _, b in objects]

    def expected(index, unit):
        lo, hi = unit * UNIT, (unit + 1) * UNIT
        if lo < head or hi > file_end:
            return None
        return sum(max(0, min(hi, b) - max(lo, a)) for a, b in zip(starts, ends, strict=True))

    rec = Recorder()
    queue = DirectQueue(rec.direct)
    units = direct.BoundaryUnits(expected, rec.buffered, queue)
    want = bytearray(file_end)
    for k in rng.permutation(len(objects)):
        a, b = objects[k]
        data = rng.integers(1, 256, b - a, dtype=np.uint8)
        want[a:b] = data.tobytes()
        run = DirectRun(queue, units.add, rec.buffered)
        try:
            cut = int(rng.integers(0, b - a + 1))
            run.write(0, memoryview(data[:cut]), a)
            run.write(0, memoryview(data[cut:]), a + cut)
            run.close()
        finally:
            run.release()
    units.flush()
    queue.drain()
    got = rec.files[0]
    got.extend(bytes(file_end - len(got)))
    assert bytes(got) == bytes(want)
    _check_units_exclusive(rec)
    assert all(b <= file_end for _, _, b in rec.direct_ranges)
    if gathering == 32:  # room for every shared unit: all but the units with the header or the file's end
        assert {(a // UNIT) for _, a, _ in rec.buffered_ranges} <= {0, file_end // UNIT}


def test_without_memory_for_buffers_everything_is_written_buffered(monkeypatch):
    """Direct writes are a speed-up: where no buffer can be had (ulimit -v), a run writes its own units
    buffered and the shared ones are not assembled — the same bytes, and still no unit written both ways."""
    monkeypatch.setattr(direct, "_new_buffer", lambda size: None)
    rec = Recorder()
    queue = DirectQueue(rec.direct)
    units = direct.BoundaryUnits(lambda index, unit: UNIT, rec.buffered, queue)
    data = np.arange(3 * STAGE_BYTES + 77, dtype=np.uint64).astype(np.uint8) | 1
    run = DirectRun(queue, units.add, rec.buffered)
    try:
        run.write(0, memoryview(data[:STAGE_BYTES + 5]), 1000)
        run.write(0, memoryview(data[STAGE_BYTES + 5:]), 1000 + STAGE_BYTES + 5)
        run.close()
    finally:
        run.release()
    units.flush()
    queue.drain()
    assert not rec.direct_ranges
    assert bytes(rec.files[0][1000:]) == data.tobytes()


def test_queue_writes_in_the_caller_when_no_thread_can_start(monkeypatch):
    written = []

    class NoThread:
        def __init__(self, *args, **kwargs):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(direct.threading, "Thread", NoThread)
    queue = DirectQueue(lambda index, data, offset: written.append((threading.current_thread(), offset)))
    queue.submit(0, queue.buffer(), UNIT, 0)
    queue.drain()
    assert written == [(threading.current_thread(), 0)]


def test_durable_writer_without_memory_for_buffers_writes_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(direct, "_new_buffer", lambda size: None)
    files = _write(tmp_path / "m.ninfer")
    _check(tmp_path / "m.ninfer")
    assert files.direct_bytes == 0


def test_overlapping_chunks_in_a_shared_unit_are_a_typed_error(tmp_path):
    """Placed chunks that overlap inside a unit being assembled: the writer's own ``object_length`` error
    (the same rule its coverage check gives), not a crash, and nothing is published."""
    data = np.random.default_rng(9).integers(0, 256, 3 * UNIT, dtype=np.uint8)
    cut = 2 * UNIT + UNIT // 2 - 10_000  # inside the unit the object shares with the next one
    with pytest.raises(WriterError) as err:
        with ArtifactWriter(tmp_path / "m.ninfer", components={"text": Component(
                {"architectures": ["Test"]}, resources={k: k for k in "abc"})}, metadata={"name": "t"},
                provenance={}) as w:
            for k, n in (("a", UNIT // 2 + 12_345), ("b", data.size), ("c", 2 * UNIT)):
                w.add_resource(k, n)
            w.plan()
            direct_ok = w._files._boundary is not None
            w.write_object("a", np.ones(UNIT // 2 + 12_345, dtype=np.uint8))
            w.write_object("c", np.ones(2 * UNIT, dtype=np.uint8))
            w.write_object("b", [Placed(0, data[:cut]), Placed(cut - 1000, data[cut - 1000:])])
    assert err.value.rule == "object_length"
    # assembled units notice it first; through the page cache the object's coverage check does
    assert ("more than once" if direct_ok else "overlap at byte") in str(err.value)
    assert os.listdir(tmp_path) == []
