"""A prequantized HF checkpoint as a source of virtual tensors (docs/prequantized.md §Source-layer contract).

:func:`attach` runs when an HF directory is opened: when its configuration declares a supported
quantization (:func:`~.config.detect`), every module holding quantized components becomes one virtual
tensor ``<module>.weight`` (``dtype`` its kind, logical shape ``(N, K)``, ``byte_length`` None) and its
component tensors leave ``source.tensors`` (``source.quantized(name).parts`` still reaches them).
"""

from __future__ import annotations

from converters.errors import SourceFormatError
from converters.sources.base import SourceTensor

from . import compressed_tensors, fp8_block, fused_experts, modelopt
from .config import QuantizationConfig, detect

HF_QUANT_CONFIG = "hf_quant_config.json"
SECTION = "docs/prequantized.md §Detection"
#: a module is quantized when one of these components is beside it
MARKERS = {"compressed-tensors": ("weight_packed", "weight_scale"), "modelopt": ("weight_scale",),
           "fp8": ("weight_scale_inv",)}
BUILDERS = {"compressed-tensors": compressed_tensors, "modelopt": modelopt, "fp8": fp8_block}
#: KV-cache (and attention) quantization scales: dropped when the configuration declares KV-cache quantization
KV_SCALES = ("k_scale", "v_scale", "q_scale")
#: components that are never kept: their meaning changes the codes' order
REFUSED = {"weight_g_idx": "actorder: group (g_idx) reorders the groups", "weight_zero_point_g_idx": "g_idx"}


def attach(ckpt) -> QuantizationConfig | None:
    """Detect ``ckpt``'s quantization and replace its component tensors by virtual tensors."""
    hqc = None
    if (ckpt.path / HF_QUANT_CONFIG).is_file():
        hqc = ckpt.read_side_json(HF_QUANT_CONFIG)
        if not isinstance(hqc, dict):
            raise SourceFormatError(f"{HF_QUANT_CONFIG} is not a JSON object", file=str(ckpt.path / HF_QUANT_CONFIG),
                                    rule="prequantized_config_type", section=SECTION)
    cfg_file = ckpt.path / ("config.json" if (ckpt.config or {}).get("quantization_config") is not None
                            else HF_QUANT_CONFIG)
    cfg = detect(ckpt.config, hqc, cfg_file)
    if cfg is None:
        return None
    ckpt.tensors = fused_experts.split(ckpt.tensors, cfg.convention)  # docs/prequantized.md §Fused expert tensors
    comps = BUILDERS[cfg.convention].COMPONENTS
    markers = MARKERS[cfg.convention]
    modules: dict[str, dict[str, SourceTensor]] = {}
    for name, t in ckpt.tensors.items():
        module, _, role = name.rpartition(".")
        if role in REFUSED:
            raise SourceFormatError(f"{module}: {role} is present: {REFUSED[role]}; the codes cannot be kept in place",
                                    file=str(t.file), json_path=name, rule="prequantized_actorder", section=SECTION)
        if module and role in comps:
            modules.setdefault(module, {})[role] = t
    quantized = {}
    for module, parts in modules.items():
        if not any(m in parts for m in markers) or _plain_fp(cfg, parts):
            continue
        scheme = cfg.scheme_for(module)
        if scheme is None:
            t = next(iter(parts.values()))
            why = "is ignored by the configuration" if cfg.ignored(module) else "matches no config group's targets"
            raise SourceFormatError(f"{module} holds quantized components ({', '.join(sorted(parts))}) but {why}",
                                    file=str(t.file), json_path=f"{module}.{next(iter(parts))}",
                                    rule="prequantized_module_scheme", section=SECTION)
        qw = BUILDERS[cfg.convention].build(module, parts, scheme, cfg)
        quantized[qw.name] = (qw, parts)
    hidden = {t.name: qw for qw, parts in quantized.values() for t in parts.values()}
    order = {}
    for name, t in ckpt.tensors.items():
        qw = hidden.get(name)
        if qw is None and cfg.kv_cache and name.rpartition(".")[2] in KV_SCALES:
            cfg.dropped.append(name)  # docs/prequantized.md §Detection: KV-cache scales are not used
            continue
        if qw is None:
            order[name] = t
            continue
        if qw.name not in order:
            order[qw.name] = SourceTensor(name=qw.name, dtype=qw.kind, type_id=None, shape=tuple(qw.shape), dims=None,
                                          file=qw.file, file_offset=0, byte_length=None,
                                          block=(qw.group or 1, 0), storage_validation="prequantized", read_type=None,
                                          read_length=None, basis="prequantized", index=t.index)
    ckpt.tensors = order
    ckpt.quantized_weights = {name: qw for name, (qw, _) in quantized.items()}
    return cfg


def _plain_fp(cfg: QuantizationConfig, parts: dict) -> bool:
    """A compressed-tensors module with only a float ``weight`` and a ``weight_scale`` is not one (FP8 and
    ``int-quantized`` store their codes as ``weight``, F8_E4M3 / I8)."""
    if cfg.convention != "compressed-tensors" or "weight_packed" in parts:
        return False
    w = parts.get("weight")
    return w is None or w.dtype not in ("F8_E4M3", "I8")
