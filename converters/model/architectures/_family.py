"""The golden-forward family of a text architecture: the conventions the numpy reference forward
(:mod:`converters.acceptance.golden`) switches on, declared by each architecture module as ``GOLDEN``.

The forward pass has one code path; a family only says which of its optional parts a model has
(docs/architectures.md §The golden family; the golden module's docstring gives each formula):

- ``zero_centred_norms`` — RMSNorm weights applied as ``1 + w`` (Qwen3.5, Qwen3-Next) instead of ``w``;
- ``attn_output_gate`` — the query projection's second half of each head's rows gates the attention output;
- ``qk_norm`` — per-head RMSNorm of queries and keys (``attention/query_norm``, ``attention/key_norm``);
- ``qkv_bias`` — the query/key/value projections add a bias (``attention/{query,key,value}_bias``);
- ``hybrid`` — layers are ``layer_types`` of full attention and gated delta net (default schedule: every
  ``full_attention_interval``-th layer full attention); otherwise every layer is full attention;
- ``partial_rotary_factor`` — the fraction of a head's dims RoPE rotates when the config does not say;
- ``moe`` — the sparse feed-forward block, when the family has one (:class:`MoeKind`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MoeKind:
    """How a family's sparse MoE block is built: a shared expert or not, the ``norm_topk_prob`` default
    (None: always renormalised, the config cannot turn it off), and whether some layers may stay dense
    (``mlp_only_layers`` / ``decoder_sparse_step``)."""

    shared_expert: bool
    norm_topk_default: bool | None
    dense_layers: bool


@dataclass(frozen=True)
class Family:
    """The golden forward's conventions for one text architecture (see the module docstring)."""

    name: str
    zero_centred_norms: bool = False
    attn_output_gate: bool = False
    qk_norm: bool = True
    qkv_bias: bool = False
    hybrid: bool = False
    partial_rotary_factor: float = 1.0
    moe: MoeKind | None = None


@dataclass(frozen=True)
class Storage:
    """Where a checkpoint format stores the golden forward's parameters otherwise than the logical (Hugging Face
    per-parameter) form, stated apart from the mapping files so that gate 7's structure question can check their
    transforms (docs/acceptance.md §Golden: two questions). An architecture declares its ``GGUF_STORAGE``
    (llama.cpp's writer, docs/gguf-conventions.md) and ``HF_STORAGE`` where they differ:

    - ``shifted_norms`` — the zero-centred RMSNorm weights are stored as ``1 + w``;
    - ``tiled_value_heads`` — the gated delta net's value heads are in tiled order (head ``t = j·Hk + k`` is
      replica ``j`` of key head ``k``) in the value, ``z``, ``b``, ``a``, ``dt_bias`` and ``A`` rows and the
      value channels of the convolution;
    - ``tiled_output_columns`` — and so are the input columns of the output projection;
    - ``decay_as_ssm_a`` — ``A_log`` is stored as ``ssm_a = -exp(A_log)``;
    - ``gated_query_fused`` — the gated attention's query and gate are one tensor (``q_proj``, ``attn_q``) of
      ``2·head_dim`` rows per head, ``[query | gate]``;
    - ``gdn_qkv_fused`` — the gated delta net's query, key and value are one tensor (``in_proj_qkv``,
      ``attn_qkv``): rows ``[0, Hk·dk)``, ``[Hk·dk, 2·Hk·dk)`` and the value rows after them;
    - ``transposed_expert_banks`` — a fused expert bank (``mlp.experts.gate_up_proj``, ``mlp.experts.down_proj``)
      stores each expert's matrix as ``[in, out]``."""

    shifted_norms: bool = False
    tiled_value_heads: bool = False
    tiled_output_columns: bool = False
    decay_as_ssm_a: bool = False
    gated_query_fused: bool = False
    gdn_qkv_fused: bool = False
    transposed_expert_banks: bool = False


LOGICAL = Storage()
