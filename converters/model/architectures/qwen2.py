"""Qwen2 / Qwen2.5 dense text (``Qwen2ForCausalLM``, GGUF ``qwen2``): every layer full attention, plain
RMSNorm, no q/k norms, and a bias on the query, key and value projections (``x @ Wᵀ + b``).

Qwen2.5 checkpoints use the same class and config; what varies between sizes is ``tie_word_embeddings``
(the small ones tie the head to the embedding) and the RoPE theta. The config has no ``head_dim``: a head
is ``hidden_size / num_attention_heads`` wide (``mappings/config/qwen2.yaml``). Mapping:
``mappings/qwen2.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import _heads, qwen3
from converters.model.architectures._family import Family

NAME = "qwen2"
HF_ARCHITECTURES = ("Qwen2ForCausalLM",)
GGUF_ARCHITECTURES = ("qwen2",)
MODEL_TYPES = ("qwen2",)
MAPPINGS = {"text": "qwen2.yaml"}
LAYER_KINDS = ("full_attention",)
COMPONENTS: tuple[str, ...] = ()
#: plain norms, no q/k norms, q/k/v biases, full rotary
GOLDEN = Family("qwen2", qk_norm=False, qkv_bias=True)


def heads(g) -> _heads.HeadTable:
    """Attention heads; each bias is split like its projection's rows."""
    nh, nkv, hd = g.num_heads, g.num_kv_heads, g.head_dim
    return _heads.attention(g) | {"attention/query_bias": (0, _heads.even(nh, hd)),
                                  "attention/key_bias": (0, _heads.even(nkv, hd)),
                                  "attention/value_bias": (0, _heads.even(nkv, hd))}


@dataclass(frozen=True)
class Args(qwen3.Args):
    """The Qwen2Config fields the mapping reads: Qwen3's (transformers names; ``head_dim`` as normalised)."""
