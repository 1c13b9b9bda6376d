"""Container benchmark: write a 2 GiB artifact and read it back, side by side with ``cp``.

Measured (``scale`` multiplies the 2 GiB):

- **write vs user-space copy, and vs cp** — the writer copies a page-cached source file into an artifact
  (64 MiB bf16 objects, streamed in 8 MiB chunks, written at planned offsets): a user-space producer,
  every byte through a buffer. Its limit is a user-space copy of the same bytes (the fastest of ``dd
  bs=8M``-style read/write and ``pread``/``pwrite`` into a file of the final size through one reused 8 MiB
  buffer, and ``shutil.copyfileobj`` with its own buffer, each in a child process timed like the writer's,
  after its imports): target
  ≥ 0.7× that. ``cp`` (in-kernel ``copy_file_range``, the limit of bytes copied unchanged) is reported next
  to it. Without ``fsync`` (page-cache speed: the writer's overhead) and durable (writer default
  ``fsync`` vs the copy + ``fsync`` and ``cp`` + ``sync FILE``). docs/io-speed.md §Benchmarks.
- **read vs cp** — every object streamed through a 1 MiB staging buffer with :meth:`Artifact.readinto`
  (two threads), as a loader uploads through a staging buffer; the peer is ``cp`` of the artifact to
  ``/dev/null`` (read through a small buffer). A sample of every
  object is checked against the source afterwards.
- **peak RSS** — of the writer and reader child processes (``wait4`` rusage), reported above the
  largest object; target under 300 MiB above it. The RSS of a child that only imports is in ``detail``.

Every timing, ours and the peer's, is the best of ``repeats`` runs, each after ``sync`` so that
write-back of an earlier file does not land in a later measurement. Targets: write ≥ 0.7× the user-space
copy, read ≥ 0.7× ``cp``. Files live in ``workdir`` and are removed at the end, also on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GiB = 1 << 30
MiB = 1 << 20
CHUNK = 8 * MiB
STAGE = 1 * MiB  # reader staging buffer (as a materializer uploads through a pinned staging buffer)
WRITE_THREADS = 1  # on 2 cores one writer thread is fastest; the other core runs kernel write-back
READ_THREADS = 2
TARGET_RATIO = 0.7
TARGET_RSS_MIB = 300


def _plan(scale: float) -> tuple[int, int]:
    """(object bytes, object count) for ``2 GiB * scale``: 64 MiB objects, at least 4 of them."""
    total = max(4 * MiB, int(2 * GiB * scale))
    obj = min(64 * MiB, max(MiB, total // 4 // MiB * MiB))
    return obj, max(1, total // obj)


def _make_source(path: Path, nbytes: int) -> None:
    import numpy as np

    block = np.random.default_rng(0).integers(0, 256, size=16 * MiB, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        for off in range(0, nbytes, len(block)):
            f.write(block[:min(len(block), nbytes - off)])


def _best_interleaved(peer, ours, repeats: int) -> tuple[float, float]:
    """Best of ``repeats`` of each, alternating peer and ours so that slow phases of a shared VM disk hit
    both sides alike."""
    peer_s, ours_s = [], []
    for _ in range(repeats):
        peer_s.append(peer())
        ours_s.append(ours())
    return min(peer_s), min(ours_s)


def _run_child(args: list[str]) -> tuple[dict, int]:
    """Run ``python -m bench.container <args>``; return its JSON output and peak RSS in bytes.

    The peak is the child's own ``VmHWM`` (``ru_maxrss`` would include the parent's RSS at fork time).
    """
    os.sync()
    proc = subprocess.run([sys.executable, "-m", "bench.container", *args], cwd=REPO, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench child {args[0]} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    info = json.loads(proc.stdout)
    return info, info.pop("peak_rss")


def _peak_rss() -> int:
    """This process's high-water RSS (``VmHWM``), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _timed(cmd: list[str]) -> float:
    os.sync()  # earlier dirty pages must not be flushed inside this measurement
    start = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - start


def _ratio_result(name: str, peer_s: float, ours_s: float, nbytes: int, detail: dict) -> dict:
    ratio = peer_s / ours_s
    return {"name": name, "value": ratio, "unit": "x cp", "target": f">= {TARGET_RATIO}",
            "met": ratio >= TARGET_RATIO,
            "detail": {"bytes": nbytes, "ours_s": round(ours_s, 3), "cp_s": round(peer_s, 3),
                       "ours_GBps": round(nbytes / ours_s / 1e9, 3), "cp_GBps": round(nbytes / peer_s / 1e9, 3),
                       **detail}}


