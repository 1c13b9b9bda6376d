"""The parsed directory's memory is bounded before parsing (docs/format/container.md §3.1, reader budget):
a directory whose estimated cost exceeds the budget is a typed ``json_too_large`` refusal from the reader,
``ninfer_core.validate`` and ``convert validate``; duplicate members are still found with their path."""

from __future__ import annotations

import json

import pytest

import ninfer_core.container.entry as entry
from converters.cli import main as cli_main
from ninfer_core import ArtifactWriter, Component, open_artifact, validate
from ninfer_core.container import jsontext
from ninfer_core.errors import FramingError


def padded(path, n: int):
    w = ArtifactWriter(path, components={"t": Component({})}, provenance={"x": [{"k": 0}] * n}, durable=False)
    w.add_resource("r.a", 16)
    with w:
        w.write_object("r.a", b"x" * 16)
    return path


def test_estimate_bounds_the_worst_values():
    text = json.dumps({f"k{i}": 0 for i in range(1000)}).encode()
    assert entry.directory_memory_estimate(text) >= 1000 * 133  # measured cost of an object member


def test_directory_over_budget_is_refused(tmp_path, monkeypatch, capsys):
    path = padded(tmp_path / "a.ninfer", 20_000)
    with open_artifact(path):
        pass  # within the default budget
    monkeypatch.setattr(entry, "DIRECTORY_MEMORY_BUDGET", 4 << 20)
    with pytest.raises(FramingError) as info:
        open_artifact(path)
    assert info.value.rule == "json_too_large" and "MiB" in info.value.message
    assert [f.rule for f in validate(path)] == ["json_too_large"]
    assert cli_main(["validate", str(path), "--json"]) == 1
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "NINFER_FRAMING" in codes


def test_duplicates_still_found_with_their_path():
    root = jsontext.decode(b'{"a": [1, {"b": 1, "b": 2}], "c": [0, 0, 0]}')
    assert jsontext.duplicate_members(root) == [("$.a[1]", "b")]
    assert jsontext.duplicate_members(jsontext.decode(b'{"a": [1, 2, 3]}')) == []
