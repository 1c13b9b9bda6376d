"""Small model files for the inspection tests, written with the real libraries (gguf.GGUFWriter in either
byte order, safetensors.numpy.save_file), and a sparse GGUF large enough that ``hash: full`` runs long
enough to be cancelled (its tensor data is a hole: zeros, no disk blocks)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from gguf import GGUFEndian, GGUFWriter
from safetensors.numpy import save_file

CHAT_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"


def tiny_gguf(path: Path, *, big_endian: bool = False) -> Path:
    """A tiny Qwen3 GGUF: 3 tensors (F32, F16, F32), a chat template and a tokenizer array."""
    w = GGUFWriter(str(path), "qwen3", endianess=GGUFEndian.BIG if big_endian else GGUFEndian.LITTLE)
    w.add_name("tiny")
    w.add_block_count(1)
    w.add_chat_template(CHAT_TEMPLATE)
    w.add_token_list([f"t{i}" for i in range(20)])
    w.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(8, 4))  # the writer byte-swaps
    w.add_tensor("blk.0.attn_norm.weight", np.ones(4, dtype=np.float16))
    w.add_tensor("output.weight", np.zeros((8, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def tiny_safetensors(path: Path) -> Path:
    save_file({"model.embed_tokens.weight": np.zeros((8, 4), dtype=np.float32),
               "lm_head.weight": np.ones((8, 4), dtype=np.float16)}, str(path), metadata={"format": "pt"})
    return path


def sparse_gguf(path: Path, data_bytes: int) -> Path:
    """A GGUF with one F32 tensor of ``data_bytes`` bytes whose data is never written (a sparse hole)."""
    n = data_bytes // 4
    w = GGUFWriter(str(path), "qwen3")
    w.add_tensor_info("token_embd.weight", (n,), np.dtype(np.float32), n * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    header = path.stat().st_size
    start = (header + 31) // 32 * 32
    os.truncate(path, start + n * 4)
    return path
