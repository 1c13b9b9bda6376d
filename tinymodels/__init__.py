"""Deterministic tiny-model generators for tests, the demo and the benchmarks.

Depends only on numpy, gguf and safetensors, never on the code under test (``ninfer_core``,
``converters``). Per architecture (:mod:`tinymodels.qwen35`, :mod:`tinymodels.qwen3`): ``config()``,
``hf_tensors()``, ``logical_parameters()``, ``write_hf_dir()``, ``write_gguf()``.
Command line: ``python -m tinymodels qwen35|qwen3 --hf DIR --gguf FILE``.
"""
