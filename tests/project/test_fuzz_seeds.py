"""The fuzz campaign's seed corpus and harnesses (docs/robustness.md §Fuzz campaign): every target has
seeds, and every seed goes through its harness with a typed outcome (the campaign itself, which needs
atheris, runs in ``make fuzz``)."""

from __future__ import annotations

import pytest

from fuzz.targets import SEEDS, TARGETS, TYPED


def seeds(target: str) -> list:
    return sorted(p for p in (SEEDS / target).iterdir() if p.is_file())


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_seeds_run_typed(tmp_path, target):
    files = seeds(target)
    assert files, f"no seed for {target}"
    for path in files:
        data = path.read_bytes()
        for sample in (data, data[: len(data) // 2], data[::-1]):
            try:
                outcome = TARGETS[target](sample, tmp_path)
            except TYPED:
                outcome = "rejected"
            assert outcome in ("accepted", "rejected")
    assert TARGETS[target](files[0].read_bytes(), tmp_path) == "accepted" or target.startswith("calbin_")
