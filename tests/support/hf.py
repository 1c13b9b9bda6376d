"""A sharded HF checkpoint (two safetensors shards and an index) for the HF reader and inspection tests."""

from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import save_file

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def make_sharded(d, *, weight_map=None, shard2=None, config=True):
    d.mkdir(exist_ok=True)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full(4, 0.5, dtype=np.float16)
    c = np.arange(4, dtype=np.int32).reshape(2, 2)
    save_file({"a": a, "b": b}, d / SHARD1, metadata={"format": "pt"})
    save_file(shard2 if shard2 is not None else {"c": c}, d / SHARD2)
    wm = weight_map if weight_map is not None else {"a": SHARD1, "b": SHARD1, "c": SHARD2}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 24 + 8 + 16},
                                                                "weight_map": wm}))
    if config:
        (d / "config.json").write_text(json.dumps({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}))
    (d / "tokenizer.json").write_text("{}")
    (d / "chat_template.jinja").write_text("{{ m }}")
    return a, b, c
