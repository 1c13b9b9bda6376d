"""The JSON documents of ``convert check``, ``verify`` and ``validate`` on tiny models, and their key paths.

Scripts read these documents; docs/acceptance.md promises that fields are added, never removed or retyped.
:func:`documents` makes one of each report kind a script meets (a clean pass, a run without the source, an
artifact that cannot be opened, a value defect with structured detail, the calbin package report) and
:func:`key_paths` reduces a document to ``{key path: value types}`` (list items share the path ``[]``), so a
test can compare the shape of today's output with the shape recorded before a refactor.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from converters.acceptance.calbin import validate_calbin
from converters.acceptance.check import run_check
from converters.acceptance.gates.verify import verify
from converters.acceptance.validate_ninfer import validate_ninfer
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tinymodels import qwen35
from tinymodels.calbin import write_calbin_package

#: the bf16 object whose bytes the value defect flips (an attention matrix of layer 3)
DEFECT_OBJECT = "text/layers/3/attention/query"


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "list", dict: "object"}[type(value)]


def key_paths(doc, prefix: str = "$") -> dict[str, set[str]]:
    """``{path: {json type, ...}}`` of every value in ``doc``; list items are ``path[]``."""
    out: dict[str, set[str]] = {prefix: {_json_type(doc)}}
    children = doc.items() if isinstance(doc, dict) else ((None, v) for v in doc) if isinstance(doc, list) else ()
    for key, value in children:
        path = f"{prefix}[]" if key is None else f"{prefix}.{key}"
        for p, types in key_paths(value, path).items():
            out.setdefault(p, set()).update(types)
    return out


def _flip_bytes(path: Path, object_id: str) -> None:
    """Negate the first bf16 values of ``object_id`` in place (its bytes stay a valid encoding)."""
    with open_artifact(path) as art:
        offset = art.object(object_id).offset + art.files[0].payload_start  # one file: payload offset 0
    with open(path, "r+b") as fh:
        fh.seek(offset)
        words = np.frombuffer(fh.read(64), dtype="<u2") ^ np.uint16(0x8000)
        fh.seek(offset)
        fh.write(words.tobytes())


def documents(d: Path) -> dict[str, dict]:
    """Each report kind's JSON on tiny models written under ``d`` (about ten seconds on one core)."""
    cfg = qwen35.config()
    gguf = d / "q35.Q8_0.gguf"
    qwen35.write_gguf(gguf, cfg, matrix_type="Q8_0")
    art = d / "q35.ninfer"
    convert(gguf, art, recipe="groupwise-int", workers=1)
    defect = d / "defect.ninfer"
    convert(gguf, defect, recipe="bf16", workers=1)
    _flip_bytes(defect, DEFECT_OBJECT)
    broken = d / "broken.ninfer"
    shutil.copyfile(art, broken)
    with open(broken, "r+b") as fh:
        fh.write(b"XXXX")  # the magic: nothing can be opened
    calbin = write_calbin_package(d / "calbin")
    return {
        "verify_pass": verify(art, gguf).to_json(),
        "verify_no_source": verify(art).to_json(),
        "verify_defect": verify(defect, gguf, layers=[3]).to_json(),
        "verify_broken": verify(broken, gguf).to_json(),
        "validate_pass": validate_ninfer(art).to_json(),
        "validate_sanitized": validate_ninfer(defect, context=64, batch=2).to_json(sanitized=True),
        "validate_broken": validate_ninfer(broken).to_json(),
        "check": run_check(gguf, workers=1),
        "calbin": validate_calbin(calbin.root).to_json(),
    }
