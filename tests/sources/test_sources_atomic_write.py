"""Report files are published whole and never over an existing file (``converters.sources.atomic_write``)."""

from __future__ import annotations

import errno
import json
import os

import pytest

from converters.sources import atomic_write
from converters.sources.atomic_write import write_new_file, write_new_json


class Taken(Exception):
    pass


def taken() -> Taken:
    return Taken("taken")


def _leftovers(d) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


def test_writes_the_whole_document_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    write_new_json(target, {"a": "é", "b": [1, 2]}, exists=taken, indent=1, ensure_ascii=False)
    assert target.read_text(encoding="utf-8") == json.dumps({"a": "é", "b": [1, 2]}, indent=1, ensure_ascii=False) + "\n"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("existing", ["file", "dangling link"])
def test_an_existing_name_is_never_overwritten(tmp_path, existing):
    target = tmp_path / "report.json"
    if existing == "file":
        target.write_text("keep")
    else:
        target.symlink_to(tmp_path / "nowhere")
    with pytest.raises(Taken):
        write_new_file(target, b"new", exists=taken)
    assert target.is_symlink() or target.read_text() == "keep"
    assert _leftovers(tmp_path) == []


def test_a_target_that_appears_while_writing_is_kept(tmp_path, monkeypatch):
    target = tmp_path / "report.json"
    real_link = os.link

    def racing_link(src, dst):
        target.write_text("the other writer's")
        return real_link(src, dst)

    monkeypatch.setattr(atomic_write.os, "link", racing_link)
    with pytest.raises(Taken):
        write_new_file(target, b"mine", exists=taken)
    assert target.read_text() == "the other writer's" and _leftovers(tmp_path) == []


def test_file_systems_without_hard_links_rename_instead(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(atomic_write.os, "link", no_links)
    target = tmp_path / "report.json"
    write_new_file(target, b"data", exists=taken)
    assert target.read_bytes() == b"data" and _leftovers(tmp_path) == []
    with pytest.raises(Taken):
        write_new_file(target, b"again", exists=taken)


def test_a_failed_write_publishes_nothing(tmp_path, monkeypatch):
    def full_disk(fd):
        raise OSError(errno.ENOSPC, "no space left")

    monkeypatch.setattr(atomic_write.os, "fsync", full_disk)
    target = tmp_path / "report.json"
    with pytest.raises(OSError):
        write_new_file(target, b"data", exists=taken)
    assert not target.exists() and _leftovers(tmp_path) == []


def test_a_report_name_that_fits_is_written_though_its_temporary_would_not(tmp_path):
    """``.<name>.<random>.tmp`` passes 255 bytes for a 250-byte name: the temporary carries a hash instead."""
    path = tmp_path / ("r" * 245 + ".json")
    write_new_file(path, b"{}\n", exists=lambda: AssertionError("exists"))
    assert path.read_bytes() == b"{}\n" and os.listdir(tmp_path) == [path.name]