def _user_ratio_result(name: str, user_s: float, ours_s: float, nbytes: int, detail: dict) -> dict:
    ratio = user_s / ours_s
    return {"name": name, "value": ratio, "unit": "x user-space copy", "target": f">= {TARGET_RATIO}",
            "met": ratio >= TARGET_RATIO,
            "detail": {"bytes": nbytes, "ours_s": round(ours_s, 3), "ours_GBps": round(nbytes / ours_s / 1e9, 3),
                       **detail}}


def _best_of_three(cp, user, ours, repeats: int) -> tuple[float, float, float]:
    """Best of ``repeats`` of each of three, interleaved (see :func:`_best_interleaved`)."""
    times: tuple[list, list, list] = ([], [], [])
    for _ in range(repeats):
        for acc, run in zip(times, (cp, user, ours), strict=True):
            acc.append(run())
    return min(times[0]), min(times[1]), min(times[2])


def _rss_result(name: str, rss: int, largest: int, baseline: int) -> dict:
    above = (rss - largest) / MiB
    return {"name": name, "value": round(above, 1), "unit": "MiB above largest object",
            "target": f"< {TARGET_RSS_MIB}", "met": above < TARGET_RSS_MIB,
            "detail": {"peak_rss_MiB": round(rss / MiB, 1), "largest_object_MiB": largest / MiB,
                       "import_only_rss_MiB": round(baseline / MiB, 1)}}


def _cp_seconds(src: Path, copy: Path, durable: bool) -> float:
    os.sync()
    start = time.perf_counter()
    subprocess.run(["cp", str(src), str(copy)], check=True)
    if durable:
        subprocess.run(["sync", str(copy)], check=True)  # fsync(copy), inside the same measurement
    seconds = time.perf_counter() - start
    copy.unlink()
    return seconds


def _copy_seconds(src: Path, copy: Path, durable: bool) -> float:
    """The user-space peer, timed in a child process like the writer: the fastest of a read/write loop through
    one 8 MiB buffer (``dd bs=8M``), ``pread``/``pwrite`` of the same buffer into a file of the final size
    (the writer's own system calls, nothing else) and ``shutil.copyfileobj`` (its 64 KiB buffer: small
    writes, which this VM's page cache fills faster than 8 MiB ones, docs/io-speed.md §Write size);
    + ``fsync`` when durable."""
    best = []
    for how in ("stream", "positioned", "copyfileobj"):
        info, _ = _run_child(["copy", str(src), str(copy), str(int(durable)), how])
        copy.unlink()
        best.append(info["seconds"])
    return min(best)


def _write_seconds(src: Path, entry: Path, obj: int, count: int, durable: bool, peaks: list[int]) -> float:
    _remove_artifact(entry)
    info, rss = _run_child(["write", str(src), str(entry), str(obj), str(count), str(int(durable))])
    peaks.append(rss)
    return info["seconds"]


def _read_seconds(src: Path, entry: Path, peaks: list[int], checked: list[int]) -> float:
    info, rss = _run_child(["read", str(src), str(entry)])
    peaks.append(rss)
    checked.append(info["checked"])
    return info["seconds"]


