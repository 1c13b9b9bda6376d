"""Write the seed corpus ``fuzz/corpus/<target>/`` with the real libraries (gguf.GGUFWriter, safetensors,
the artifact writer, the tiny calbin package, ``convert inspect``): ``python -m fuzz.make_corpus``.

Directories whose name starts with ``_`` hold the fixed surroundings of a target (the HF checkpoint whose
index or config is fuzzed, the artifact whose part is fuzzed, the calbin package whose files are fuzzed);
every other file is a seed input. Re-running rewrites the corpus (``python -m fuzz.make_corpus recipe view``:
only those targets'); the files are small (a few KB each).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import save, save_file

from fuzz.targets import SEEDS


def _gguf_seeds(d: Path) -> None:
    for name, big_endian in (("little.gguf", False), ("big.gguf", True)):
        w = gguf.GGUFWriter(str(d / name), "qwen3", endianess=gguf.GGUFEndian.BIG if big_endian else
                            gguf.GGUFEndian.LITTLE)
        w.add_block_count(1)
        w.add_context_length(64)
        w.add_embedding_length(32)
        w.add_string("general.name", "seed")
        w.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
        w.add_float32("qwen3.attention.layer_norm_rms_epsilon", 1e-6)
        w.add_bool("general.flag", True)
        w.add_tensor("token_embd.weight", np.arange(64, dtype=np.float32).reshape(2, 32))
        q8 = gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("blk.0.attn_q.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def _safetensors_seeds(d: Path) -> None:
    (d / "two.safetensors").write_bytes(save({"a": np.arange(6, dtype=np.float32).reshape(2, 3),
                                              "b": np.ones(4, dtype=np.float16)}, metadata={"format": "pt"}))
    (d / "empty.safetensors").write_bytes(save({}))


def _hf_seeds(d: Path) -> None:
    ck = d / "_checkpoint"
    ck.mkdir()
    save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, ck / "model-00001-of-00002.safetensors")
    save_file({"c": np.arange(4, dtype=np.int32)}, ck / "model-00002-of-00002.safetensors")
    (ck / "config.json").write_text(json.dumps({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}))
    index = {"metadata": {"total_size": 40}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                            "c": "model-00002-of-00002.safetensors"}}
    (ck / "model.safetensors.index.json").write_text(json.dumps(index))
    (d / "index.json").write_text(json.dumps(index))
    (d / "index-no-metadata.json").write_text(json.dumps({"weight_map": index["weight_map"]}))


def _prequantized_seeds(d: Path) -> None:
    """A tiny compressed-tensors checkpoint (NVFP4 q_proj, FP8-channel down_proj, INT4 g32 up_proj; written with
    numpy in the layouts of docs/prequantized.md §Component tensors) and configs declaring it: mixed formats,
    the same as ModelOpt (whose components it lacks), and as block FP8."""
    import ml_dtypes

    ck = d / "_checkpoint"
    ck.mkdir()
    rng = np.random.default_rng(0)
    m = "model.layers.0."
    e4m3 = lambda shape: rng.integers(0x30, 0x50, shape, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)  # noqa: E731
    tensors = {
        f"{m}self_attn.q_proj.weight_packed": rng.integers(0, 256, (128, 32), dtype=np.uint8),
        f"{m}self_attn.q_proj.weight_scale": e4m3((128, 4)),
        f"{m}self_attn.q_proj.weight_global_scale": np.array([6816.0], dtype=np.float32),
        f"{m}self_attn.q_proj.input_global_scale": np.array([552.0], dtype=np.float32),
        f"{m}mlp.down_proj.weight": e4m3((128, 64)),
        f"{m}mlp.down_proj.weight_scale": np.full((128, 1), 0.01, dtype=ml_dtypes.bfloat16),
        f"{m}mlp.up_proj.weight_packed": rng.integers(-2**31, 2**31, (128, 8), dtype=np.int64).astype(np.int32),
        f"{m}mlp.up_proj.weight_scale": np.full((128, 2), 0.02, dtype=ml_dtypes.bfloat16),
        f"{m}mlp.up_proj.weight_shape": np.array([128, 64], dtype=np.int64),
        "lm_head.weight": np.zeros((4, 64), dtype=ml_dtypes.bfloat16),
    }
    header, blobs, off = {}, [], 0
    names = {"uint8": "U8", "float8_e4m3fn": "F8_E4M3", "float32": "F32", "bfloat16": "BF16", "int32": "I32",
             "int64": "I64"}
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[str(a.dtype)], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    head = json.dumps(header).encode()
    (ck / "model.safetensors").write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))
    weights = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True,
               "dynamic": False}
    groups = {
        "group_0": {"targets": ["re:.*q_proj$"], "format": "nvfp4-pack-quantized", "weights": weights,
                    "input_activations": {**weights, "dynamic": "local"}},
        "group_1": {"targets": [f"{m}mlp.down_proj"], "format": "float-quantized",
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
                                "dynamic": False}},
        "group_2": {"targets": ["Linear"], "format": "pack-quantized",
                    "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32,
                                "symmetric": True, "dynamic": False, "actorder": "weight"}},
    }
    base = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "torch_dtype": "bfloat16"}
    ct = {**base, "quantization_config": {"quant_method": "compressed-tensors", "format": "mixed-precision",
                                          "quantization_status": "compressed", "config_groups": groups,
                                          "ignore": ["lm_head"], "kv_cache_scheme": None, "sparsity_config": {}}}
    (ck / "config.json").write_text(json.dumps(ct))
    (d / "compressed-tensors.json").write_text(json.dumps(ct))
    (d / "modelopt.json").write_text(json.dumps({**base, "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"], "kv_cache_quant_algo": "FP8"}}))
    (d / "fp8.json").write_text(json.dumps({**base, "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head"]}}))


def _artifact(path: Path, max_file_bytes: int | None = None) -> None:
    from ninfer_core import ArtifactWriter, Binding, Component, Use, codecs

    w = ArtifactWriter(path, components={"text": Component({"architectures": ["T"]}, resources={"tokenizer.json": "r.tok"})},
                       provenance={"tool": "seed"}, max_file_bytes=max_file_bytes, artifact_id="11" * 16)
    w.add_tensor("w.a", (4, 1024) if max_file_bytes else (4, 64), "bf16", "contiguous_le_v1")
    w.add_tensor("w.q", (4, 128), "q8_g32_fp16", "row_split_k128_v1")
    w.add_tensor("d", (), "fp32", "contiguous_le_v1")
    w.add_resource("r.tok", 40)
    w.add_binding("text/a", Binding.whole("w.a"))
    w.add_binding("text/a_rows", Binding.of_parts([("w.a", (64, 128))]))
    w.add_use(Use("text/a", "text/x", "A16Only", {"activation_input_divisor": Binding.whole("d")}))
    with w:
        x = np.linspace(-1, 1, 256, dtype=np.float32).reshape(4, 64)
        big = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(4, 1024)
        w.write_object("w.a", codecs.encode("bf16", "contiguous_le_v1", big if max_file_bytes else x))
        w.write_object("w.q", codecs.encode("q8_g32_fp16", "row_split_k128_v1", np.tile(x, 2)))
        w.write_object("d", codecs.encode("fp32", "contiguous_le_v1", np.array(2.0, dtype=np.float32)))
        w.write_object("r.tok", b'{"model": {"type": "BPE"}, "seed": 1}  '[:40].ljust(40))


def _ninfer_seeds(d: Path, parts: Path) -> None:
    _artifact(d / "single.ninfer")
    (d / "single.ninfer").rename(d / "single.entry")  # seed inputs are named freely (*.ninfer is git-ignored)
    art = parts / "_artifact"
    art.mkdir()
    _artifact(art / "s.ninfer", max_file_bytes=8192)
    (parts / "part-0001").write_bytes((art / "s.ninfer.part-0001").read_bytes())


def _calbin_seeds(d: Path) -> None:
    from tinymodels.calbin import write_calbin_package

    with tempfile.TemporaryDirectory() as tmp:
        fx = write_calbin_package(Path(tmp))
        shutil.copytree(fx.root, d / "_package")
    pkg = d / "_package"
    manifest = next(p for p in pkg.glob("*.yaml") if p.name != "hparam.yaml")
    out = {"calbin_manifest": [manifest], "calbin_metadata": [pkg / "model_memory_reserved_info.txt"],
           "calbin_op_yaml": sorted(pkg.glob("*/*_op_io_buf_ptr.yaml"))[:1]}
    for target, files in out.items():
        t = SEEDS / target
        t.mkdir(exist_ok=True)
        for f in files:
            (t / f.name).write_bytes(f.read_bytes())


def _evidence_seeds(d: Path, gguf_seed: Path) -> None:
    import contextlib
    import io

    from converters.cli import main as cli_main

    with contextlib.redirect_stdout(io.StringIO()):
        cli_main(["inspect", str(gguf_seed), "--detail", "summary", "--evidence-output", str(d / "record.json"), "--json"])


def _imatrix_seeds(d: Path) -> None:
    """Both importance-file forms, written as llama.cpp writes them (tests/support/imatrix_files.py)."""
    from tests.support.imatrix_files import write_dat_imatrix, write_gguf_imatrix

    entries = {"blk.0.attn_q.weight": np.linspace(0.5, 2.0, 32, dtype=np.float32),
               "blk.0.ffn_down_exps.weight": np.linspace(0.1, 1.0, 64, dtype=np.float32).reshape(2, 32)}
    write_gguf_imatrix(d / "seed.imatrix", entries)
    write_dat_imatrix(d / "seed.dat", {"blk.0.attn_q.weight": entries["blk.0.attn_q.weight"]})


def _bundle_seeds(d: Path, gguf_seed: Path) -> None:
    """A bundle of two records (``convert inspect --evidence-output`` of two files)."""
    from converters.inspect import inspect_model_artifact
    from converters.inspect.bundle import write_bundle

    write_bundle(d / "bundle.json", [inspect_model_artifact(gguf_seed),
                                     inspect_model_artifact(gguf_seed.with_name("big.gguf"))])


def _recipe_seeds(d: Path) -> None:
    """The shipped recipes (a few kB each)."""
    from converters.mapping.recipes import RECIPES_DIR

    for name in ("bf16", "groupwise-int", "nvfp4"):
        shutil.copy(RECIPES_DIR / f"{name}.yaml", d / f"{name}.yaml")


def _mapping_seeds(d: Path) -> None:
    from converters.mapping.schema import MAPPINGS_DIR

    for name in ("qwen3.yaml", "qwen2.yaml"):
        shutil.copy(MAPPINGS_DIR / name, d / name)


def _config_seeds(d: Path) -> None:
    """A one-layer Qwen3 of width 32 (tinymodels, a few kB of tensors) whose ``config.json`` is fuzzed."""
    from tinymodels import qwen3

    cfg = qwen3.config(num_hidden_layers=1, hidden_size=32, intermediate_size=64, head_dim=16,
                       num_attention_heads=2, num_key_value_heads=1, vocab_size=384, max_window_layers=1)
    ck = d / "_checkpoint"
    qwen3.write_hf_dir(ck, cfg)
    for name in os.listdir(ck):  # only what open_model reads: the config and the tensors
        if name != "config.json" and not name.endswith((".safetensors", ".index.json")):
            os.unlink(ck / name)
    shutil.copy(ck / "config.json", d / "config.json")


def _view_seeds(d: Path) -> None:
    for i, view in enumerate(({"collection": "tensors", "names": ["token_embd.weight"]},
                              {"collection": "metadata", "keys": ["general.name"]},
                              {"collection": "tensors", "types": ["Q8_0"], "limit": 1})):
        (d / f"view{i}.json").write_text(json.dumps(view))


def _counts_seeds(d: Path) -> None:
    from tinymodels.token_counts import write_token_counts

    counts = {i: 1000 - 3 * i for i in range(0, 300, 7)}
    write_token_counts(d / "counts.tsv", counts, fmt="tsv")
    write_token_counts(d / "counts.json", counts, fmt="json")


def _path_seeds(d: Path) -> None:
    for i, name in enumerate((b"m.gguf", b"d", b"fifo", b"loop", b"dangling", b"r.yaml", b"d/new.ninfer",
                              b"x" * 300, b"m.gguf\0x", "é.yaml".encode())):
        (d / f"path{i}").write_bytes(name)


def _mcp_seeds(d: Path) -> None:
    """A call of each tool (the path relative to the harness's scratch directory, which holds m.gguf)."""
    calls = [{"tool": "inspect_model_artifact", "arguments": {"path": "/m.gguf"}},
             {"tool": "inspect_model_artifact", "arguments": {"path": "/m.gguf", "view": {
                 "collection": "tensors", "limit": 2}}},
             {"tool": "inspect_analysis_view", "arguments": {"source": {"kind": "retained-evidence", "evidence_id":
                                                                       "sha256:" + "0" * 64},
                                                             "view": {"kind": "model-artifact", "collection": "types"}}},
             {"tool": "import_evidence_bundle", "arguments": {"bundle": {"records": []}}},
             {"tool": "release_evidence", "arguments": {"evidence_id": "sha256:" + "0" * 64}}]
    for i, call in enumerate(calls):
        (d / f"call{i}.json").write_text(json.dumps(call))


SEEDERS = {"gguf": _gguf_seeds, "safetensors": _safetensors_seeds, "hf_index": _hf_seeds,
           "calbin": _calbin_seeds, "imatrix": _imatrix_seeds, "prequantized_config": _prequantized_seeds,
           "recipe": _recipe_seeds, "mapping": _mapping_seeds, "config": _config_seeds, "view": _view_seeds,
           "proposal_counts": _counts_seeds, "paths": _path_seeds, "mcp_tools": _mcp_seeds}


def main(argv: list[str] | None = None) -> None:
    """Rewrite the seeds of every target, or with target names only theirs."""
    only = list(sys.argv[1:] if argv is None else argv)
    every = ("gguf", "safetensors", "hf_index", "ninfer_entry", "ninfer_part", "calbin", "evidence", "imatrix",
             "evidence_bundle", "prequantized_config", "recipe", "mapping", "config", "view", "proposal_counts",
             "paths", "mcp_tools")
    if {"ninfer_entry", "ninfer_part"} & set(only):  # written together
        only += ["ninfer_entry", "ninfer_part"]
    targets = [t for t in every if not only or t in only]
    dirs = {t: SEEDS / t for t in targets}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    for t, d in dirs.items():
        if t in SEEDERS:
            SEEDERS[t](d)
    if "ninfer_entry" in dirs:
        _ninfer_seeds(dirs["ninfer_entry"], dirs["ninfer_part"])
    if "evidence" in dirs:
        _evidence_seeds(dirs["evidence"], SEEDS / "gguf" / "little.gguf")
    if "evidence_bundle" in dirs:
        _bundle_seeds(dirs["evidence_bundle"], SEEDS / "gguf" / "little.gguf")
    for f in sorted(SEEDS.rglob("*")):
        if f.is_file() and "/_" not in str(f.relative_to(SEEDS)):
            print(f"{f.relative_to(SEEDS)}  {f.stat().st_size} B")


if __name__ == "__main__":
    main()
