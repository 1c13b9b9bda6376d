"""A source changed while it is converted (overwritten in place or appended to) is refused before the
artifact is published: each source file's identity — device, inode, size, mtime — is checked again at the
end (docs/robustness.md §Promises)."""

from __future__ import annotations

import os

import pytest

from converters.errors import SourceError
from converters.pipeline.convert import convert
from tinymodels import qwen35


@pytest.mark.parametrize("kind", ["gguf", "hf"])
def test_a_source_appended_to_during_conversion_is_not_published(tmp_path, kind):
    if kind == "gguf":
        source = changed = tmp_path / "m.gguf"
        qwen35.write_gguf(source, qwen35.config(), matrix_type="Q8_0")
    else:
        source = qwen35.write_hf_dir(tmp_path / "hf", qwen35.config())
        changed = next(source.glob("*.safetensors"))
    calls = []

    def append_once(_object_id, _n):
        if not calls:
            with open(changed, "ab") as f:
                f.write(b"\0" * 64)
        calls.append(1)

    with pytest.raises(SourceError, match="modified") as info:
        convert(source, tmp_path / "o.ninfer", recipe="bf16", progress=append_once, workers=1)
    assert info.value.rule == "identity_unchanged" and info.value.file == str(changed)
    assert calls and not [n for n in os.listdir(tmp_path) if n.startswith(("o.ninfer", ".o.ninfer"))]