def run(workdir: Path, scale: float = 1.0, repeats: int = 5) -> list[dict]:
    """Measure (best of ``repeats`` for every timing, ours and the peer's alike)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    obj, count = _plan(scale)
    nbytes = obj * count
    src, copy = workdir / "source.bin", workdir / "copy.bin"
    entry = workdir / "bench.ninfer"
    results = []
    write_peaks: list[int] = []
    read_peaks: list[int] = []
    checked: list[int] = []
    try:
        _make_source(src, nbytes)
        _, baseline = _run_child(["baseline"])
        for durable in (False, True):
            cp_s, user_s, ours_s = _best_of_three(lambda d=durable: _cp_seconds(src, copy, d),
                                                  lambda d=durable: _copy_seconds(src, copy, d),
                                                  lambda d=durable: _write_seconds(src, entry, obj, count, d,
                                                                                   write_peaks),
                                                  repeats)
            detail = {"objects": count, "repeats": repeats, "user_copy_s": round(user_s, 3),
                      "user_copy_GBps": round(nbytes / user_s / 1e9, 3), "ratio_to_cp": round(cp_s / ours_s, 3),
                      "user_copy_ratio_to_cp": round(cp_s / user_s, 3)}
            name = "durable write (fsync) vs user-space copy + fsync" if durable else "write vs user-space copy"
            results.append(_user_ratio_result(name, user_s, ours_s, nbytes, {**detail, "cp_s": round(cp_s, 3)}))
            name = "durable write (fsync) vs cp + sync" if durable else "write vs cp"
            results.append({**_ratio_result(name, cp_s, ours_s, nbytes, detail), "target": None, "met": None})
        results.append(_rss_result("writer peak RSS", max(write_peaks), obj, baseline))
        cp_read_s, read_s = _best_interleaved(lambda: _timed(["cp", str(entry), "/dev/null"]),
                                              lambda: _read_seconds(src, entry, read_peaks, checked), repeats)
        results.append(_ratio_result("read vs cp", cp_read_s, read_s, nbytes,
                                     {"sample_checked": min(checked), "repeats": repeats}))
        results.append(_rss_result("reader peak RSS", max(read_peaks), obj, baseline))
    finally:
        for path in (src, copy):
            path.unlink(missing_ok=True)
        _remove_artifact(entry)
        for path in workdir.glob(".bench.ninfer*"):  # temporaries of a failed writer child
            path.unlink()
    return results


def _remove_artifact(entry: Path) -> None:
    for path in [entry, *entry.parent.glob(f"{entry.name}.part-*")]:
        path.unlink(missing_ok=True)


# ---- child processes (measured for time and peak RSS) -----------------------------------------------


def _child_write(src: str, entry: str, obj: int, count: int, durable: bool) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from ninfer_core import ArtifactWriter, Component, codecs  # noqa: F401  (imports: before the clock starts)

    start = time.perf_counter()
    fd = os.open(src, os.O_RDONLY)
    cols = 1024
    with ArtifactWriter(entry, components={"bench": Component({"architectures": ["Bench"]})},
                        durable=durable, artifact_id="00" * 16) as writer:
        for i in range(count):
            writer.add_tensor(f"w.{i}", (obj // 2 // cols, cols), "bf16", "contiguous_le_v1")
        writer.plan()

        def chunks(i: int):  # one reused buffer per object: the writer consumes each chunk before the next
            buf = memoryview(bytearray(CHUNK))
            for off in range(0, obj, CHUNK):
                n = os.preadv(fd, [buf[:min(CHUNK, obj - off)]], i * obj + off)
                yield buf[:n]

        with ThreadPoolExecutor(WRITE_THREADS) as pool:
            for f in [pool.submit(writer.write_object, f"w.{i}", chunks(i)) for i in range(count)]:
                f.result()
    os.close(fd)
    return {"seconds": time.perf_counter() - start}


def _child_read(src: str, entry: str) -> dict:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ninfer_core import open_artifact

    start = time.perf_counter()
    with open_artifact(entry) as art:
        local = threading.local()

        def load(o) -> None:  # each thread streams objects through its own staging buffer
            if not hasattr(local, "buf"):
                local.buf = memoryview(bytearray(STAGE))
            for off in range(0, o.bytes, STAGE):
                art.readinto(o.offset + off, local.buf[:min(STAGE, o.bytes - off)])

        with ThreadPoolExecutor(READ_THREADS) as pool:
            list(pool.map(load, art.objects))
        seconds = time.perf_counter() - start
        checked = 0
        fd = os.open(src, os.O_RDONLY)
        for i, o in enumerate(art.objects):  # the payload holds the source objects in order
            for off in (0, o.bytes // 2, o.bytes - 4096):
                if bytes(art.read_range(o.offset + off, 4096)) != os.pread(fd, 4096, i * o.bytes + off):
                    raise RuntimeError(f"object {o.id} differs from the source at {off}")
                checked += 1
        os.close(fd)
    return {"seconds": seconds, "checked": checked}


def _child_copy(src: str, dst: str, durable: bool, how: str) -> dict:
    """A user-space copy: through one reused 8 MiB buffer, ``stream`` reads then writes (``dd bs=8M``),
    ``positioned`` ``pread``s and ``pwrite``s into a file first set to its final size; ``copyfileobj`` is
    ``shutil.copyfileobj`` with its own buffer."""
    start = time.perf_counter()
    buf = memoryview(bytearray(CHUNK))
    with open(src, "rb", buffering=0) as fin, open(dst, "wb", buffering=0) as fout:
        if how == "copyfileobj":
            shutil.copyfileobj(fin, fout)
        elif how == "stream":
            while n := fin.readinto(buf):
                done = 0
                while done < n:
                    done += fout.write(buf[done:n])
        else:
            size, off = os.fstat(fin.fileno()).st_size, 0
            os.ftruncate(fout.fileno(), size)
            while n := os.preadv(fin.fileno(), [buf], off):
                done = 0
                while done < n:
                    done += os.pwrite(fout.fileno(), buf[done:n], off + done)
                off += n
        if durable:
            os.fsync(fout.fileno())
    return {"seconds": time.perf_counter() - start}


def _child(argv: list[str]) -> dict:
    if argv[0] == "copy":
        return _child_copy(argv[1], argv[2], argv[3] == "1", argv[4])
    if argv[0] == "baseline":
        import ninfer_core  # noqa: F401  (the imports every child pays for)

        return {}
    if argv[0] == "write":
        return _child_write(argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5] == "1")
    return _child_read(argv[1], argv[2])


if __name__ == "__main__":
    result = _child(sys.argv[1:])
    result["peak_rss"] = _peak_rss()
    sys.stdout.write(json.dumps(result))
