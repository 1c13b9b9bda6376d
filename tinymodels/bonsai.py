"""Tiny Ternary-Bonsai-shaped GGUFs (PrismML): a ``qwen35`` model whose matrices use one ternary/binary
block type (:mod:`tinymodels.ternary_blocks`), and a Hadamard-rotated variant with ``prism.hadamard.*``.

What the files reproduce (facts gathered via the search tool from third-party readers of PrismML's
Bonsai 2 GGUFs and of the fork ``PrismML-Eng/llama.cpp``; the fork's own converter is not public):

- Tensor set and types (a reader's inventory of Ternary-Bonsai-2-27B: 851 tensors = 353 F32 + 96 BF16
  + 402 of type 143 or 142): every 2-D matrix llama.cpp's ``Qwen3_5TextModel`` writes is ternary —
  ``token_embd``, ``output``, ``attn_q/k/v/output``, ``attn_qkv``, ``attn_gate``, ``ssm_out``,
  ``ffn_gate/up/down`` — except ``ssm_beta`` / ``ssm_alpha`` (BF16); norms, ``ssm_conv1d``, ``ssm_a``
  and ``ssm_dt.bias`` are F32 with llama.cpp's value transforms (norms ``+1``, ``−exp(A_log)``, V heads
  tiled); no MTP block. One file per block type here (the ``ternary_type`` argument).
- Fork type ids are written raw: gguf-py's ``GGUFWriter`` packs the tensor-info type as the u32 it is
  given (see :mod:`tinymodels.gguf_writer`), so ids 42/142/143 land as the fork writes them. Id 42 is
  written in either of its two block sizes (``Q2_0`` group 64 / 18 bytes, ``Q2_0_LEGACY`` group 128 /
  34 bytes): only the tensor's byte length tells them apart.
- ``general.file_type`` is the upstream ``LlamaFileType`` for TQ1_0/TQ2_0/Q1_0 and omitted for the fork
  types (their file-type enum values are not known here: INFERRED).
- Rotation (``prism.hadamard.*``, version 1): ``block_size`` 1024 (UINT32),
  ``transform = "normalized-sylvester-walsh-hadamard"``, ``axis = "input-last-dimension"``,
  ``sign_mode = "explicit"``, ``weight_names`` (the forward-folded matrices: ``output.weight`` and every
  ternary layer matrix), ``inverse_weight_names = ["token_embd.weight"]``, ``sign_widths`` and
  ``sign_values`` (INT32 arrays, ±1 values concatenated in ``sign_widths`` order, one vector per
  matmul input width, shared by every matrix of that width; widths ascending as in Bonsai 2's
  ``[5120, 6144, 17408]``), ``gdn_v_grouped = true`` (BOOL). A stored row is ``w' = H(s ⊙ w)`` per
  1024-block of the input axis (``H[r][c] = (−1)^popcount(r&c) / sqrt(1024)``, symmetric and
  orthogonal), so ``w = s ⊙ H(w')``; the embedding's rows are stored the same way (latent) and restored
  after lookup by the same formula. With ``gdn_v_grouped`` the ``ssm_out`` input columns stay in grouped
  (HF) order — the fork permutes its tiled activations before the signs — while the V rows of the other
  GDN tensors are tiled as llama.cpp writes them (INFERRED from the fork's runtime description).

Values: the stored ternary matrices are drawn directly as ``code × d`` (codes −1/0/+1, ±1 for Q1_0; one
fp16 ``d`` per block, row-dependent so rows are distinguishable), so packing is exact. The logical
parameters are the HF values: the stored values with llama.cpp's layout undone (exact), and for the
rotated variant additionally un-rotated (``s ⊙ H(w')`` in float64, rounded to float32 — not exact).
:func:`stored_parameters` gives the rotated values a converter keeps (exactly ternary × scale) under the
same names, :func:`hadamard_signs` the sign vectors.

Default dims: hidden 256, intermediate 512, 4 layers (full attention at 3), attention 4/2 heads of 64,
gated delta net 2 key / 4 value heads of 64, vocab 512 (all input widths multiples of 256 for TQ1_0 /
TQ2_0). Rotated default (:func:`rotated_config`): hidden 1024, intermediate 3072, 2 layers (full
attention at 1), 8/2 heads of 256 (query width 2048), 4 key / 16 value heads of 128 (value width 2048):
three widths 1024, 2048, 3072.
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Mapping
from pathlib import Path

import gguf
import numpy as np

from tinymodels import gguf_writer, qwen3, qwen35
from tinymodels.gguf_writer import PlannedTensor
from tinymodels.synth import INV_PHI, ROW_BLOCK
from tinymodels.ternary_blocks import BlockFormat, block_format

MODEL_NAME = "bonsai"  # the name `python -m tinymodels` and regression cases use

HADAMARD_BLOCK = 1024
TERNARY_KINDS = ("token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output", "attn_qkv", "attn_gate",
                 "ssm_out", "ffn_gate", "ffn_up", "ffn_down")
RESIDUAL_KINDS = ("attn_output", "ssm_out", "ffn_down")
BF16_KINDS = ("ssm_beta", "ssm_alpha")
FILE_TYPES = {"TQ1_0": gguf.LlamaFileType.MOSTLY_TQ1_0, "TQ2_0": gguf.LlamaFileType.MOSTLY_TQ2_0,
              "Q1_0": gguf.LlamaFileType.MOSTLY_Q1_0}


def config(**overrides) -> dict:
    """A Qwen3.5 text config whose every matrix input width is a multiple of 256."""
    base = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "linear_key_head_dim": 64, "linear_value_head_dim": 64,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "mrope_section": [3, 3, 2]}
    return qwen35.config(**{**base, **overrides})


def rotated_config(**overrides) -> dict:
    """A Qwen3.5 text config for the rotated variant: input widths 1024, 2048 and 3072."""
    base = {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 2, "full_attention_interval": 2,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_num_key_heads": 4, "linear_num_value_heads": 16,
            "mrope_section": [11, 11, 10]}
    return qwen35.config(**{**base, **overrides})


def _kind(gguf_name: str) -> str:
    parts = gguf_name.split(".")
    return parts[2] if parts[0] == "blk" else parts[0]


def is_ternary(gguf_name: str) -> bool:
    return gguf_name.endswith(".weight") and _kind(gguf_name) in TERNARY_KINDS


def fwht(x: np.ndarray, block: int = HADAMARD_BLOCK) -> np.ndarray:
    """Normalized Sylvester–Walsh–Hadamard transform of each ``block`` of the last axis (float64)."""
    shape = x.shape
    if shape[-1] % block:
        raise ValueError(f"last axis {shape[-1]} is not a multiple of the Hadamard block {block}")
    y = np.array(x, dtype=np.float64).reshape(-1, block)
    diff = np.empty((y.shape[0], block // 2))
    h = 1
    while h < block:  # in place: (a, b) -> (a + b, a - b) for every pair j, j + h of each 2h-block
        pairs = y.reshape(y.shape[0], block // (2 * h), 2, h)
        a, b = pairs[:, :, 0], pairs[:, :, 1]
        d = diff.reshape(a.shape)
        np.subtract(a, b, out=d)
        a += b
        b[...] = d
        h *= 2
    return y.reshape(shape) / np.sqrt(block)


def hadamard_signs(cfg: Mapping, seed: int = 0) -> dict[int, np.ndarray]:
    """One ±1 vector per rotated input width (ascending), as ``prism.hadamard.sign_values`` holds them."""
    out = {}
    for width in sorted({shape[-1] for shape in _ternary_shapes(cfg).values()}):
        rng = np.random.default_rng([seed, zlib.crc32(b"prism.hadamard"), width])
        out[width] = np.where(rng.random(width) < 0.5, -1.0, 1.0).astype(np.float32)
    return out


def _ternary_shapes(cfg: Mapping) -> dict[str, tuple[int, ...]]:
    return {t.name: t.shape for t in qwen35.gguf_tensors(cfg) if is_ternary(t.name)}


def _gain(gguf_name: str, width: int) -> float:
    if gguf_name == "token_embd.weight":
        return 1.0
    return (0.5 if _kind(gguf_name) in RESIDUAL_KINDS else 1.0) / np.sqrt(width)


def ternary_rows(gguf_name: str, shape: tuple[int, int], fmt: BlockFormat, seed: int, start: int, stop: int) -> np.ndarray:
    """Rows ``[start, stop)`` of a stored ternary matrix: ``code × d`` per block, drawn per 256-row block."""
    blocks = range(start // ROW_BLOCK, (stop + ROW_BLOCK - 1) // ROW_BLOCK)
    values = np.concatenate([_row_block(gguf_name, tuple(shape), fmt, seed, b) for b in blocks], axis=0)
    first = (start // ROW_BLOCK) * ROW_BLOCK
    return values[start - first : stop - first]


@functools.lru_cache(maxsize=8)  # a few blocks: bounded memory for a large model
def _row_block(gguf_name: str, shape: tuple[int, int], fmt: BlockFormat, seed: int, b: int) -> np.ndarray:
    """Rows ``[256·b, 256·(b + 1))`` of :func:`ternary_rows` (read-only; drawn once per process: tests and the
    writer read the same rows many times)."""
    rows, width = shape
    block_count = width // fmt.block_elements
    lo, hi = b * ROW_BLOCK, min((b + 1) * ROW_BLOCK, rows)
    rng = np.random.default_rng([seed, zlib.crc32(f"{gguf_name}:{fmt.name}".encode()), b])
    draw = rng.integers(0, 10, size=(hi - lo, block_count, fmt.block_elements), dtype=np.int8)
    if fmt.codes == (-1, 1):
        codes = np.where(draw < 5, -1, 1).astype(np.int8)
    else:
        codes = (np.where(draw < 3, -1, 0) + (draw >= 7)).astype(np.int8)
    anchor = rng.integers(0, fmt.block_elements, size=(hi - lo, block_count))
    np.put_along_axis(codes, anchor[..., None], np.where(draw[..., :1] % 2 == 0, 1, -1).astype(np.int8), axis=2)
    row_scale = 0.5 + np.modf((np.arange(lo, hi, dtype=np.float64) + 1.0) * INV_PHI)[0]
    jitter = 0.75 + 0.5 * rng.random((hi - lo, block_count))
    d = (_gain(gguf_name, width) / np.sqrt(0.6) * row_scale[:, None] * jitter).astype(np.float16)
    out = (codes.astype(np.float32) * d.astype(np.float32)[..., None]).reshape(hi - lo, width)
    out.setflags(write=False)
    return out


def _check(cfg: Mapping, fmt: BlockFormat, rotated: bool) -> None:
    for name, shape in _ternary_shapes(cfg).items():
        if shape[-1] % fmt.block_elements:
            raise ValueError(f"{name}: input width {shape[-1]} is not a multiple of {fmt.name}'s {fmt.block_elements}")
        if rotated and shape[-1] % HADAMARD_BLOCK:
            raise ValueError(f"{name}: input width {shape[-1]} is not a multiple of the Hadamard block {HADAMARD_BLOCK}")


def gguf_tensors(cfg: Mapping, seed: int = 0, ternary_type: str = "PTQ1_0") -> list[PlannedTensor]:
    """llama.cpp's Qwen3.5 tensors with the ternary matrices drawn in ``ternary_type`` and the gates BF16."""
    fmt = block_format(ternary_type)
    plan = []
    for t in qwen35.gguf_tensors(cfg, seed, "F32"):
        if is_ternary(t.name):
            rows = lambda a, b, n=t.name, s=t.shape: ternary_rows(n, s, fmt, seed, a, b)  # noqa: E731
            plan.append(PlannedTensor(t.name, t.shape, fmt.type_id, rows, codec=fmt))
        elif t.name.endswith(".weight") and _kind(t.name) in BF16_KINDS:
            plan.append(PlannedTensor(t.name, t.shape, gguf.GGMLQuantizationType.BF16, t.rows, t.whole))
        else:
            plan.append(t)
    return plan


