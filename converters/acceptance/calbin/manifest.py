"""The root manifest ``<model>.yaml`` (docs/calbin.md §3): locate it, load it safely, check keys and types.

Layout read (§3.1–§3.4; where docs/calbin.md names a field without its place, our reading is stated)::

    model_name: str            seq_len: int           onnx_hash: [sha256-hex, ...]
    git_commit_id: {calcc: str, lib/tvm: str}         golden_hash: {golden_prefill: [...], ...}
    one_model_cfg:
      <submodel directory name>:          # the logical subgraph; names the submodel directory
        model_path: str                   # vendor's absolute ONNX path (provenance only)
        input_shape: {input_ids: [..], position_ids: [..], past_key_<i>: [4 ints], past_value_<i>: [..]}
        model_info: {batch_num, q0_head_num, k0_head_num, v_head_num, q0_head_dim, k0_head_dim,
                     v_head_dim, theta_base, max_seq_len, is_encoder, is_prefill, alibi}
        device_cfg: {chip_nums, calcore_num}
        calcc_env_cfg: {with_codegen, with_op_case, with_c_oplib, use_auto_alloc, enable_flash_attention,
                        enable_one_token, dynamic_d2d, has_loaded_onnx, has_optimized_graph}

Gate E fields the sample lacks are read from the top level under the names in :mod:`supply`. A field
with the wrong type is reported (``MANIFEST_SCHEMA``) and removed from the loaded document, so later
checks never see it.
"""

from __future__ import annotations

from converters.acceptance.calbin.context import Ctx

INT, NUM, BOOL, STR, MAP, SHAPE = "int", "number", "bool", "string", "mapping", "shape"

TOP_FIELDS = {"model_name": STR, "seq_len": INT, "one_model_cfg": MAP}
SUBMODEL_FIELDS = {"model_path": STR, "input_shape": MAP, "model_info": MAP, "device_cfg": MAP,
                   "calcc_env_cfg": MAP}
MODEL_INFO_FIELDS = {
    "batch_num": INT, "q0_head_num": INT, "k0_head_num": INT, "v_head_num": INT, "q0_head_dim": INT,
    "k0_head_dim": INT, "v_head_dim": INT, "theta_base": NUM, "max_seq_len": INT, "is_encoder": BOOL,
    "is_prefill": BOOL, "alibi": BOOL,
}
DEVICE_FIELDS = {"chip_nums": INT, "calcore_num": INT}
ENV_FIELDS = {k: BOOL for k in ("with_codegen", "with_op_case", "with_c_oplib", "use_auto_alloc",
                                "enable_flash_attention", "enable_one_token", "dynamic_d2d",
                                "has_loaded_onnx", "has_optimized_graph")}


def is_type(value: object, kind: str) -> bool:
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == BOOL:
        return isinstance(value, bool)
    if kind == STR:
        return isinstance(value, str) and value.strip() != ""
    if kind == MAP:
        return isinstance(value, dict)
    if kind == SHAPE:
        return isinstance(value, list) and all(is_type(d, INT) and d >= 0 for d in value)
    raise ValueError(kind)


def locate(ctx: Ctx, model_arch: str | None) -> None:
    """Pick the root manifest among the root YAML files (``hparam.yaml`` excluded).

    One candidate: it. Several: the one named ``<model_arch>.yaml`` from the runtime metadata, else
    ``MANIFEST_AMBIGUOUS``. None: ``FS_REQUIRED_MISSING``. The others become unknown files.
    """
    ctx.check("B", "root_manifest_located")
    cands = sorted(r for r, e in ctx.files.items() if e.role == "root_yaml")
    chosen = cands
    if len(cands) > 1 and model_arch:
        chosen = [r for r in cands if r.rsplit(".", 1)[0] == model_arch]
    if not cands:
        ctx.emit("FS_REQUIRED_MISSING", "root manifest <model>.yaml is missing", file="<model>.yaml")
    elif len(chosen) != 1:
        ctx.emit("MANIFEST_AMBIGUOUS", f"{len(cands)} root YAML files ({', '.join(cands)}) and none is named "
                 f"after model_arch {model_arch!r}")
    else:
        ctx.manifest_rel = chosen[0]
        ctx.files[chosen[0]].role = "manifest"
    for r in cands:
        if r != ctx.manifest_rel:
            ctx.files[r].role = "unknown"


def load(ctx: Ctx) -> None:
    """Load and schema-check the manifest into ``ctx.manifest`` (None when it cannot be used at all)."""
    rel = ctx.manifest_rel
    if rel is None or ctx.files[rel].size == 0:
        return
    ctx.check("B", "yaml_safe_load")
    doc = ctx.load_mapping(rel)
    if doc is None:
        return
    ctx.check("B", "manifest_keys_and_types")
    _fields(ctx, doc, TOP_FIELDS, "", rel)
    subs = doc.get("one_model_cfg")
    if isinstance(subs, dict):
        for name in list(subs):
            entry = subs[name]
            where = f"one_model_cfg.{name}"
            if not isinstance(entry, dict):
                ctx.emit("MANIFEST_SCHEMA", f"{where} is {type(entry).__name__}, not a mapping", file=rel,
                         path=where)
                del subs[name]
                continue
            _fields(ctx, entry, SUBMODEL_FIELDS, where, rel)
            for block, spec in (("model_info", MODEL_INFO_FIELDS), ("device_cfg", DEVICE_FIELDS),
                                ("calcc_env_cfg", ENV_FIELDS)):
                if isinstance(entry.get(block), dict):
                    _fields(ctx, entry[block], spec, f"{where}.{block}", rel)
            shapes = entry.get("input_shape")
            if isinstance(shapes, dict):
                for key in list(shapes):
                    if not is_type(shapes[key], SHAPE):
                        ctx.emit("MANIFEST_SCHEMA", f"input shape {key} is {shapes[key]!r}, not a list of "
                                 "non-negative ints", file=rel, path=f"{where}.input_shape.{key}")
                        del shapes[key]
            device = entry.get("device_cfg") or {}
            for key in ("chip_nums", "calcore_num"):
                if key in device and device[key] < 1:
                    ctx.emit("MANIFEST_SCHEMA", f"{key} = {device[key]} must be >= 1", file=rel,
                             path=f"{where}.device_cfg.{key}")
                    del device[key]
    ctx.manifest = doc


def _fields(ctx: Ctx, block: dict, spec: dict[str, str], where: str, rel: str) -> None:
    for key, kind in spec.items():
        path = f"{where}.{key}" if where else key
        if key not in block:
            ctx.emit("MANIFEST_SCHEMA", f"required key {key} is missing", file=rel, path=path)
        elif not is_type(block[key], kind):
            ctx.emit("MANIFEST_SCHEMA", f"{key} is {block[key]!r}, expected {kind}", file=rel, path=path)
            del block[key]
