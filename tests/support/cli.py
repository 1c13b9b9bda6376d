"""Running ``convert`` in-process in a test: the exit status and what it printed."""

from __future__ import annotations

from converters.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    """``convert ARGV…`` (paths given as they are): its exit status, stdout and stderr."""
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err
