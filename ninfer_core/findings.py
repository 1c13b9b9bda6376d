"""Findings: one observed rule violation (or note) about an artifact, as ``validate`` returns them.

``ninfer_core.validate(path)`` collects *every* finding instead of stopping at the first; the gates of
``convert validate`` build their report on these records.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Finding:
    """A single finding.

    ``severity`` is ``"ERROR"``, ``"WARNING"`` or ``"INFO"``; ``rule`` a stable identifier; ``json_path``
    where in the directory (or which file) it applies; ``section`` the spec section.
    """

    rule: str
    severity: str
    json_path: str
    message: str
    section: str | None = None
    file: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)
