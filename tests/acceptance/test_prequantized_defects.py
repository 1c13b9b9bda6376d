"""Seeded defects of a kept NVFP4 object, each caught by gate 4 (``verify.values``) against the library's own
dequantization (docs/acceptance.md §Prequantized sources).

A clean artifact of the compressed-tensors NVFP4 fixture (``exact``: every projection kept bit for bit) is
rewritten with one object's bytes changed the way a faulty transcoder would: two block scales swapped, the
global scale stored per the wrong convention (``1/g`` instead of ``g``), the block-scale plane written
linearly instead of in 128x4 tiles; and, on Qwen3.5's gated query gathered from the heads of ``q_proj``
(docs/prequantized.md §Row gathers), two heads' block-scale rows swapped — a gather that moved the codes but
not their scales. Sizes and codec validity stay right; only a comparison of values with the library's rule can
see them.
"""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from ninfer_core import open_artifact
from tests.support.prequantized import FIXTURES, convert_fixture, object_bytes, rewrite_bytes

SOURCE = FIXTURES / "ct-nvfp4"
OBJECT = "text/layers/0/mlp/gate"  # nvfp4 [512, 256], one divisor


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    path = convert_fixture("ct-nvfp4", tmp_path_factory.mktemp("clean") / "a.ninfer", "exact")
    with open_artifact(path) as art:
        o = art.object(OBJECT)
        assert o.format == "nvfp4" and o.divisors == 1
        geometry = (*o.shape, object_bytes(art, OBJECT))
    return path, geometry


def planes(data: bytes, n: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    buf = np.frombuffer(data, dtype=np.uint8).copy()
    c, s = n * k // 2, n * k // 16
    return buf, buf[c:c + s], buf[c + s:c + s + 4]


def values_failure(report, where: str = "mlp/gate") -> set[str]:
    """Codes of the ERROR findings on ``where`` of the gate whose registry id is ``verify.values`` (it must fail)."""
    (gate,) = [g for g in report.gates if g.id == "verify.values"]
    assert gate.status == "fail"
    return {i.code for i in gate.issues if i.severity == "ERROR" and i.path.endswith(where)}


def test_the_clean_artifact_passes(clean):
    path, _ = clean
    assert verify(path, SOURCE).result == "pass"


def test_a_swapped_block_scale_fails_the_values_gate(clean, tmp_path):
    path, (n, k, data) = clean

    def swap(b: bytes) -> bytes:
        buf, scales, _ = planes(b, n, k)
        # bytes i, i + 1 (i even) of a tile are blocks c, c + 1 of one row (layouts §3): two that differ
        i = next(i for i in range(0, scales.size, 2) if scales[i] != scales[i + 1])
        scales[i], scales[i + 1] = scales[i + 1], scales[i]
        return buf.tobytes()

    bad = rewrite_bytes(path, tmp_path / "swap.ninfer", {OBJECT: swap})
    assert "VERIFY_VALUE_NOT_EXACT" in values_failure(verify(bad, SOURCE))


def test_a_divisor_per_the_wrong_convention_fails_the_values_gate(clean, tmp_path):
    path, (n, k, data) = clean

    def inverted(b: bytes) -> bytes:
        buf, _, divisor = planes(b, n, k)
        g = divisor.view("<f4")[0]
        divisor[:] = np.array([np.float32(1) / g], dtype="<f4").view(np.uint8)  # 1/g: ModelOpt's multiplier
        return buf.tobytes()

    bad = rewrite_bytes(path, tmp_path / "inverted.ninfer", {OBJECT: inverted})
    report = verify(bad, SOURCE)
    assert "VERIFY_VALUE_NOT_EXACT" in values_failure(report)
    with open_artifact(bad) as art:
        assert art.object_array(OBJECT).std() > 1000 * np.asarray(art.object_array("text/layers/0/mlp/up")).std()


def test_a_linear_block_scale_plane_fails_the_values_gate(clean, tmp_path):
    path, (n, k, data) = clean

    def linear(b: bytes) -> bytes:
        buf, scales, _ = planes(b, n, k)
        c = k // 64  # tiles back to (row, block) order, written row-major: the swizzle left out
        rows = scales.reshape(-1, c, 32, 4, 4).transpose(0, 3, 2, 1, 4).reshape(n, k // 16)
        assert not np.array_equal(rows.reshape(-1), scales)
        scales[:] = rows.reshape(-1)
        return buf.tobytes()

    bad = rewrite_bytes(path, tmp_path / "linear.ninfer", {OBJECT: linear})
    assert "VERIFY_VALUE_NOT_EXACT" in values_failure(verify(bad, SOURCE))


@pytest.mark.parametrize("scheme", ["ct-nvfp4-qwen35", "modelopt-nvfp4-qwen35"])
def test_two_heads_scale_rows_swapped_in_a_gathered_query_fail_the_values_gate(tmp_path, scheme):
    source, query = FIXTURES / scheme, "text/layers/1/attention/query"  # 4 heads x 64 rows of q_proj's 512
    path = convert_fixture(scheme, tmp_path / "clean.ninfer", "prequantized")
    with open_artifact(path) as art:
        o = art.object(query)
        assert o.format == "nvfp4" and art.provenance["objects"][query]["exactness"] == "bit-exact"
        n, k = o.shape
    assert verify(path, source, sweep=True).result == "pass"

    def swap_heads(b: bytes) -> bytes:
        buf, scales, _ = planes(b, n, k)
        c = k // 64  # the tiles back to rows (layouts §3), heads 0 and 1 (rows 0-63, 64-127) swapped, re-tiled
        rows = scales.reshape(-1, c, 32, 4, 4).transpose(0, 3, 2, 1, 4).reshape(n, k // 16).copy()
        assert not np.array_equal(rows[:64], rows[64:128])
        rows[:64], rows[64:128] = rows[64:128].copy(), rows[:64].copy()
        scales[:] = rows.reshape(-1, 4, 32, c, 4).transpose(0, 3, 2, 1, 4).reshape(-1)
        return buf.tobytes()

    bad = rewrite_bytes(path, tmp_path / "swapped.ninfer", {query: swap_heads})
    assert "VERIFY_VALUE_NOT_EXACT" in values_failure(verify(bad, source, sweep=True), "attention/query")
