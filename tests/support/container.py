"""Hand-assembled NInfer v3 files for the container tests (no test functions here).

Everything is built with ``struct`` and ``json`` straight from the spec's byte tables (container
§3.1, §3.2), independent of the writer under test, so reader tests do not trust the writer.
"""

from __future__ import annotations

import copy
import json
import struct
from pathlib import Path

ENTRY_MAGIC = bytes([0x4E, 0x49, 0x4E, 0x46, 0x45, 0x52, 0x00, 0x03])  # "NINFER\0" v3 (§3.1 table)
PART_MAGIC = bytes([0x4E, 0x49, 0x4E, 0x50, 0x52, 0x54, 0x00, 0x03])  # "NINPRT\0" v3 (§3.2 table)
AID = bytes(range(16))
OTHER_AID = bytes(range(16, 32))


def ceil4096(x: int) -> int:
    return (x + 4095) // 4096 * 4096


def json_text(root) -> bytes:
    return root if isinstance(root, bytes) else json.dumps(root).encode("utf-8")


def entry_file(root, payload: bytes, *, aid: bytes = AID, json_bytes: int | None = None,
               magic: bytes = ENTRY_MAGIC, zone: bytes = b"") -> bytes:
    """Header + JSON (padded with spaces to ``json_bytes``) + zero zone up to 4096 + payload."""
    text = json_text(root)
    jb = len(text) if json_bytes is None else json_bytes
    head = magic + struct.pack("<Q", jb) + aid + text.ljust(jb, b" ")
    pad = ceil4096(len(head)) - len(head)
    zone = zone[:pad]
    return head + zone + bytes(pad - len(zone)) + payload


def part_file(index: int, payload: bytes, *, aid: bytes = AID, magic: bytes = PART_MAGIC) -> bytes:
    head = magic + struct.pack("<Q", index) + aid
    return head + bytes(4096 - len(head)) + payload


def base_root(payload_sizes: list[int], part_names: list[str] | None = None) -> dict:
    """A valid directory: a text component, two fp32 tensors, a resource, bindings, a use.

    Payload layout: ``w.a`` fp32 [4,4] at 0 (64 B), ``w.b`` fp32 [8] at 256 (32 B), ``r.t`` at 288 (16 B).
    """
    names = part_names or [f"a.ninfer.part-{i:04d}" for i in range(1, len(payload_sizes))]
    files = [{"path": None, "payload_bytes": payload_sizes[0]}]
    files += [{"path": n, "payload_bytes": s} for n, s in zip(names, payload_sizes[1:], strict=True)]
    return {
        "components": {"text": {"config": {"architectures": ["Test"], "hidden_size": 4},
                                "resources": {"tokenizer.json": "r.t"}}},
        "objects": [
            {"id": "w.a", "kind": "tensor", "shape": [4, 4], "format": "fp32", "layout": "contiguous_le_v1",
             "offset": 0, "bytes": 64},
            {"id": "w.b", "kind": "tensor", "shape": [8], "format": "fp32", "layout": "contiguous_le_v1",
             "offset": 256, "bytes": 32},
            {"id": "r.t", "kind": "resource", "encoding": "raw_bytes_v1", "offset": 288, "bytes": 16},
        ],
        "bindings": {"text/a": {"object": "w.a"},
                     "text/a_rows": {"parts": [{"object": "w.a", "range": [4, 12]}]},
                     "text/b": {"object": "w.b"}},
        "uses": [{"parameter": "text/a", "input": "text/x", "activation_policy": "A16Only"}],
        "files": files,
    }


def base_payload() -> bytes:
    """304 payload bytes matching :func:`base_root`: fp32 0..15, 256-alignment gap, fp32 100..107, text."""
    import numpy as np

    a = np.arange(16, dtype="<f4").tobytes()
    b = np.arange(100, 108, dtype="<f4").tobytes()
    return a + bytes(256 - len(a)) + b + b"tokenizer-bytes!"


def write_single(tmp: Path, root: dict | bytes | None = None, payload: bytes | None = None, **kw) -> Path:
    payload = base_payload() if payload is None else payload
    root = base_root([len(payload)]) if root is None else root
    path = tmp / "a.ninfer"
    path.write_bytes(entry_file(root, payload, **kw))
    return path


def write_split(tmp: Path, sizes: list[int], payload: bytes | None = None, root: dict | None = None,
                part_aids: dict[int, bytes] | None = None, skip: tuple[int, ...] = ()) -> Path:
    """Write the payload split into files of ``sizes`` bytes (hand framing)."""
    payload = base_payload() if payload is None else payload
    assert sum(sizes) == len(payload)
    root = base_root(sizes) if root is None else root
    path = tmp / "a.ninfer"
    path.write_bytes(entry_file(root, payload[:sizes[0]]))
    pos = sizes[0]
    for i, size in enumerate(sizes[1:], start=1):
        if i not in skip:
            aid = (part_aids or {}).get(i, AID)
            (tmp / root["files"][i]["path"]).write_bytes(part_file(i, payload[pos:pos + size], aid=aid))
        pos += size
    return path


def mutated(change) -> dict:
    """A copy of the base directory with ``change(root)`` applied."""
    root = copy.deepcopy(base_root([len(base_payload())]))
    change(root)
    return root
