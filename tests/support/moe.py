"""A Qwen3-Next GGUF in the legacy (fused, un-split) layout, for the MoE mapping and conversion tests."""

from __future__ import annotations

from tinymodels import gguf_writer, qwen3_next
from tinymodels.gguf_writer import PlannedTensor


def legacy_next_gguf(path, cfg, monkeypatch, *, keep_new: bool = False):
    """A Qwen3-Next GGUF as llama.cpp wrote it before the attn_qkv/attn_gate regrouping: in_proj_qkvz whole
    as ``blk.N.ssm_in.weight`` (ollama's vendored llama.cpp @0cf7794b reads it with the HF grouping)."""
    hf = qwen3_next.hf_tensors(cfg)
    original = qwen3_next.gguf_tensors

    def tensors(cfg_, seed=0, matrix_type="F32", fused_gate_up=False):
        out = []
        for t in original(cfg_, seed, matrix_type, fused_gate_up):
            if t.name.endswith(".attn_gate.weight") and not keep_new:
                continue
            if t.name.endswith(".attn_qkv.weight"):
                layer = int(t.name.split(".")[1])
                qkvz = hf[f"model.layers.{layer}.linear_attn.in_proj_qkvz.weight"]
                name = f"blk.{layer}.ssm_in.weight"
                out.append(PlannedTensor(name, qkvz.shape, gguf_writer.tensor_qtype(name, qkvz.shape, matrix_type),
                                         lambda a, b, q=qkvz: q[a:b]))
                if not keep_new:
                    continue
            out.append(t)
        return out

    monkeypatch.setattr(qwen3_next, "gguf_tensors", tensors)
    return qwen3_next.write_gguf(path, cfg)
