"""Progress of an acceptance run: which gate runs, how far it is, how long it took (docs/acceptance.md
§Progress).

:func:`converters.acceptance.registry.run_gates` tells a :class:`GateProgress` when each gate starts and ends;
a gate with countable work (parameters compared, forward steps, objects checked) reports ``step(done, total)``
through its context (:meth:`converters.acceptance.registry.GateContext.step`). The CLI gives a rich bar
(:func:`converters.cli.output.gate_progress`); without one, nothing is reported.
"""

from __future__ import annotations

from typing import Protocol


class GateProgress(Protocol):
    """What an acceptance run reports while it runs."""

    def start(self, kind: str, label: str, title: str) -> None:
        """Gate ``label`` (``title``) of command ``kind`` starts."""

    def step(self, done: int, total: int) -> None:
        """The running gate has done ``done`` of ``total`` units of its work."""

    def finish(self, label: str, status: str, seconds: float) -> None:
        """Gate ``label`` ended with ``status`` after ``seconds``."""


__all__ = ["GateProgress"]
