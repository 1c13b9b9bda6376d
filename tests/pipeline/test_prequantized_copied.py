"""Kept NVFP4 codes copied file to file (docs/io-speed.md §Prequantized bench): a conversion that keeps a
prequantized NVFP4 weight hands the in-process writer the source's code rows as file ranges — the kernel copy
of unchanged tensors — and makes only the block scales and divisors. The files are those of the user-space
transcode (``code_span`` switched off) for dense objects, expert banks placed and in shares, and content-derived
IDs; FP8 rows, whose codes are read for their check anyway, are not copied, and are still checked."""

from __future__ import annotations

import os
import shutil

import pytest

from converters.pipeline import convert as conversion
from converters.pipeline.convert import convert
from converters.sources import open_hf_dir
from converters.sources.prequantized.targets import CODE_COPY
from converters.sources.prequantized.weight import QuantizedWeight
from ninfer_core.errors import EncodingError
from tests.support.kernel_copies import count_kernel_copies
from tests.support.prequantized import FIXTURES, schemes

AID = "0123456789abcdef0123456789abcdef"
SCHEMES = [s for s in ("ct-nvfp4", "ct-nvfp4a16", "ct-fp8-channel", "ct-fp8-tensor", "modelopt-nvfp4", "modelopt-fp8",
                       "ct-nvfp4-moe", "modelopt-nvfp4-moe-fused", "qwen-fp8-block-moe") if s in schemes()]


def converted(tmp_path, scheme: str, name: str, monkeypatch, *, copy: bool, share_bytes: int | None = None,
              **kw) -> tuple[dict[str, bytes], int]:
    """The files of ``scheme`` converted with ``exact`` and the bytes the writer copied in the kernel."""
    with monkeypatch.context() as m:
        copies = count_kernel_copies(m)
        if not copy:
            m.setattr(QuantizedWeight, "code_span", lambda self, fmt, r0, r1: None)
        if share_bytes is not None:
            m.setattr(conversion, "SHARE_BYTES", share_bytes)
        out = tmp_path / name
        out.mkdir()
        convert(FIXTURES / scheme, out / "m.ninfer", recipe="exact", **kw)
    return {n: (out / n).read_bytes() for n in sorted(os.listdir(out))}, sum(copies)


def kept_code_bytes(scheme: str) -> int:
    """Bytes of the code tensors of the weights ``exact`` keeps in a format whose code plane is their codes."""
    with open_hf_dir(FIXTURES / scheme) as src:
        return sum(qw.parts[qw.CODES].byte_length for qw in src.quantized_weights.values()
                   if (qw.family, next(iter(qw.exact_targets()))) in CODE_COPY)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_kept_codes_are_copied_in_the_kernel(tmp_path, monkeypatch, scheme):
    want, before = converted(tmp_path, scheme, "user", monkeypatch, copy=False, artifact_id=AID)
    got, after = converted(tmp_path, scheme, "kernel", monkeypatch, copy=True, artifact_id=AID, workers=2)
    assert got == want
    assert after - before == kept_code_bytes(scheme)  # every kept NVFP4 code byte, and nothing else
    assert (after > before) == ("nvfp4" in scheme)


def test_kept_banks_in_shares_copy_their_codes(tmp_path, monkeypatch):
    """Experts of a kept NVFP4 bank cut into shares written at once: their code rows as placed file ranges."""
    want, before = converted(tmp_path, "ct-nvfp4-moe", "user", monkeypatch, copy=False, artifact_id=AID, workers=1,
                             max_file_bytes=400_000)
    got, after = converted(tmp_path, "ct-nvfp4-moe", "shares", monkeypatch, copy=True, share_bytes=0,
                           artifact_id=AID, workers=3, max_file_bytes=400_000)
    assert len(got) > 1 and got == want  # split across files too
    assert after - before == kept_code_bytes("ct-nvfp4-moe")


def test_a_content_derived_id_hashes_the_copied_codes(tmp_path, monkeypatch):
    """A writer that derives the ID from the content reads the file ranges it is handed: same files."""
    want, _ = converted(tmp_path, "ct-nvfp4", "user", monkeypatch, copy=False, artifact_id_from_content=True)
    got, copied = converted(tmp_path, "ct-nvfp4", "kernel", monkeypatch, copy=True, artifact_id_from_content=True)
    assert copied == 0 and got == want


def test_a_nan_fp8_code_is_still_refused(tmp_path):
    """A NaN E4M3 code of a kept FP8 weight is an EncodingError naming the tensor and row, and nothing is
    written."""
    d = tmp_path / "nan"
    shutil.copytree(FIXTURES / "ct-fp8-channel", d)
    with open_hf_dir(d) as src:
        qw = next(q for q in src.quantized_weights.values() if "fp8_e4m3fn_row_bf16" in q.exact_targets())
        t = qw.parts[qw.CODES]
    k = qw.shape[1]
    data = bytearray(t.file.read_bytes())
    data[t.file_offset + 3 * k + 7] = 0x7F  # row 3, column 7
    t.file.write_bytes(bytes(data))
    out = tmp_path / "m.ninfer"
    with pytest.raises(EncodingError) as exc:
        convert(d, out, recipe="exact")
    assert exc.value.rule == "invalid_code" and "row 3" in str(exc.value) and qw.name in str(exc.value)
    assert not out.exists()
