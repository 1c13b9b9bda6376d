"""Raw and library-written source files for the reader tests: GGUF (byte by byte and via gguf-py), safetensors, .ninfer."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import gguf
import numpy as np
from gguf import GGUFValueType as V

SCALAR_CODES = {V.UINT8: "B", V.INT8: "b", V.UINT16: "H", V.INT16: "h", V.UINT32: "I", V.INT32: "i",
                V.FLOAT32: "f", V.BOOL: "B", V.UINT64: "Q", V.INT64: "q", V.FLOAT64: "d"}


def writer_gguf(path: Path, *, arch: str = "qwen3", tensors: dict | None = None, kv=None,
                alignment: int | None = None) -> dict:
    """Write a GGUF with GGUFWriter. ``tensors``: name → float32/float16 array or ``(uint8 bytes array,
    GGMLQuantizationType)``; ``kv``: callable(writer) adding metadata. Returns the tensors dict."""
    w = gguf.GGUFWriter(str(path), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    if kv is not None:
        kv(w)
    for name, value in (tensors or {}).items():
        if isinstance(value, tuple):
            data, qtype = value
            w.add_tensor(name, data, raw_dtype=qtype)
        else:
            w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tensors or {}


def q8_0_blocks(values: np.ndarray) -> np.ndarray:
    """Q8_0 blocks written by hand (fp16 d = absmax/127, int8 codes), rows of ``values`` (ne0 % 32 == 0)."""
    x = values.reshape(-1, 32).astype(np.float32)
    d = np.abs(x).max(axis=1) / 127.0
    q = np.round(x / np.where(d == 0, 1, d)[:, None]).astype(np.int8)
    blocks = np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), q.view(np.uint8)], axis=1)
    return blocks.reshape(values.shape[0], -1)


class RawGGUF:
    """GGUF bytes from explicit parts; every count and offset can be overridden to build bad files."""

    def __init__(self, order: str = "<", version: int = 3, magic: bytes = b"GGUF", alignment: int = 32) -> None:
        self.order, self.version, self.magic, self.alignment = order, version, magic, alignment
        self.kv_blobs: list[bytes] = []
        self.infos: list[tuple[bytes, list[int], int, int]] = []
        self.data = bytearray()

    def p(self, fmt: str, *v) -> bytes:
        return struct.pack(self.order + fmt, *v)

    def string(self, s: str | bytes) -> bytes:
        b = s.encode() if isinstance(s, str) else s
        return self.p("Q", len(b)) + b

    def value(self, vtype: int, v, etype: int | None = None) -> bytes:
        if vtype == V.STRING:
            return self.string(v)
        if vtype == V.ARRAY:
            body = b"".join(self.value(etype, e, None) if etype != V.ARRAY else self.value(V.ARRAY, *e) for e in v)
            return self.p("I", etype) + self.p("Q", len(v)) + body
        return self.p(SCALAR_CODES[vtype], v)

    def kv(self, key: str | bytes, vtype: int, v, etype: int | None = None) -> RawGGUF:
        self.kv_blobs.append(self.string(key) + self.p("I", vtype) + self.value(vtype, v, etype))
        return self

    def kv_raw(self, blob: bytes) -> RawGGUF:
        self.kv_blobs.append(blob)
        return self

    def tensor(self, name: str | bytes, dims: list[int], type_id: int, data: bytes = b"",
               offset: int | None = None) -> RawGGUF:
        """Append a tensor; ``data`` goes at ``offset`` (default: the next aligned position)."""
        if offset is None:
            offset = len(self.data)
        if len(self.data) < offset + len(data):
            self.data.extend(b"\0" * (offset + len(data) - len(self.data)))
        self.data[offset:offset + len(data)] = data
        pad = -len(self.data) % self.alignment
        self.data.extend(b"\0" * pad)
        nm = name.encode() if isinstance(name, str) else name
        self.infos.append((nm, dims, type_id, offset))
        return self

    def directory(self, n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
        out = self.magic + self.p("I", self.version)
        out += self.p("Q", len(self.infos) if n_tensors is None else n_tensors)
        out += self.p("Q", len(self.kv_blobs) if n_kv is None else n_kv)
        out += b"".join(self.kv_blobs)
        for name, dims, type_id, offset in self.infos:
            out += self.string(name) + self.p("I", len(dims)) + b"".join(self.p("Q", d) for d in dims)
            out += self.p("I", type_id) + self.p("Q", offset)
        return out

    def build(self, *, n_tensors: int | None = None, n_kv: int | None = None, pad: bool = True) -> bytes:
        head = self.directory(n_tensors, n_kv)
        if not self.infos and not self.data and not pad:
            return head
        return head + b"\0" * (-len(head) % self.alignment) + bytes(self.data)

    def write(self, path: Path, **kw) -> Path:
        path.write_bytes(self.build(**kw))
        return path


def raw_safetensors(header: str | bytes | dict, data: bytes = b"", *, length: int | None = None,
                    pad: bool = True) -> bytes:
    """safetensors bytes: 8-byte LE length (``length`` overrides), the header text, ``data``."""
    if isinstance(header, dict):
        header = json.dumps(header)
    text = header.encode() if isinstance(header, str) else header
    if pad:
        text += b" " * (-len(text) % 8)
    n = len(text) if length is None else length
    return struct.pack("<Q", n) + text + data


def write_safetensors(path: Path, tensors: dict) -> None:
    """A safetensors file of ``tensors`` (name → ``(dtype, shape, bytes)``), data in that order, header unpadded."""
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    path.write_bytes(raw_safetensors(header, b"".join(blobs), pad=False))


def write_ninfer(path: Path, *, max_file_bytes: int | None = None, with_template: bool = True):
    """A small text artifact: a bf16 matrix, an fp32 vector bound by one part, a chat-template resource.

    Returns ``(path, matrix_values)``."""
    from ninfer_core import ArtifactWriter, Binding, Component, Use, codecs

    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64}
    x = (np.arange(4 * 1024, dtype=np.float32).reshape(4, 1024) % 17) - 8
    resources = {"chat_template.jinja": "r.tpl"} if with_template else {}
    with ArtifactWriter(path, components={"text": Component(cfg, resources=resources)},
                        max_file_bytes=max_file_bytes, metadata={"name": "tiny", "layers": 1},
                        provenance={"source": "tests"}, artifact_id="00112233445566778899aabbccddeeff") as w:
        w.add_tensor("w.a", (4, 1024), "bf16", "contiguous_le_v1")
        w.add_tensor("w.b", (8,), "fp32", "contiguous_le_v1")
        w.add_resource("r.tpl", 10)
        w.add_binding("text/token_embedding", Binding.whole("w.a"))
        w.add_binding("text/final_norm", Binding.of_parts([("w.b", (0, 4))]))
        w.add_use(Use("text/token_embedding", "text/final_hidden", "A16Only"))
        w.plan()
        w.write_object("w.a", codecs.encode("bf16", "contiguous_le_v1", x))
        w.write_object("w.b", np.arange(8, dtype=np.float32).tobytes())
        w.write_object("r.tpl", b"{{ hi }}!!")
    return path, x
