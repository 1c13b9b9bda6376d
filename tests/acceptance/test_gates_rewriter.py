"""The rewriter of tests/support/gates.py, which makes the seeded defects of the acceptance tests: an unchanged
rewrite keeps every object byte for byte, and an edit lands exactly on the rows asked for."""

from __future__ import annotations

import numpy as np

from ninfer_core import open_artifact
from tests.support.gates import (
    HEAD_DIM,
    converted,
    qwen35_gguf,
    rewrite,
    swap_blocks,
)

# --- the rewriter itself ----------------------------------------------------------------------------------


def test_unchanged_rewrite_keeps_every_object_byte_for_byte(tmp_path):
    src = converted(qwen35_gguf(tmp_path), tmp_path / "a.ninfer", "groupwise-int")
    dst = rewrite(src, tmp_path / "b.ninfer")
    with open_artifact(src) as a, open_artifact(dst) as b:
        assert [o.id for o in a.objects] == [o.id for o in b.objects]
        for o in a.objects:
            assert bytes(a.read_range(o.offset, o.bytes)) == bytes(b.read_range(b.object(o.id).offset, o.bytes))
        assert a.provenance == b.provenance and a.artifact_id != b.artifact_id


def test_edit_changes_only_the_rows_asked_for(tmp_path):
    src = converted(qwen35_gguf(tmp_path), tmp_path / "a.ninfer", "bf16")
    oid = "text/layers/3/attention/query"
    dst = rewrite(src, tmp_path / "b.ninfer", edit={oid: lambda x: swap_blocks(x, 0, 1, HEAD_DIM)})
    with open_artifact(src) as a, open_artifact(dst) as b:
        x, y = a.object_array(oid), b.object_array(oid)
        assert np.array_equal(y[:HEAD_DIM], x[HEAD_DIM:2 * HEAD_DIM]) and np.array_equal(y[2 * HEAD_DIM:], x[2 * HEAD_DIM:])
        assert not np.array_equal(x, y)


