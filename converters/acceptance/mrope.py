"""Interleaved multimodal RoPE (Qwen3-VL, Qwen3.5): the rotary frequencies of three position streams.

transformers ``Qwen3VLTextRotaryEmbedding`` (and Qwen3.5's) takes ``position_ids [3, T]`` — temporal, height,
width — computes ``freqs[a] = positions[a] ⊗ inv_freq`` per stream and interleaves them
(``apply_interleaved_mrope``): frequency ``j`` is the height stream's when ``j % 3 == 1`` and
``j < 3·mrope_section[1]``, the width stream's when ``j % 3 == 2`` and ``j < 3·mrope_section[2]``, else the
temporal stream's; ``cos``/``sin`` of ``[freqs | freqs]`` then rotate as plain RoPE does (``rotate_half``).
llama.cpp's ``IMROPE`` is the same layout. A text-only prompt gives every token the same position in all
three streams, so every frequency is ``position · inv_freq``: interleaved mRoPE *is* plain RoPE for text,
which the golden forward (:mod:`converters.acceptance.golden`) relies on (docs/qwen3-vl.md §Interleaved mRoPE).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def interleaved_frequencies(positions: np.ndarray, inv_freq: np.ndarray, section: Sequence[int]) -> np.ndarray:
    """``[T, len(inv_freq)]`` rotary angles of ``positions [3, T]`` (temporal, height, width streams)."""
    positions = np.asarray(positions, dtype=np.float64)
    if positions.ndim != 2 or positions.shape[0] != 3 or len(section) != 3:
        raise ValueError(f"expected positions [3, T] and a 3-entry mrope_section, got {positions.shape}, {list(section)}")
    freqs = positions[:, :, None] * np.asarray(inv_freq, dtype=np.float64)[None, None, :]
    out = freqs[0].copy()
    for stream in (1, 2):
        idx = slice(stream, 3 * int(section[stream]), 3)
        out[:, idx] = freqs[stream][:, idx]
    return out