def _stored(cfg: Mapping, seed: int, fmt: BlockFormat) -> dict[str, np.ndarray]:
    return {name: ternary_rows(name, shape, fmt, seed, 0, shape[0]) for name, shape in _ternary_shapes(cfg).items()}


def _unrotate(stored: Mapping[str, np.ndarray], signs: Mapping[int, np.ndarray]) -> dict[str, np.ndarray]:
    """``w = s ⊙ H(w')`` per row (float64, then float32)."""
    return {name: (fwht(w) * signs[w.shape[-1]]).astype(np.float32) for name, w in stored.items()}


def _hf_matrices(cfg: Mapping, stored: Mapping[str, np.ndarray], rotated: bool) -> dict[str, np.ndarray]:
    """Stored matrices back in HF layout: V rows untiled, ``ssm_out`` columns untiled unless grouped."""
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dv, r, qk = cfg["linear_value_head_dim"], hv // hk, 2 * hk * cfg["linear_key_head_dim"]

    def untile(x: np.ndarray, axis: int) -> np.ndarray:
        return x if hk == hv else qwen35.grouped_to_tiled(x, axis, r, hk, dv)  # (r, k) → (k, r)

    specs = qwen35.text_specs(cfg)
    plan = qwen35.gguf_tensors(cfg)
    out = {}
    for spec, t in zip(specs, plan, strict=True):
        if t.name not in stored:
            continue
        x = stored[t.name]
        kind = _kind(t.name)
        if kind == "attn_qkv":
            x = np.concatenate([x[:qk], untile(x[qk:], 0)])
        elif kind == "attn_gate":
            x = untile(x, 0)
        elif kind == "ssm_out" and not rotated:
            x = untile(x, 1)
        out[spec.name] = x
    return out


