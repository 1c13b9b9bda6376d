"""Regression sources, generated deterministically by :mod:`tinymodels` (numpy, gguf, safetensors only).

A fixture is written once per run into ``<workdir>/fixtures/<name>`` (a GGUF file or an HF directory)
and shared by every case that names it. The generators are seeded and write the same bytes on every
machine, so a changed object digest means the converter (or a recipe, mapping or codec) changed — not
the input.
"""

from __future__ import annotations

import logging
from pathlib import Path

import tinymodels
from converters.regress.cases import Fixture

log = logging.getLogger(__name__)



def fixture_path(fixture: Fixture, workdir: Path) -> Path:
    return Path(workdir) / "fixtures" / (f"{fixture.name}.gguf" if fixture.kind == "gguf" else fixture.name)


def ensure_fixture(fixture: Fixture, workdir: Path) -> Path:
    """The fixture's source path under ``workdir``, generated if it is not there yet."""
    path = fixture_path(fixture, workdir)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    module = tinymodels.models()[fixture.model]
    cfg = module.config(**fixture.config)
    if fixture.kind == "gguf":
        module.write_gguf(path, cfg, seed=fixture.seed, **fixture.writer_args)
    else:
        module.write_hf_dir(path, cfg, seed=fixture.seed, **fixture.writer_args)
    log.info("generated fixture %s at %s", fixture.name, path)
    return path
