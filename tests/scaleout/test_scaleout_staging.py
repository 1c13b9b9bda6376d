"""Staged artifacts (``ninfer_core.container.staging``): planned once, written from other processes, sealed.

The reference is the in-process :class:`ArtifactWriter` with the same declarations and ID; the staged
copy is written by two child processes that only know the staging directory.
"""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest

from ninfer_core import ArtifactWriter, Component, open_artifact, validate
from ninfer_core.container import StagedArtifact, staging_dir_for
from ninfer_core.errors import WriterError

OBJECTS = {f"w.{i}": (np.arange(900 + 131 * i, dtype=np.float32) * (i + 1)) for i in range(7)}


def declared(path, **kw) -> ArtifactWriter:
    w = ArtifactWriter(path, components={"t": Component({"architectures": ["T"]})}, provenance={"p": "x" * 40},
                       max_file_bytes=3 * 4096, durable=False, **kw)
    for oid, x in OBJECTS.items():
        w.add_tensor(oid, x.shape, "fp32", "contiguous_le_v1")
    w.add_resource("r.tok", 777)
    return w


def data(oid: str):
    return b"\x07" * 777 if oid == "r.tok" else OBJECTS[oid]


def files_of(directory) -> dict[str, bytes]:
    return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory)) if not n.startswith(".")}


def _child(staging: str, ids: list[str]) -> None:
    staged = StagedArtifact.open(staging)
    for oid in ids:
        staged.write_object(oid, [memoryview(data(oid)).cast("B")], note={"by": os.getpid()})
    staged.close()


@pytest.mark.parametrize("from_content", [False, True])
def test_two_processes_then_seal_equals_in_process_writer(tmp_path, from_content):
    kw = {"artifact_id_from_content": True} if from_content else {"artifact_id": "22" * 16}
    (tmp_path / "ref").mkdir()
    ref = declared(tmp_path / "ref" / "m.ninfer", **kw)
    ref.plan()
    for oid in [*OBJECTS, "r.tok"]:
        ref.write_object(oid, data(oid))
    ref.replace_provenance({"p": "measured"})
    ref.commit()

    (tmp_path / "st").mkdir()
    entry = tmp_path / "st" / "m.ninfer"
    staged = declared(entry, **kw).stage(staging_dir_for(entry))
    ids = [*OBJECTS, "r.tok"]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_child, args=(str(staged.staging), ids[i::2])) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    staged = StagedArtifact.open(staging_dir_for(entry))
    assert staged.missing() == []
    assert len({m["note"]["by"] for m in staged.markers().values()}) == 2
    staged.seal(provenance={"p": "measured"})
    assert files_of(tmp_path / "st") == files_of(tmp_path / "ref")
    assert len(files_of(tmp_path / "st")) > 1 and not staging_dir_for(entry).exists()
    assert validate(entry) == []
    with open_artifact(entry) as art:
        assert np.array_equal(art.object_array("w.3"), OBJECTS["w.3"])


def test_marker_only_after_all_bytes_and_rewrite_is_idempotent(tmp_path):
    entry = tmp_path / "m.ninfer"
    staged = declared(entry, artifact_id="33" * 16).stage(staging_dir_for(entry))
    with pytest.raises(WriterError) as e:
        staged.write_object("w.1", [OBJECTS["w.1"][:10]])
    assert e.value.rule == "object_length" and "w.1" not in staged.markers()
    with pytest.raises(WriterError) as e:
        staged.write_object("w.1", [OBJECTS["w.1"], b"\0"])
    assert e.value.rule == "object_length"
    with pytest.raises(WriterError) as e:
        staged.write_object("nope", [b""])
    assert e.value.rule == "object_unknown"
    for oid in [*OBJECTS, "r.tok"]:
        staged.write_object(oid, [data(oid)])
    staged.write_object("w.1", [data("w.1")])  # again: same bytes, same marker
    with pytest.raises(WriterError) as e:
        staged.seal(provenance={"p": "y" * 5000})  # outgrows the planned JSON
    assert e.value.rule == "json_reservation" and not entry.exists()
    staged.seal()
    assert validate(entry) == []


def test_seal_lists_missing_and_staging_is_exclusive(tmp_path):
    entry = tmp_path / "m.ninfer"
    staged = declared(entry).stage(staging_dir_for(entry))
    with pytest.raises(Exception) as e:
        declared(entry).stage(staging_dir_for(entry))
    assert getattr(e.value, "rule", None) == "target_exists"
    staged.write_object("w.0", [data("w.0")])
    with pytest.raises(WriterError) as e:
        staged.seal()
    assert e.value.rule == "coverage_incomplete" and "'w.1'" in str(e.value)
    assert not entry.exists() and not (tmp_path / "m.ninfer.part-0001").exists()
    staged.discard()
    assert os.listdir(tmp_path) == []
    with pytest.raises(WriterError) as e:
        StagedArtifact.open(staging_dir_for(entry))
    assert e.value.rule == "staging_missing"
