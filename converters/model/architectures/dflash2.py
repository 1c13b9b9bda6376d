"""z-lab DFlash2 drafters (component ``dflash2``): :mod:`.dflash` plus per layer ``attention_conv`` and
``mlp_conv`` (``GroupedDynamicCausalConv``: ``base_kernel [2, conv_kernel_size, H]``,
``kernel_projection [2·conv_kernel_size·H/conv_group_size, H]``) and the ``candidate_selector``
(``hidden_projection [selector_rank, H]``, ``predecessor_codebook`` / ``successor_codebook``
``[vocab, selector_rank]``). Mapping: ``mappings/dflash2.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from converters.model.architectures import dflash
from converters.model.architectures._args import require_multiple

NAME = "dflash2"
COMPONENT = "dflash2"
HF_ARCHITECTURES: tuple[str, ...] = ()
GGUF_ARCHITECTURES: tuple[str, ...] = ()
CONFIG_ARCHITECTURE = "DFlash2DraftModel"
MAPPINGS = {"dflash2": "dflash2.yaml"}
LAYER_KINDS = ("decoder",)
heads = dflash.heads


@dataclass(frozen=True)
class Args(dflash.Args):
    """:class:`converters.model.architectures.dflash.Args` plus the convolution and selector sizes."""

    conv_kernel_size: int
    conv_group_size: int
    selector_rank: int

    @classmethod
    def from_config(cls, config: dict, *, file: str | None = None) -> Args:
        a = super().from_config(config, file=file)
        require_multiple(a, "hidden_size", "conv_group_size", field="dflash_config.conv_group_size", file=file)
        return a
