"""Unchanged source bytes copied in the kernel (docs/io-speed.md §Unchanged bytes): a conversion whose
pieces copy BF16/F32 rows or GGML blocks as they are hands the writer file ranges, and writes the same
files as the user-space copy, also when reordered rows are copied run by run."""

from __future__ import annotations

import os

import pytest

from converters.pipeline import produce, unchanged
from converters.pipeline.convert import convert
from tests.support.kernel_copies import count_kernel_copies
from tinymodels import qwen35

AID = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    hf = d / "hf"
    qwen35.write_hf_dir(hf, qwen35.config(), dtype="bf16")
    gguf = d / "q35.F32.gguf"
    qwen35.write_gguf(gguf, qwen35.config(), matrix_type="F32")
    return {"hf": hf, "gguf": gguf}


def converted(tmp_path, source, name: str, monkeypatch, *, kernel: bool, min_run: int | None = None,
              **kw) -> tuple[dict[str, bytes], int]:
    with monkeypatch.context() as m:
        copies = count_kernel_copies(m)
        if not kernel:
            m.setattr(produce, "unchanged_ranges", lambda *a: None)
        if min_run is not None:
            m.setattr(unchanged, "MIN_RUN_BYTES", min_run)
        out = tmp_path / name
        out.mkdir()
        convert(source, out / "m.ninfer", recipe="exact", artifact_id=AID, **kw)
    return {n: (out / n).read_bytes() for n in sorted(os.listdir(out))}, sum(copies)


@pytest.mark.parametrize("which", ["hf", "gguf"])
def test_kernel_copies_write_the_same_files(tmp_path, sources, monkeypatch, which):
    want, none = converted(tmp_path, sources[which], "user", monkeypatch, kernel=False)
    got, copied = converted(tmp_path, sources[which], "kernel", monkeypatch, kernel=True, workers=2)
    runs, copied_runs = converted(tmp_path, sources[which], "runs", monkeypatch, kernel=True, min_run=1)
    assert none == 0
    assert copied > 0 and copied_runs > copied  # row runs of reordered tensors copied too when allowed
    assert got == want and runs == want


def test_kernel_copies_across_a_split(tmp_path, sources, monkeypatch):
    want, _ = converted(tmp_path, sources["hf"], "user", monkeypatch, kernel=False, max_file_bytes=300_000)
    got, copied = converted(tmp_path, sources["hf"], "kernel", monkeypatch, kernel=True, max_file_bytes=300_000)
    assert len(got) > 1 and copied > 0
    assert got == want
