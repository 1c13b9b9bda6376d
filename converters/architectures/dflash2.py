"""z-lab DFlash2 drafters (component ``dflash2``): :mod:`.dflash` plus per layer ``attention_conv`` and
``mlp_conv`` (``GroupedDynamicCausalConv``: ``base_kernel [2, conv_kernel_size, H]``,
``kernel_projection [2·conv_kernel_size·H/conv_group_size, H]``) and the ``candidate_selector``
(``hidden_projection [selector_rank, H]``, ``predecessor_codebook`` / ``successor_codebook``
``[vocab, selector_rank]``). Mapping: ``mappings/dflash2.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.architectures._args import args_from_config, fail
from converters.architectures.dflash import check, flat_config

NAME = "dflash2"
COMPONENT = "dflash2"
HF_ARCHITECTURES: tuple[str, ...] = ()
GGUF_ARCHITECTURES: tuple[str, ...] = ()
CONFIG_ARCHITECTURE = "DFlash2DraftModel"
MAPPINGS = {"dflash2": "dflash2.yaml"}
LAYER_KINDS = ("decoder",)


@dataclass(frozen=True)
class Args:
    """:class:`converters.architectures.dflash.Args` plus the convolution and selector sizes."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_target_features: int
    conv_kernel_size: int
    conv_group_size: int
    selector_rank: int

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = check(args_from_config(cls, flat_config(config), file=file), file)
        if a.hidden_size % a.conv_group_size:
            fail(f"hidden_size {a.hidden_size} is not a multiple of conv_group_size {a.conv_group_size}",
                 field="dflash_config.conv_group_size", file=file)
        return a

    def layer_kinds(self) -> list[str]:
        return ["decoder"] * self.num_hidden_layers
