"""The Qwen3.5 / Qwen3.5-MoE MTP head as a component (container §4.2): config
``{"architectures": ["Qwen3_5MTP"]}`` (``["Qwen3_5MoeMTP"]`` for a MoE text model, whose MTP layer has the
sparse MoE block), ``target: "text"``, geometry from the target's config; read from the main checkpoint.

Present when the normalised text config has ``mtp_num_hidden_layers > 0`` (HF ``text_config``; GGUF
``{arch}.nextn_predict_layers``) *and* the checkpoint carries the weights (HF ``mtp.fc.weight``, GGUF
``blk.{L}.nextn.eh_proj.weight``): several published checkpoints keep the config field but strip the
tensors, and llama.cpp's ``--no-mtp`` drops both. The architecture follows the text one (the text
architecture module's ``MTP``: its layer has the text model's MLP kind); mappings ``mappings/qwen35_mtp.yaml``, ``mappings/qwen35_moe_mtp.yaml``.
"""

from __future__ import annotations

from converters.model import architectures
from converters.model.components.base import Component, Context, mapping_for, missing


def resolve(ctx: Context, component: str = "mtp") -> Component:
    main = ctx.main
    file = str(getattr(main, "path", ""))
    n = ctx.text_config.get("mtp_num_hidden_layers") or 0
    if not n:
        where = "nextn_predict_layers" if main.kind == "gguf" else "mtp_num_hidden_layers"
        raise missing(component, f"the source has no MTP head ({where} is absent or 0)", file=file)
    probe = "mtp.fc.weight" if main.kind == "hf" else f"blk.{ctx.text_config['num_hidden_layers']}.nextn.eh_proj.weight"
    if probe not in main.tensors:
        raise missing(component, f"the config declares {n} MTP layer(s) but {probe} is not in the checkpoint "
                      "(its MTP weights were stripped)", file=file)
    arch = architectures.module(ctx.text_architecture.MTP)
    args = arch.Args.from_config(ctx.text_config, file=file)
    return Component(component, arch, mapping_for(arch, component), args,
                     {"architectures": [arch.CONFIG_ARCHITECTURE]},
                     provenance={"layers": n, "from": "main"})