def _logical(cfg: Mapping, seed: int, matrices: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    hf = {s.name: s.values(seed) for s in qwen35.text_specs(cfg) if s.name not in matrices}
    hf.update(matrices)
    out = qwen3.common_logical(hf, cfg)
    for layer, kind in enumerate(cfg["layer_types"]):
        if kind == "full_attention":
            out.update(qwen3.attention_logical(hf, cfg, layer, gated=True))
        else:
            out.update(qwen35.gdn_logical(hf, cfg, layer))
    return out


def logical_parameters(cfg: Mapping, seed: int = 0, ternary_type: str = "PTQ1_0", rotated: bool = False) -> dict[str, np.ndarray]:
    """HF values under the contract names (rotated matrices un-rotated: float32 of a float64 transform)."""
    stored = _stored(cfg, seed, block_format(ternary_type))
    if rotated:
        stored = _unrotate(stored, hadamard_signs(cfg, seed))
    return _logical(cfg, seed, _hf_matrices(cfg, stored, rotated))


def stored_parameters(cfg: Mapping, seed: int = 0, ternary_type: str = "PTQ1_0", rotated: bool = False) -> dict[str, np.ndarray]:
    """The same names with the matrices as stored (rotated ones still rotated, exactly ternary × d), in
    HF row order: what a converter that keeps the ternary bytes and adds ``hadamard_signs`` binds."""
    stored = _stored(cfg, seed, block_format(ternary_type))
    return _logical(cfg, seed, _hf_matrices(cfg, stored, rotated))


def rotation_metadata(cfg: Mapping, seed: int = 0) -> dict[str, tuple[object, gguf.GGUFValueType, gguf.GGUFValueType | None]]:
    """``prism.hadamard.*`` key → (value, type, array item type)."""
    V = gguf.GGUFValueType
    signs = hadamard_signs(cfg, seed)
    names = [t.name for t in qwen35.gguf_tensors(cfg) if is_ternary(t.name) and t.name != "token_embd.weight"]
    names = ["output.weight"] + [n for n in names if n != "output.weight"]
    return {
        "prism.hadamard.version": (1, V.UINT32, None),
        "prism.hadamard.block_size": (HADAMARD_BLOCK, V.UINT32, None),
        "prism.hadamard.transform": ("normalized-sylvester-walsh-hadamard", V.STRING, None),
        "prism.hadamard.axis": ("input-last-dimension", V.STRING, None),
        "prism.hadamard.sign_mode": ("explicit", V.STRING, None),
        "prism.hadamard.weight_names": (names, V.ARRAY, V.STRING),
        "prism.hadamard.inverse_weight_names": (["token_embd.weight"], V.ARRAY, V.STRING),
        "prism.hadamard.sign_widths": (list(signs), V.ARRAY, V.INT32),
        "prism.hadamard.sign_values": ([int(v) for s in signs.values() for v in s], V.ARRAY, V.INT32),
        "prism.hadamard.gdn_v_grouped": (True, V.BOOL, None),
    }


def write_gguf(path: str | os.PathLike[str], cfg: Mapping | None = None, seed: int = 0, ternary_type: str = "PTQ1_0",
               rotated: bool = False, **overrides) -> Path:
    """A Bonsai-shaped GGUF in ``ternary_type`` (``rotated``: with ``prism.hadamard.*``)."""
    cfg = qwen3.resolve_config(cfg, overrides, rotated_config if rotated else config)
    fmt = block_format(ternary_type)
    _check(cfg, fmt, rotated)

    def metadata(w: gguf.GGUFWriter) -> None:
        qwen35.add_metadata(w, cfg, None, f"Tiny Ternary Bonsai ({fmt.name})", FILE_TYPES.get(fmt.name))
        if rotated:
            for key, (value, vtype, sub) in rotation_metadata(cfg, seed).items():
                w.add_key_value(key, value, vtype, sub_type=sub)

    return gguf_writer.write_gguf_file(path, gguf.MODEL_ARCH_NAMES[qwen35.ARCH], metadata,
                                       gguf_tensors(cfg, seed, ternary_type))
