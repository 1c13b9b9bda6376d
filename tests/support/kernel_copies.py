"""Counting the writer's file-to-file copies (docs/io-speed.md §Unchanged bytes) in conversion tests."""

from __future__ import annotations

from ninfer_core.container.filecopy import RangeCopier


def count_kernel_copies(m) -> list[int]:
    """Patch (through monkeypatch context ``m``) the writer's file-to-file copy to record each copy's byte
    count in the returned list, copying as before."""
    copies: list[int] = []
    real = RangeCopier.copy.__func__

    def counted(cls, *args):
        copies.append(args[2])
        return real(cls, *args)

    m.setattr(RangeCopier, "copy", classmethod(counted))
    return copies
