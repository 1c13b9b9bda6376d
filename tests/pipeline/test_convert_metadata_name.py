"""The artifact's metadata name comes from ``general.name``, or the file name when the GGUF has none or
one that is not text (docs/inspect.md §Non-canonical metadata values)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from gguf import GGUFValueType as V

from converters.pipeline.convert import metadata_of
from converters.sources import open_gguf
from tests.support.sources import RawGGUF


@pytest.mark.parametrize("name, expected", [(b"tiny", "tiny"), (b"tiny\xff", "m.gguf"), (None, "m.gguf")])
def test_name_from_gguf_or_the_file_name(tmp_path, name, expected):
    raw = RawGGUF().kv("general.architecture", V.STRING, "qwen3")
    if name is not None:
        raw.kv("general.name", V.STRING, name)
    with open_gguf(raw.write(tmp_path / "m.gguf")) as src:
        plan = SimpleNamespace(recipe=SimpleNamespace(name="exact"), bound=SimpleNamespace(architecture="qwen3"),
                               components=["text"])
        meta = metadata_of(SimpleNamespace(source=src), plan)
    assert meta["name"] == expected and meta["identity"]["weights_id"] == "exact"
