"""Detection of a prequantized HF checkpoint from its configuration (docs/prequantized.md §Detection).

``detect(config, hf_quant_config, file)`` reads ``config.json``'s ``quantization_config`` (or ModelOpt's
``hf_quant_config.json``) strictly and returns a :class:`QuantizationConfig` — the convention, one
:class:`Scheme` per config group with the modules it targets, the ignored modules — or ``None`` when the
checkpoint declares no quantization. Anything it cannot keep exactly (an unknown ``format`` /
``quant_algo`` / ``strategy``, ``actorder: group``, dynamic weights, rotations, sparsity, a status other
than ``compressed``) is a :class:`~converters.errors.SourceFormatError` naming the file, the field and the
rule.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from converters.errors import SourceFormatError

SECTION = "docs/prequantized.md §Detection"
CT_FORMATS = ("nvfp4-pack-quantized", "float-quantized", "pack-quantized", "int-quantized")
MO_ALGOS = {"NVFP4": "MO_NVFP4", "FP8": "MO_FP8"}
#: ``re:`` patterns are matched against every module name: a bounded length, and no quantified group holding a
#: quantifier (``(a+)+``), so a hostile configuration cannot make matching take exponential time
MAX_PATTERN = 1000
NESTED_QUANTIFIER = re.compile(r"\([^()]*[*+?}][^()]*\)\s*[*+{]")


@dataclass(frozen=True)
class Scheme:
    """How one config group's modules are stored."""

    kind: str
    format: str
    num_bits: int
    group: int | None = None
    symmetric: bool = True
    block: tuple[int, int] | None = None
    strategy: str | None = None
    static_input: bool = False
    where: str = "$"  # JSON path of the group in the config


@dataclass
class QuantizationConfig:
    """A checkpoint's declared quantization: ``convention`` (``compressed-tensors`` / ``modelopt`` /
    ``fp8``), its groups ``[(targets, Scheme)]``, ``ignore`` patterns and the file they came from."""

    convention: str
    file: str
    groups: list[tuple[list[str], Scheme]]
    ignore: list[str] = field(default_factory=list)
    output_dtype: str = "bfloat16"  # the model dtype a library dequantizes to where the rule uses it
    notes: list[str] = field(default_factory=list)
    kv_cache: bool = False  # KV-cache quantization declared: its scale tensors are dropped, listed in ``dropped``
    dropped: list[str] = field(default_factory=list)

    def ignored(self, module: str) -> bool:
        return any(_matches(p, module, self.convention) for p in self.ignore)

    def scheme_for(self, module: str) -> Scheme | None:
        """The scheme of ``module``: a group naming it exactly, else one matching it by ``re:`` pattern, else
        one targeting a layer class (``Linear``: any module holding quantized components)."""
        if self.ignored(module):
            return None
        for rank in (_exact, _regex, _klass):
            for targets, scheme in self.groups:
                if any(rank(t, module) for t in targets):
                    return scheme
        return None

    def describe(self) -> dict:
        """Convention, schemes, formats and ignored modules (``convert inspect``)."""
        return {"convention": self.convention, "file": Path(self.file).name,
                "formats": sorted({s.format for _, s in self.groups}),
                "schemes": [{"targets": t, "kind": s.kind, "num_bits": s.num_bits, "group": s.group,
                             "symmetric": s.symmetric, "strategy": s.strategy,
                             "block": list(s.block) if s.block else None, "static_input": s.static_input}
                            for t, s in self.groups],
                "ignore": list(self.ignore), "dropped": list(self.dropped), "notes": list(self.notes)}


def _exact(target: str, module: str) -> bool:
    return not target.startswith("re:") and target == module


def _regex(target: str, module: str) -> bool:
    return target.startswith("re:") and re.match(target[3:], module) is not None


def _klass(target: str, module: str) -> bool:
    return not target.startswith("re:") and "." not in target and target[:1].isupper()


def _matches(pattern: str, module: str, convention: str) -> bool:
    if convention == "compressed-tensors":
        return _exact(pattern, module) or _regex(pattern, module)
    # ModelOpt exclude_modules and fp8 modules_to_not_convert: wildcards, or a name prefix
    return fnmatch.fnmatchcase(module, pattern) or module == pattern or module.startswith(pattern + ".")


def _err(file: str, path: str, msg: str, rule: str) -> SourceFormatError:
    return SourceFormatError(msg, file=file, json_path=path, rule=rule, section=SECTION)


def _obj(value, file: str, path: str) -> dict:
    if not isinstance(value, dict):
        raise _err(file, path, f"is {type(value).__name__}, not an object", "prequantized_config_type")
    return value


