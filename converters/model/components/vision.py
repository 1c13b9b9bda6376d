"""The Qwen3.5 / Qwen3-VL vision tower as a component (container §4.2, §9.1): config with its standard
``model_type`` (``qwen3_5_vision``, ``qwen3_5_moe_vision``, ``qwen3_vl``), ``target: "text"``, processor resources in
``vision.resources``.

Weights come from an mmproj GGUF when ``--mmproj`` is given (llama.cpp never writes the tower into the
text GGUF), else from the HF checkpoint's ``model.visual.*``; giving both is refused (two towers, no way to
know which was meant). The config is :func:`converters.model.config_normalize.explain_vision_config` of that
input (an mmproj marking deepstack layers is read as the Qwen3-VL tower, ``qwen3_vl``, with its deepstack
mergers, and is accepted beside any supported text model); its ``out_hidden_size`` must be the text hidden
size (the merger projects into the text model). Beside a Qwen3-VL text model the tower must have one
deepstack merger per entry of the text config's ``deepstack_layers`` (docs/qwen3-vl.md §Deepstack contract).

Resources: the HF directory's ``preprocessor_config.json`` / ``video_preprocessor_config.json`` copied
byte-for-byte (when the main input is an HF directory, even with ``--mmproj``); with a GGUF main input, a
``preprocessor_config.json`` rebuilt from the mmproj's ``clip.vision.*`` keys — only the values the file
states (image mean/std, patch and merge size) plus the normalised ``temporal_patch_size``, with
provenance naming the keys (nothing is invented: the image processor class is not in the file).
Mapping: ``mappings/qwen3_5_vision.yaml``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from converters.errors import ConversionError
from converters.model.architectures import qwen3_5_vision
from converters.model.components.base import Component, Context, mapping_for, missing
from converters.model.config_normalize import explain_vision_config
from converters.sources.frontend import VISION_ROLES, frontend_resources

HF_PREFIXES = ("model.visual.", "visual.")
#: preprocessor_config.json key → mmproj metadata key it is rebuilt from
REBUILT_KEYS = {"image_mean": "clip.vision.image_mean", "image_std": "clip.vision.image_std",
                "patch_size": "clip.vision.patch_size", "merge_size": "clip.vision.spatial_merge_size"}


def resolve(ctx: Context, component: str = "vision") -> Component:
    main, mmproj = ctx.main, ctx.sources.get("mmproj")
    file = str(getattr(main, "path", ""))
    hf_tower = main.kind == "hf" and any(n.startswith(HF_PREFIXES) for n in main.tensors)
    if mmproj is None and not hf_tower:
        if main.kind == "gguf":
            raise missing(component, "a text GGUF never carries the vision tower (llama.cpp writes it to a separate "
                          "mmproj GGUF); pass --mmproj FILE", file=file)
        raise missing(component, "the checkpoint has no model.visual.* tensors (a text-only checkpoint); pass "
                      "--mmproj FILE", file=file)
    if mmproj is not None and hf_tower:
        raise ConversionError("two vision towers: the checkpoint's model.visual.* and --mmproj; drop --mmproj to "
                              "convert the checkpoint's own tower", file=str(mmproj.path), rule="vision_ambiguous")
    source = mmproj if mmproj is not None else main
    text_gguf_arch = main.metadata.get("general.architecture") if main.kind == "gguf" else (
        ctx.text_architecture.GGUF_ARCHITECTURES[0] if ctx.text_architecture.GGUF_ARCHITECTURES else None)
    deepstack = mmproj is not None and any(mmproj.metadata.get("clip.vision.is_deepstack_layers") or [])
    # an mmproj that marks deepstack layers is a Qwen3-VL tower whatever the text model (explain_vision_config)
    explained = explain_vision_config(source, text_arch=text_gguf_arch if mmproj is not None and not deepstack
                                      else None)
    config = explained.config
    vfile = str(getattr(source, "path", ""))
    if config.get("model_type") not in qwen3_5_vision.MODEL_TYPES:
        raise missing(component, f"vision tower model_type {config.get('model_type')!r} is not one the converter "
                      f"maps ({', '.join(qwen3_5_vision.MODEL_TYPES)})", file=vfile)
    args = qwen3_5_vision.Args.from_config(config, file=vfile)
    hidden = ctx.text_config.get("hidden_size")
    if args.out_hidden_size != hidden:
        raise ConversionError(f"the vision tower projects to {args.out_hidden_size}, the text model's hidden size is "
                              f"{hidden}: the tower belongs to another model", file=vfile,
                              json_path="vision_config.out_hidden_size", rule="vision_target_mismatch")
    _check_deepstack(ctx.text_config, args, vfile)
    return Component(component, qwen3_5_vision, mapping_for(qwen3_5_vision, component), args, config,
                     resources=_resources(main, mmproj, config),
                     provenance={"from": "mmproj" if mmproj is not None else "main", "file": vfile,
                                 "config_evidence": dict(explained.evidence)})


def _check_deepstack(text_config: dict, args, vfile: str) -> None:
    """A text model taking deepstack inputs needs one merger per deepstack layer (docs/qwen3-vl.md)."""
    layers = text_config.get("deepstack_layers")
    if layers is not None and len(layers) != args.deepstack_count:
        raise ConversionError(f"the text model adds deepstack features after {len(layers)} layers "
                              f"(deepstack_layers {list(layers)}), the vision tower has {args.deepstack_count} "
                              "deepstack mergers: the tower belongs to another model", file=vfile,
                              json_path="vision_config.deepstack_visual_indexes", rule="vision_target_mismatch")


def _resources(main, mmproj, config: dict) -> list[tuple[str, bytes, dict]]:
    if main.kind == "hf" and any(r in getattr(main, "resource_files", {}) for r in VISION_ROLES):
        fr = frontend_resources(main)
        return [(role, data, fr.provenance.get(role, {})) for role, data in fr.for_roles(VISION_ROLES).items()]
    if mmproj is None:
        return []
    return [rebuilt_preprocessor_config(mmproj, config)]


def rebuilt_preprocessor_config(mmproj, config: dict) -> tuple[str, bytes, dict]:
    """``preprocessor_config.json`` from the mmproj's ``clip.vision.*`` values (see the module docstring)."""
    meta = mmproj.metadata
    out: dict[str, object] = {}
    read = []
    for key, mkey in REBUILT_KEYS.items():
        value = meta.get(mkey)
        if value is None:
            continue
        if key in ("image_mean", "image_std"):
            values = list(np.asarray(value, dtype=np.float32).reshape(-1))
            value = [float(str(np.float32(v))) for v in values]  # float32 in the file: its shortest repr
        else:
            value = int(value)
        out[key] = value
        read.append(mkey)
    out["temporal_patch_size"] = config["temporal_patch_size"]
    data = (json.dumps(out, indent=2, sort_keys=True) + "\n").encode("utf-8")
    prov = {"origin": "rebuilt", "from": str(mmproj.path), "keys": read,
            "derived": {"temporal_patch_size": "normalised vision config"},
            "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    return "preprocessor_config.json", data, prov
