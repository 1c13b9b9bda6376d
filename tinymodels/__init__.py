"""Deterministic tiny-model generators for tests, the demo and the benchmarks.

Depends only on numpy, gguf and safetensors, never on the code under test (``ninfer_core``,
``converters``). A text model is one module (``qwen35``, ``qwen3``, ``qwen2``, ``qwen3_moe``, ``qwen3_vl``, …) with
``MODEL_NAME`` (found by :func:`models`), ``config()``, ``hf_tensors()``, ``logical_parameters()``,
``write_hf_dir()`` and ``write_gguf()``; ``MOE = True`` where it takes expert layouts. Components:
:mod:`tinymodels.mtp` (Qwen3.5 MTP head), :mod:`tinymodels.vision` (vision tower, mmproj GGUF),
:mod:`tinymodels.dflash` (z-lab drafters), :mod:`tinymodels.bonsai` (ternary GGUFs, packers in
:mod:`tinymodels.ternary_blocks`), :mod:`tinymodels.token_counts` (proposal shortlist counts). Real geometries:
:mod:`tinymodels.real` builds these models from the published ``config.json`` of real checkpoints
(``real_configs/``, docs/architectures.md §Real geometries).
Command line: ``python -m tinymodels MODEL --hf DIR --gguf FILE`` (see :mod:`tinymodels.__main__`).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def models() -> dict[str, ModuleType]:
    """Every generator module declaring ``MODEL_NAME``, by that name: adding a tiny model adds a module."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            if isinstance(getattr(module, "MODEL_NAME", None), str):
                found[module.MODEL_NAME] = module
    return dict(sorted(found.items()))
