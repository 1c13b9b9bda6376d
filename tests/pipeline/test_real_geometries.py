"""Tiny models at real geometries convert and pass acceptance (docs/architectures.md §Real geometries).

Each real config of ``tinymodels/real_configs`` is generated with its real head counts, expert counts and
layer pattern, truncated to a few layers and shrunk in width, as a llama.cpp-layout GGUF (Q8_0 matrices)
and as an HF directory whose ``config.json`` is spelled as transformers 5 re-saves it; both convert with
``exact`` and pass every acceptance gate. Qwen3-30B-A3B keeps its 128 experts.
"""

from __future__ import annotations

import pytest

from converters.acceptance.accept import accept_written
from converters.pipeline.convert import convert
from tinymodels import real

#: name -> (layers, shrink, experts)
GEOMETRY = {"qwen2.5-0.5b": (2, 8, None), "qwen2.5-7b": (2, 16, None), "qwen3-0.6b": (2, 8, None),
            "qwen3-8b": (2, 32, None), "qwen3-30b-a3b": (2, 16, None), "qwen3-next-80b-a3b": (4, 16, 16),
            "qwen3-vl-2b": (3, 16, None), "qwen3.5-0.8b": (4, 8, None)}
#: the (name, kind) cases of the default run; the others are slow-marked (about 2-8 s each on 2 cores)
FAST = {("qwen2.5-0.5b", "gguf"), ("qwen3-0.6b", "hf"), ("qwen3-30b-a3b", "hf"), ("qwen3-vl-2b", "hf"),
        ("qwen3.5-0.8b", "gguf")}
CASES = [pytest.param(name, kind, marks=() if (name, kind) in FAST else pytest.mark.slow)
         for name in sorted(GEOMETRY) for kind in ("gguf", "hf")]


@pytest.mark.parametrize("name, kind", CASES)
def test_real_geometry_converts_and_passes_acceptance(tmp_path, name, kind):
    layers, shrink, experts = GEOMETRY[name]
    cfg = real.geometry(name, layers=layers, shrink=shrink, vocab=512, experts=experts)
    src = tmp_path / f"{name}.{kind}"
    if kind == "gguf":
        real.write_gguf(src, name, cfg, matrix_type="Q8_0")
    else:
        real.write_hf_dir(src, name, cfg, "resaved", shards=2)
    out = tmp_path / "m.ninfer"
    result = convert(src, out, recipe="exact")
    text = result.summary()
    assert text["exactness"] and "requantized" not in text["exactness"], text["exactness"]
    acceptance = accept_written(out, src)
    assert acceptance.verdict == "pass", acceptance.lines()
    if name == "qwen3-30b-a3b":
        assert cfg["num_experts"] == 128 and cfg["num_experts_per_tok"] == 8
