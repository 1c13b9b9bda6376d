"""The NVFP4 checkpoint ``make bench`` generates (bench/prequantized.py) has the layout compressed-tensors
writes: the same tensor names, dtypes and shapes, and the same quantization scheme, as the library-made
fixture ``tests/fixtures/prequantized/ct-nvfp4`` at its dims; and it is read back by the safetensors library."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors import safe_open

from bench import prequantized

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "prequantized" / "ct-nvfp4"
FIXTURE_DIMS = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=64, vocab_size=512, tie_word_embeddings=False)


def header(files) -> dict[str, tuple[str, list[int]]]:
    out = {}
    for f in files:
        raw = f.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        out.update({k: (v["dtype"], v["shape"]) for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__"})
    return out


def test_generated_checkpoint_has_the_library_layout(tmp_path, monkeypatch):
    monkeypatch.setattr(prequantized, "SHARD_BYTES", 200_000)  # several shards and an index
    out = tmp_path / "ck"
    cfg = prequantized.write_checkpoint(out, 600_000, dims=FIXTURE_DIMS)
    shards = sorted(out.glob("*.safetensors"))
    assert len(shards) > 1
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {s.name for s in shards}
    want = json.loads((FIXTURE / "config.json").read_text())["quantization_config"]
    got = cfg["quantization_config"]
    assert got["format"] == want["format"] and got["quant_method"] == want["quant_method"]
    assert got["ignore"] == want["ignore"] and got["config_groups"] == want["config_groups"]
    generated, library = header(shards), header([FIXTURE / "model.safetensors"])
    layer0 = {k: v for k, v in generated.items() if ".layers." not in k or ".layers.0." in k}
    assert layer0 == library
    assert set(index["weight_map"]) == set(generated)
    for shard in shards:  # read back: the library for every numpy dtype, the raw bytes of the e4m3 scales
        raw = shard.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        entries = {k: v for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__"}
        with safe_open(str(shard), "np") as f:
            for name, entry in entries.items():
                if entry["dtype"] == "F8_E4M3":  # positive, finite, not zero: sign 0, never 0x7F (NaN)
                    a, b = entry["data_offsets"]
                    scales = np.frombuffer(raw[8 + n + a:8 + n + b], np.uint8)
                    assert scales.size and (scales > 0).all() and (scales < 0x7F).all()
                else:
                    values = f.get_tensor(name)
                    assert list(values.shape) == entry["shape"]
                    if name.endswith("global_scale"):
                        assert (values > 0).all()
