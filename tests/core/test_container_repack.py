"""Re-splitting (container spec §11.4 last paragraph) and ``convert repack``.

split → join → split keeps the directory record for record and the logical payload byte for byte;
only ``files`` and ``artifact_id`` change. Values are compared after every step.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from converters.cli import main as cli_main
from ninfer_core import ArtifactWriter, Binding, Component, open_artifact, repack, validate
from ninfer_core.errors import ArtifactExistsError, ReadError
from tests.support.container import write_split

RNG = np.random.default_rng(3)
X = (RNG.standard_normal((128, 256))).astype(np.float32)


def make_source(path, max_file_bytes=3 * 4096):
    from ninfer_core import codecs

    q4 = codecs.encode("q4_g64_fp16", "row_split_k128_v1", X)
    with ArtifactWriter(path, components={"text": Component({"architectures": ["T"]}, resources={"t": "r.t"})},
                        bindings={"w": Binding.whole("w.q4"), "v": Binding.of_parts([("w.v", (8, 24))])},
                        uses=[{"parameter": "w", "input": "x", "activation_policy": "AllowA4"}],
                        metadata={"name": "src"}, provenance={"p": 1}, max_file_bytes=max_file_bytes) as w:
        w.add_resource("r.t", 777)
        w.add_tensor("w.q4", X.shape, "q4_g64_fp16", "row_split_k128_v1")
        w.add_tensor("w.v", (32,), "fp32", "contiguous_le_v1")
        w.write_object("w.q4", q4)
        w.write_object("w.v", np.arange(32, dtype="<f4"))
        w.write_object("r.t", bytes(range(256)) * 3 + b"123456789")
    return path


def snapshot(path):
    with open_artifact(path) as art:
        d = art.directory.to_json()
        files = d.pop("files")
        return {"id": art.artifact_id, "dir": d, "payload": bytes(art.read_range(0, art.payload_bytes)),
                "w": art.binding_array("w"), "v": art.binding_array("v"), "files": files,
                "sizes": [os.path.getsize(f.location) for f in art.files]}


def test_split_join_split_round_trip(tmp_path):
    src = snapshot(make_source(tmp_path / "src.ninfer"))
    assert len(src["files"]) > 2
    joined_path = repack(tmp_path / "src.ninfer", tmp_path / "joined.ninfer")
    joined = snapshot(joined_path)
    assert len(joined["files"]) == 1
    limit = 2 * 4096 + 1000
    resplit = snapshot(repack(joined_path, tmp_path / "resplit.ninfer", max_file_bytes=limit))
    assert len(resplit["files"]) > len(src["files"]) and max(resplit["sizes"]) <= limit
    for other in (joined, resplit):
        assert other["dir"] == src["dir"]  # objects, bindings, uses, components, metadata kept
        assert other["payload"] == src["payload"]
        assert np.array_equal(other["w"], src["w"]) and np.array_equal(other["v"], src["v"])
        assert other["id"] != src["id"]
    assert joined["id"] != resplit["id"]
    assert np.abs(src["w"] - X).max() < np.abs(X).max() / 7
    for name in ("joined.ninfer", "resplit.ninfer"):
        assert validate(tmp_path / name) == []


def test_repack_progress_and_bounded_chunks(tmp_path):
    make_source(tmp_path / "src.ninfer")
    seen = []
    out = repack(tmp_path / "src.ninfer", tmp_path / "o.ninfer", progress=seen.append, chunk_bytes=4000)
    with open_artifact(out) as art:
        assert sum(seen) == art.payload_bytes and max(seen) <= 4000


def test_repack_refuses_existing_target(tmp_path):
    make_source(tmp_path / "src.ninfer")
    (tmp_path / "o.ninfer").write_bytes(b"keep")
    with pytest.raises(ArtifactExistsError):
        repack(tmp_path / "src.ninfer", tmp_path / "o.ninfer")
    assert (tmp_path / "o.ninfer").read_bytes() == b"keep"


def test_repack_of_incomplete_source_writes_nothing(tmp_path):
    src = write_split(tmp_path, [100, 200, 4], skip=(2,))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ReadError) as info:
        repack(src, out / "o.ninfer")
    assert info.value.rule == "part_missing"
    assert os.listdir(out) == []


def test_cli_repack(tmp_path, capsys):
    make_source(tmp_path / "src.ninfer")
    code = cli_main(["repack", str(tmp_path / "src.ninfer"), str(tmp_path / "o.ninfer"), "--max-file-bytes",
                     "12KiB", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["source"]["artifact_id"] != out["artifact_id"]
    assert all(f["file_bytes"] <= 12 * 1024 for f in out["files"]) and len(out["files"]) > 2
    assert out["objects"] == 3 and out["objects_by_encoding"]["resource"] == 1
    code = cli_main(["repack", str(tmp_path / "o.ninfer"), str(tmp_path / "j.ninfer")])
    human = capsys.readouterr().out
    assert code == 0 and "j.ninfer" in human and "payload bytes" in human
    assert snapshot(tmp_path / "j.ninfer")["payload"] == snapshot(tmp_path / "src.ninfer")["payload"]


def test_cli_repack_errors(tmp_path, capsys):
    make_source(tmp_path / "src.ninfer")
    (tmp_path / "o.ninfer").write_bytes(b"keep")
    assert cli_main(["repack", str(tmp_path / "src.ninfer"), str(tmp_path / "o.ninfer")]) == 1
    assert "already exists" in capsys.readouterr().err
    assert cli_main(["repack", str(tmp_path / "src.ninfer"), str(tmp_path / "p.ninfer"), "--max-file-bytes",
                     "100"]) == 1
    assert "too small" in capsys.readouterr().err
    assert not (tmp_path / "p.ninfer").exists()
    assert cli_main(["repack", str(tmp_path / "nope.ninfer"), str(tmp_path / "q.ninfer")]) == 1
    assert cli_main(["repack", str(tmp_path / "src.ninfer"), str(tmp_path / "q.ninfer"), "--max-file-bytes",
                     "lots"]) == 2
    assert sorted(n for n in os.listdir(tmp_path) if not n.startswith("src.ninfer")) == ["o.ninfer"]
