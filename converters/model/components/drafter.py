"""z-lab DFlash / DFlash2 drafters as components (container §4.2, §8, §12.5): ``target: "text"``, read from
their own HF safetensors directory (``--drafter DIR``; several may be given, each classified by its
config's ``architectures``: ``DFlashDraftModel`` → ``dflash``, ``DFlash2DraftModel`` → ``dflash2``).

The drafter must belong to the text model it is converted with: same hidden size and vocabulary (it
reads the target's hidden states and uses its embedding and head), ``target_layer_ids`` inside the
target's layers and, when stated, ``num_target_layers`` equal to the target's depth. Its component
config is the drafter's ``config.json`` without the keys that only describe training or file I/O
(:data:`DROPPED_KEYS`); ``dflash_config`` is kept whole (it carries the runtime knobs).

Query K/V and context K/V (``attention/key`` vs ``attention/context_key``) are two roles of one trained
``k_proj``/``v_proj``: the mapping binds both; the recipe chooses a shared binding or separate objects.
Mappings: ``mappings/dflash.yaml``, ``mappings/dflash2.yaml``.
"""

from __future__ import annotations

from converters.errors import ConversionError
from converters.model.architectures import dflash, dflash2
from converters.model.components.base import Component, Context, mapping_for, missing

MODULES = {"dflash": dflash, "dflash2": dflash2}
BY_ARCHITECTURE = {m.CONFIG_ARCHITECTURE: cid for cid, m in MODULES.items()}
#: config keys that describe training or serialisation, not the model a runtime builds
DROPPED_KEYS = ("transformers_version", "dtype", "torch_dtype", "initializer_range", "use_cache",
                "attention_dropout", "auto_map", "_name_or_path")


def classify(source) -> str:
    """``dflash`` or ``dflash2`` for a drafter checkpoint directory (by ``config.architectures[0]``)."""
    config = getattr(source, "config", None) if getattr(source, "kind", None) == "hf" else None
    archs = config.get("architectures") if isinstance(config, dict) else None
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch not in BY_ARCHITECTURE:
        raise ConversionError(f"--drafter: not a DFlash drafter checkpoint directory (config architectures "
                              f"{archs!r}; expected one of {', '.join(BY_ARCHITECTURE)})",
                              file=str(getattr(source, "path", "")), json_path="config.architectures",
                              rule="drafter_kind")
    return BY_ARCHITECTURE[arch]


def resolve(ctx: Context, component: str) -> Component:
    source = ctx.sources.get(component)
    if source is None:
        raise missing(component, f"a {component} drafter is a checkpoint of its own; pass --drafter DIR "
                      f"(a directory whose config says {MODULES[component].CONFIG_ARCHITECTURE})",
                      file=str(getattr(ctx.main, "path", "")))
    file = str(source.path / "config.json")
    config = dict(source.config)
    mod = MODULES[component]
    args = mod.Args.from_config(config, file=file)
    _check_target(args, dflash.flat_config(config), ctx.text_config, file)
    record = {k: v for k, v in config.items() if k not in DROPPED_KEYS}
    return Component(component, mod, mapping_for(mod, component), args, record,
                     provenance={"from": component, "directory": str(source.path)})


def _check_target(args, flat: dict, text: dict, file: str) -> None:
    def fail(message: str, field: str) -> None:
        raise ConversionError(f"the drafter does not fit the text model: {message}", file=file,
                              json_path=f"config.{field}", rule="drafter_target_mismatch")

    for name in ("hidden_size", "vocab_size"):
        if getattr(args, name) != text.get(name):
            fail(f"{name} {getattr(args, name)} vs the text model's {text.get(name)}", name)
    layers = text.get("num_hidden_layers")
    ids = flat.get("target_layer_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                                            for i in ids):
        fail(f"target_layer_ids {ids!r} are not layers of the {layers}-layer text model",
             "dflash_config.target_layer_ids")
    declared = flat.get("num_target_layers")
    if declared is not None and declared != layers:
        fail(f"num_target_layers {declared} vs the text model's {layers} layers", "num_target_layers")