def _str_list(value, file: str, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _err(file, path, "is not a list of strings", "prequantized_config_type")
    for i, v in enumerate(value):
        if v.startswith("re:"):
            if len(v) > MAX_PATTERN or NESTED_QUANTIFIER.search(v):
                raise _err(file, f"{path}[{i}]", f"pattern {v[:80]!r} is refused: longer than {MAX_PATTERN} characters "
                           "or a repeated group that repeats inside (matching could take exponential time)",
                           "prequantized_config_pattern")
            try:
                re.compile(v[3:])
            except re.error as exc:
                raise _err(file, f"{path}[{i}]", f"pattern {v!r} does not compile: {exc}",
                           "prequantized_config_pattern") from None
    return list(value)


def _output_dtype(config: dict) -> str:
    d = config.get("torch_dtype", config.get("dtype"))
    return d if d in ("float32", "bfloat16", "float16") else "bfloat16"


def detect(config: dict | None, hf_quant_config: dict | None, file) -> QuantizationConfig | None:
    """The checkpoint's :class:`QuantizationConfig`, or None when it declares none."""
    file = str(file)
    config = config or {}
    qc = config.get("quantization_config")
    if qc is None and hf_quant_config is None:
        return None
    if qc is None:
        return _modelopt({}, hf_quant_config, file, _output_dtype(config))
    qc = _obj(qc, file, "$.quantization_config")
    method = qc.get("quant_method")
    if method == "compressed-tensors":
        return _compressed_tensors(qc, file)
    if method == "modelopt":
        return _modelopt(qc, hf_quant_config, file, _output_dtype(config))
    if method == "fp8":
        return _fp8_block(qc, file, _output_dtype(config))
    raise _err(file, "$.quantization_config.quant_method",
               f"quant_method {method!r} is not supported (supported: compressed-tensors, modelopt, fp8)",
               "prequantized_quant_method")


# --- compressed-tensors ---------------------------------------------------------------------------------

def _compressed_tensors(qc: dict, file: str) -> QuantizationConfig:
    base = "$.quantization_config"
    status = qc.get("quantization_status", "compressed")
    if status != "compressed":
        raise _err(file, f"{base}.quantization_status", f"status {status!r}: only compressed checkpoints hold "
                   "codes and scales (a frozen one holds fake-quantized floats)", "prequantized_status")
    for key in ("transform_config", "sparsity_config"):
        v = qc.get(key)
        if v and not (key == "sparsity_config" and isinstance(v, dict) and v.get("format") in (None, "dense")):
            raise _err(file, f"{base}.{key}", f"{key} is set: rotated or sparse weights are not kept exactly",
                       "prequantized_unsupported")
    groups_cfg = _obj(qc.get("config_groups"), file, f"{base}.config_groups")
    top_format = qc.get("format")
    groups = []
    for gname, g in groups_cfg.items():
        path = f"{base}.config_groups.{gname}"
        g = _obj(g, file, path)
        targets = _str_list(g.get("targets"), file, f"{path}.targets")
        if not targets:
            raise _err(file, f"{path}.targets", "no targets", "prequantized_config_type")
        groups.append((targets, _ct_scheme(g, g.get("format") or top_format, file, path)))
    cfg = QuantizationConfig("compressed-tensors", file, groups, _str_list(qc.get("ignore"), file, f"{base}.ignore"))
    if qc.get("kv_cache_scheme"):
        cfg.kv_cache = True
        cfg.notes.append("kv_cache_scheme is set: KV-cache scales are not used (the artifact's cache is the runtime's)")
    return cfg


def _ct_scheme(g: dict, fmt, file: str, path: str) -> Scheme:
    w = _obj(g.get("weights"), file, f"{path}.weights")
    wp = f"{path}.weights"
    if fmt not in CT_FORMATS:
        raise _err(file, f"{path}.format", f"format {fmt!r} is not supported (supported: {', '.join(CT_FORMATS)})",
                   "prequantized_format")
    bits, typ, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
    if w.get("dynamic") not in (False, None):
        raise _err(file, f"{wp}.dynamic", "dynamic weight quantization stores no scales", "prequantized_dynamic")
    if w.get("actorder") in ("group", "dynamic"):  # "dynamic" is compressed-tensors' alias of "group"
        raise _err(file, f"{wp}.actorder", f"actorder: {w.get('actorder')} reorders the groups (g_idx); the codes "
                   "cannot be kept in place", "prequantized_actorder")
    sym = w.get("symmetric", True)
    if not isinstance(sym, bool):
        raise _err(file, f"{wp}.symmetric", f"{sym!r} is not a boolean", "prequantized_config_type")
    gs = w.get("group_size")
    ia = g.get("input_activations")
    static = isinstance(ia, dict) and ia.get("dynamic") in (False, "local")
    kw = dict(format=fmt, num_bits=bits, symmetric=sym, strategy=strategy, static_input=static, where=path)
    if fmt == "nvfp4-pack-quantized":
        if (bits, typ, gs) != (4, "float", 16) or strategy not in ("tensor_group", "group") or not sym:
            raise _err(file, wp, f"nvfp4-pack-quantized needs 4-bit symmetric float weights in groups of 16 "
                       f"(got num_bits {bits}, type {typ}, group_size {gs}, strategy {strategy})", "prequantized_scheme")
        return Scheme("CT_NVFP4", group=16, **kw)
    if fmt == "float-quantized":
        if (bits, typ) != (8, "float") or not sym:
            raise _err(file, wp, f"float-quantized needs 8-bit symmetric float weights (got num_bits {bits}, "
                       f"type {typ}, symmetric {sym})", "prequantized_scheme")
        if strategy == "block":
            bs = w.get("block_structure")
            if not (isinstance(bs, list) and len(bs) == 2 and all(type(b) is int and b > 0 for b in bs)):
                raise _err(file, f"{wp}.block_structure", f"{bs!r} is not [rows, columns]", "prequantized_scheme")
            return Scheme("CT_FP8_BLOCK", block=(bs[0], bs[1]), **kw)
        kind = {"tensor": "CT_FP8_TENSOR", "channel": "CT_FP8_CHANNEL"}.get(strategy) if isinstance(strategy, str) else None
        if kind is None:
            raise _err(file, f"{wp}.strategy", f"strategy {strategy!r} is not supported for float-quantized "
                       "(tensor, channel, block)", "prequantized_strategy")
        return Scheme(kind, **kw)
    if typ != "int" or bits not in ((8,) if fmt == "int-quantized" else (4, 8)):
        raise _err(file, wp, f"{fmt} needs {'8' if fmt == 'int-quantized' else '4- or 8'}-bit int weights (got "
                   f"num_bits {bits}, type {typ})", "prequantized_scheme")
    if strategy == "group":
        if type(gs) is not int or gs <= 0:
            raise _err(file, f"{wp}.group_size", f"{gs!r} is not a positive group size", "prequantized_scheme")
        return Scheme(f"CT_INT{bits}", group=gs, **kw)
    if strategy == "channel":
        return Scheme(f"CT_INT{bits}", **kw)
    raise _err(file, f"{wp}.strategy", f"strategy {strategy!r} is not supported for {fmt} (group, channel)",
               "prequantized_strategy")


# --- ModelOpt ---------------------------------------------------------------------------------------------

def _modelopt(qc: dict, hqc: dict | None, file: str, out: str) -> QuantizationConfig:
    algo, where = qc.get("quant_algo"), "$.quantization_config.quant_algo"
    ignore = _str_list(qc.get("ignore") or qc.get("exclude_modules"), file, "$.quantization_config.ignore")
    if hqc is not None:
        q = _obj(hqc.get("quantization"), file, "hf_quant_config.json $.quantization")
        algo = algo or q.get("quant_algo")
        where = "hf_quant_config.json $.quantization.quant_algo" if not qc.get("quant_algo") else where
        ignore = ignore or _str_list(q.get("exclude_modules"), file, "hf_quant_config.json $.quantization.exclude_modules")
        gs = q.get("group_size")
        if algo == "NVFP4" and gs not in (None, 16):
            raise _err(file, "hf_quant_config.json $.quantization.group_size", f"NVFP4 group_size {gs!r} is not 16",
                       "prequantized_scheme")
    kind = MO_ALGOS.get(algo) if isinstance(algo, str) else None
    if kind is None:
        raise _err(file, where, f"quant_algo {algo!r} is not supported (supported: {', '.join(MO_ALGOS)})",
                   "prequantized_quant_algo")
    scheme = Scheme(kind, format=algo, num_bits=4 if kind == "MO_NVFP4" else 8,
                    group=16 if kind == "MO_NVFP4" else None, strategy="tensor_group" if kind == "MO_NVFP4" else "tensor",
                    static_input=True, where=where)
    cfg = QuantizationConfig("modelopt", file, [(["Linear"], scheme)], ignore, out)
    kv = (hqc or {}).get("quantization", {}).get("kv_cache_quant_algo") if isinstance(hqc, dict) else None
    if kv or qc.get("kv_cache_scheme") or qc.get("kv_cache_quant_algo"):
        cfg.kv_cache = True
        cfg.notes.append("KV-cache quantization is set: its scales are not used (the artifact's cache is the runtime's)")
    return cfg


# --- Qwen block FP8 ---------------------------------------------------------------------------------------

def _fp8_block(qc: dict, file: str, out: str) -> QuantizationConfig:
    base = "$.quantization_config"
    bs = qc.get("weight_block_size")
    if not (isinstance(bs, list) and len(bs) == 2 and all(type(b) is int and b > 0 for b in bs)):
        raise _err(file, f"{base}.weight_block_size", f"{bs!r} is not [rows, columns]", "prequantized_scheme")
    fmt = qc.get("fmt", "e4m3")
    if fmt != "e4m3":
        raise _err(file, f"{base}.fmt", f"fmt {fmt!r} is not supported (e4m3)", "prequantized_format")
    act = qc.get("activation_scheme", "dynamic")
    if act not in ("dynamic", "static"):
        raise _err(file, f"{base}.activation_scheme", f"{act!r} is not dynamic or static", "prequantized_scheme")
    scheme = Scheme("FP8_BLOCK", format="fp8", num_bits=8, block=(bs[0], bs[1]), strategy="block",
                    static_input=act == "static", where=base)
    ignore = _str_list(qc.get("modules_to_not_convert"), file, f"{base}.modules_to_not_convert")
    return QuantizationConfig("fp8", file, [(["Linear"], scheme)], ignore, out)
