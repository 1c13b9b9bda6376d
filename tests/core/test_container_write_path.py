"""How the in-process writer puts bytes into the page cache (docs/io-speed.md §Write path, §Write size): no
``pwrite`` larger than ``WRITE_BYTES``, and one ``pwrite`` at a time per file however many threads write
objects at once — and the bytes are the same. (A durable writer's whole units bypass the page cache:
tests/core/test_container_direct.py.)"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ninfer_core import ArtifactWriter, Component, open_artifact
from ninfer_core.container.filecopy import WRITE_BYTES

RNG = np.random.default_rng(11)
OBJECTS = {f"r.{i}": RNG.integers(0, 256, 3 * WRITE_BYTES + 1000 * i + 7, dtype=np.uint8) for i in range(4)}


def test_writes_are_bounded_and_one_at_a_time_per_file(tmp_path, monkeypatch):
    real, lock = os.pwrite, threading.Lock()
    sizes: list[int] = []
    active: Counter = Counter()
    most: Counter = Counter()

    def pwrite(fd, data, offset):
        with lock:
            active[fd] += 1
            most[fd] = max(most[fd], active[fd])
        try:
            time.sleep(0.002)  # widen the window in which a second writer of the same file would show
            n = real(fd, data, offset)
            sizes.append(n)
            return n
        finally:
            with lock:
                active[fd] -= 1

    monkeypatch.setattr(os, "pwrite", pwrite)
    path = tmp_path / "m.ninfer"
    with ArtifactWriter(path, components={"text": Component({"architectures": ["Test"]},
                                                            resources={k: k for k in OBJECTS})},
                        metadata={"name": "t"}, provenance={}, durable=False) as w:
        for k, v in OBJECTS.items():
            w.add_resource(k, v.size)
        w.plan()
        with ThreadPoolExecutor(4) as pool:  # each object one chunk of more than 3 x WRITE_BYTES
            list(pool.map(lambda kv: w.write_object(kv[0], kv[1]), OBJECTS.items()))
    assert max(sizes) == WRITE_BYTES
    assert max(most.values()) == 1
    with open_artifact(path) as art:
        for k, v in OBJECTS.items():
            assert art.resource(k) == v.tobytes()
