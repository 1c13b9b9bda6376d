"""Counting the file ranges a conversion hands its writer to copy in the kernel (docs/io-speed.md
§Unchanged bytes) in conversion tests. (A durable writer copies a range's whole units in the kernel and
assembles its partial ends with the units it shares, docs/io-speed.md §Direct writes; tiny models fit in
a few units, so the count is of ranges handed over, not of ``copy_file_range`` calls.)"""

from __future__ import annotations

from ninfer_core.container.fileset import FileSetWriter


def count_kernel_copies(m) -> list[int]:
    """Patch (through monkeypatch context ``m``) the writer's file-range copy to record each range's byte
    count in the returned list, copying as before."""
    copies: list[int] = []
    real = FileSetWriter.copy_at

    def counted(self, offset, rng):
        copies.append(rng.length)
        return real(self, offset, rng)

    m.setattr(FileSetWriter, "copy_at", counted)
    return copies
