"""Interleaved mRoPE (docs/qwen3-vl.md §Interleaved mRoPE): with the three position streams equal — a
text-only prompt — every rotary angle is ``position · inv_freq``, so the golden forward's mRoPE path equals
plain RoPE; with distinct streams, frequency ``j`` takes the height stream for ``j % 3 == 1`` and the width
stream for ``j % 3 == 2`` inside their sections (transformers ``apply_interleaved_mrope``)."""

from __future__ import annotations

import numpy as np
import pytest

from converters.acceptance import golden, mrope
from tinymodels import qwen3_vl


def inv_freq(rotary_dim: int, theta: float = 5e6) -> np.ndarray:
    return 1.0 / theta ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


@pytest.mark.parametrize("section", [[24, 20, 20], [8, 4, 4], [11, 11, 10]])
def test_equal_position_streams_are_plain_rope(section):
    f = inv_freq(2 * sum(section))
    pos = np.arange(7)
    got = mrope.interleaved_frequencies(np.stack([pos, pos, pos]), f, section)
    np.testing.assert_array_equal(got, pos[:, None] * f[None, :])


def test_distinct_streams_interleave_height_and_width_inside_their_sections():
    section, f = [24, 20, 20], inv_freq(128)
    t, h, w = np.arange(5), 100 + np.arange(5), 1000 + np.arange(5)
    got = mrope.interleaved_frequencies(np.stack([t, h, w]), f, section)
    for j in range(len(f)):
        stream = h if j % 3 == 1 and j < 3 * section[1] else w if j % 3 == 2 and j < 3 * section[2] else t
        np.testing.assert_array_equal(got[:, j], stream * f[j], err_msg=str(j))
    assert not np.array_equal(got, t[:, None] * f[None, :])


def test_rope_with_a_section_equals_plain_rope_on_text_positions():
    x = np.random.default_rng(1).standard_normal((6, 2, 32))
    plain = golden.rope(x, np.arange(6), 32, 5e6)
    np.testing.assert_array_equal(golden.rope(x, np.arange(6), 32, 5e6, [8, 4, 4]), plain)


def test_the_golden_forward_of_qwen3_vl_reads_the_section_and_matches_plain_rope():
    text = {**qwen3_vl.config()["text_config"], "architectures": ["Qwen3VLForConditionalGeneration"],
            "deepstack_layers": [0, 1], "num_hidden_layers": 2, "vocab_size": 40, "hidden_size": 32,
            "intermediate_size": 48, "head_dim": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
            "rope_parameters": {"rope_theta": 5e6, "mrope_section": [4, 2, 2], "mrope_interleaved": True}}
    spec = golden.TextSpec.from_config(text)
    assert spec.architecture == "qwen3_vl" and spec.mrope_section == (4, 2, 2) and spec.rotary_dim == 16
    rng = np.random.default_rng(2)
    params = {n: rng.standard_normal(s) * 0.2 + (1.0 if n.endswith("norm") else 0.0)
              for n, s in golden.parameter_shapes(spec).items()}
    plain = {**text, "rope_parameters": {"rope_theta": 5e6}}
    np.testing.assert_array_equal(golden.forward(text, params, [1, 5, 9, 2]), golden.forward(plain, params, [1, 5, 9, 2]))
