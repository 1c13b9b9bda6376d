"""Qwen3-VL-MoE text (the ``text_config`` of ``Qwen3VLMoeForConditionalGeneration``, GGUF ``qwen3vlmoe``):
Qwen3-VL's attention, interleaved mRoPE and deepstack wiring (:mod:`.qwen3_vl`, docs/qwen3-vl.md) with
Qwen3-MoE's sparse blocks (:mod:`.qwen3_moe`: router, experts in one bank per projection, no shared
expert; dense layers where ``mlp_only_layers`` says so).

The router always renormalises the top-k weights (transformers ``Qwen3VLMoeTextTopKRouter`` divides
unconditionally; llama.cpp ``qwen3vlmoe`` builds the MoE with ``norm_w``). Mapping:
``mappings/qwen3_vl_moe.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import _heads, qwen3_moe
from converters.model.architectures._args import args_from_config
from converters.model.architectures._family import Family, MoeKind, Storage
from converters.model.architectures._moe import check_moe
from converters.model.architectures.qwen3_vl import check_deepstack

NAME = "qwen3_vl_moe"
HF_ARCHITECTURES = ("Qwen3VLMoeForConditionalGeneration",)
GGUF_ARCHITECTURES = ("qwen3vlmoe",)
MAPPINGS = {"text": "qwen3_vl_moe.yaml"}
LAYER_KINDS = qwen3_moe.LAYER_KINDS
MODEL_TYPES = ("qwen3_vl_moe_text", "qwen3_vl_moe")
COMPONENTS = ("vision",)
#: no shared expert; top-k always renormalised (the config cannot turn it off); dense layers possible
GOLDEN = Family("qwen3", moe=MoeKind(shared_expert=False, norm_topk_default=None, dense_layers=True))
#: the released checkpoints' fused expert banks are ``[E, in, out]`` (docs/qwen3-vl.md §Fused transposed experts)
HF_STORAGE = Storage(transposed_expert_banks=True)
heads = _heads.attention


@dataclass(frozen=True)
class Args(qwen3_moe.Args):
    """The Qwen3VLMoeTextConfig fields the mapping reads (Qwen3-MoE's) plus the deepstack wiring."""

    deepstack_layers: tuple[int, ...]

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = args_from_config(cls, config, file=file)
        check_moe(a, a.mlp_only_layers, file)
        check_deepstack(a.deepstack_layers, a.num_hidden_layers, file)
        return a
