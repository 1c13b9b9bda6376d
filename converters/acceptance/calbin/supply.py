"""Gate E, supply chain (docs/calbin.md §3.4, §9 Gate E, §12).

Read from the root manifest. The sample carries ``onnx_hash``, ``git_commit_id`` and ``golden_hash``;
the other Gate E requirements have no field in the sample, so this validator reads them under these
top-level names (our naming, documented in ``docs/validation-codes.md``)::

    compiler_oci_digest: "sha256:<64 hex>"      # the compiler container
    quant_config: <non-empty mapping or string>
    calibration_manifest: <non-empty mapping or string>
    oplib_version: <string>
    calbin_schema_version: <string>             # calcc_ver in the metadata is only a hint (§4.1)
    runtime_compat: {runtime: .., driver: .., firmware: .., chip: ..}

Policy (§10): missing ONNX, compiler commit or container → ``BLOCKED_REPRODUCIBILITY`` (the package may
run, it may not be called reproducible), as is any other missing Gate E field; a delivered ONNX whose
SHA-256 is not declared is an ``ERROR``. ``onnx_hash`` is recomputed over every delivered ``*.onnx``
(package root or ``onnx/``); the vendor's absolute ``model_path`` is provenance only.
"""

from __future__ import annotations

import re

from converters.acceptance.calbin.context import Ctx

_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")
_OCI_RE = re.compile(r"sha256:[0-9a-f]{64}")
COMMIT_KEYS = ("calcc", "lib/tvm")
FIELDS = ("quant_config", "calibration_manifest", "oplib_version", "calbin_schema_version")
COMPAT_KEYS = ("runtime", "driver", "firmware", "chip")


def _present(v: object) -> bool:
    return isinstance(v, (dict, list)) and bool(v) or isinstance(v, str) and v.strip() != ""


def check(ctx: Ctx) -> dict:
    """Run Gate E and return the report's ``supply_chain`` section."""
    doc = ctx.manifest
    if doc is None:
        return {}
    rel = ctx.manifest_rel
    ctx.check("E", "onnx_hash")
    hashes = doc.get("onnx_hash")
    valid = isinstance(hashes, list) and hashes and all(isinstance(h, str) and _SHA256_RE.fullmatch(h) for h in hashes)
    if not valid:
        ctx.emit("SUPPLY_ONNX_HASH_MISSING", "onnx_hash must be a non-empty list of SHA-256 hex digests",
                 file=rel, path="onnx_hash")
    declared = {h.lower() for h in hashes} if valid else set()
    delivered = [{"file": r, "sha256": e.sha256} for r, e in sorted(ctx.files.items()) if e.role == "onnx"]
    if not delivered:
        ctx.emit("SUPPLY_ONNX_MISSING", "no ONNX file is delivered (package root or onnx/); onnx_hash cannot be "
                 "recomputed, so the package is not reproducible", file=rel, path="onnx_hash")
    elif declared:
        found = {d["sha256"] for d in delivered}
        for d in delivered:
            d["declared"] = d["sha256"] in declared
        for h in sorted(declared - found):
            ctx.emit("SUPPLY_ONNX_HASH_MISMATCH", f"onnx_hash {h[:16]}... matches no delivered ONNX "
                     f"({', '.join(d['file'] for d in delivered)})", file=rel, path="onnx_hash")
    ctx.check("E", "compiler_commits")
    commits = doc.get("git_commit_id") if isinstance(doc.get("git_commit_id"), dict) else {}
    for key in COMMIT_KEYS:
        if not _present(commits.get(key)):
            ctx.emit("SUPPLY_COMPILER_COMMIT_MISSING", f"git_commit_id.{key} is missing", file=rel,
                     path=f"git_commit_id.{key}")
    ctx.check("E", "compiler_container")
    oci = doc.get("compiler_oci_digest")
    if not (isinstance(oci, str) and _OCI_RE.fullmatch(oci)):
        ctx.emit("SUPPLY_CONTAINER_MISSING", "compiler_oci_digest (sha256:<hex> of the compiler container) is "
                 "missing or malformed", file=rel, path="compiler_oci_digest")
    ctx.check("E", "gate_e_fields")
    for key in FIELDS:
        if not _present(doc.get(key)):
            ctx.emit("SUPPLY_FIELD_MISSING", f"{key} is missing", file=rel, path=key)
    compat = doc.get("runtime_compat") if isinstance(doc.get("runtime_compat"), dict) else {}
    for key in COMPAT_KEYS:
        if not _present(compat.get(key)):
            ctx.emit("SUPPLY_FIELD_MISSING", f"runtime_compat.{key} is missing", file=rel, path=f"runtime_compat.{key}")
    golden = _golden(ctx, doc, rel)
    return {
        "onnx_hash": list(hashes) if valid else [],
        "onnx_delivered": delivered,
        "model_paths": {name: cfg.get("model_path") for name, cfg in (doc.get("one_model_cfg") or {}).items()
                        if isinstance(cfg, dict)},
        "compiler_commits": {k: commits.get(k) for k in COMMIT_KEYS},
        "compiler_oci_digest": oci if isinstance(oci, str) else None,
        **{k: doc.get(k) for k in FIELDS},
        "runtime_compat": {k: compat.get(k) for k in COMPAT_KEYS},
        "calcc_ver": ctx.runtime.typed.get("calcc_ver") if ctx.runtime else None,
        "golden_hash": golden,
    }


def _golden(ctx: Ctx, doc: dict, rel: str) -> dict:
    """golden_hash entries must say which tensor/layer/file each hash is (§3.4)."""
    ctx.check("E", "golden_hash_mapping")
    golden = doc.get("golden_hash")
    if not isinstance(golden, dict) or not golden:
        ctx.emit("SUPPLY_FIELD_MISSING", "golden_hash is missing", file=rel, path="golden_hash")
        return {}
    out = {}
    for key, entries in golden.items():
        entries = entries if isinstance(entries, list) else [entries]
        mapped = [e for e in entries if isinstance(e, dict) and _present(e.get("sha256"))
                  and any(_present(e.get(k)) for k in ("tensor", "layer", "file"))]
        out[key] = {"entries": len(entries), "mapped": len(mapped)}
        if len(mapped) != len(entries):
            ctx.emit("SUPPLY_GOLDEN_UNMAPPED", f"golden_hash.{key}: {len(entries) - len(mapped)} of {len(entries)} "
                     "entries are bare hashes without the tensor/layer/file they cover", file=rel,
                     path=f"golden_hash.{key}")
    return out
