"""Deterministic tiny-model generators for tests, the demo and the benchmarks.

Depends only on numpy, gguf and safetensors, never on the code under test (``ninfer_core``,
``converters``). Per architecture (:mod:`tinymodels.qwen35`, :mod:`tinymodels.qwen3`,
:mod:`tinymodels.qwen3_moe`, :mod:`tinymodels.qwen35_moe`, :mod:`tinymodels.qwen3_next`): ``config()``,
``hf_tensors()``, ``logical_parameters()``, ``write_hf_dir()``, ``write_gguf()``. Components:
:mod:`tinymodels.mtp` (Qwen3.5 MTP head), :mod:`tinymodels.vision` (vision tower, mmproj GGUF),
:mod:`tinymodels.dflash` (z-lab drafters), :mod:`tinymodels.bonsai` (ternary GGUFs, packers in
:mod:`tinymodels.ternary_blocks`), :mod:`tinymodels.token_counts` (proposal shortlist counts).
Command line: ``python -m tinymodels MODEL --hf DIR --gguf FILE`` (see :mod:`tinymodels.__main__`).
"""
