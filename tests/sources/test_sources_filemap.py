"""FileMap maps only the range a read asks for, so address space follows the tensors being read, not the
file size (a model larger than `ulimit -v` still converts)."""

import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from converters.errors import SourceError
from converters.sources.base import FileMap
from converters.sources.fileio import OpenFile


@pytest.fixture()
def data_file(tmp_path):
    payload = (np.arange(3 * mmap.ALLOCATIONGRANULARITY + 123) % 251).astype(np.uint8)
    path = tmp_path / "blob.bin"
    path.write_bytes(payload.tobytes())
    return path, payload


def _mapping_of(arr: np.ndarray) -> mmap.mmap:
    base = arr
    while not isinstance(base, mmap.mmap):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    return base


@pytest.mark.parametrize("offset,length", [(0, 10), (5, 7000), (mmap.ALLOCATIONGRANULARITY + 3, 4096),
                                           (2 * mmap.ALLOCATIONGRANULARITY - 1, 2)])
def test_slice_returns_the_range_and_maps_little_more(data_file, offset, length):
    path, payload = data_file
    fm = FileMap(OpenFile(path))
    got = fm.slice(offset, length)
    assert np.array_equal(got, payload[offset:offset + length])
    assert len(_mapping_of(got)) < length + mmap.ALLOCATIONGRANULARITY


def test_out_of_file_range_is_a_typed_error(data_file):
    path, payload = data_file
    with pytest.raises(SourceError) as err:
        FileMap(OpenFile(path)).slice(len(payload) - 4, 8)
    assert err.value.rule == "range_in_file"


def test_reading_a_tail_tensor_under_an_address_space_limit_below_the_file(tmp_path):
    """A sparse 4 GiB file; a child limited to 1.5 GiB of address space reads its last bytes."""
    path = tmp_path / "big.bin"
    with open(path, "wb") as f:
        f.truncate(4 << 30)
        f.seek((4 << 30) - 16)
        f.write(b"0123456789abcdef")
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({3 << 29}, {3 << 29}))
        from converters.sources.base import FileMap
        from converters.sources.fileio import OpenFile
        print(bytes(FileMap(OpenFile({str(path)!r})).slice({(4 << 30) - 16}, 16)).decode())
    """)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0123456789abcdef"
