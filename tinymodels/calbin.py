"""A deterministic tiny calbin NPU model package, shaped like the sample of ``docs/calbin.md`` §2.

Two chips, prefill and decode submodels, CCU ELF programs per core and chip, CPU/PLD ping/pong commands
with their text renderings, op I/O YAML, per-chip profparts, two parameter blocks with a parameter map,
helper SOs with a dynamic section, tokenizer/config files — a few hundred KB in all. Depends only on the
standard library, numpy and PyYAML, never on the validator under test: every number (sizes, masks, KV
shapes) is computed here from :class:`CalbinSpec`.

``CalbinSpec(vendor_quirks=True)`` reproduces the sample's known, vendor-confirmable defects (prefill
``smodel_type llm_decode``, ``device_memory_required`` in an implausible unit, tokenizer context larger than
the calbin context, no ONNX delivered, Gate E fields absent, golden hashes without object mapping); the
default spec is a package with every field a static check can ask for.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

DRAM_BASE = 0x8_8000_0000
SRAM_BASE = 0x4_2000_0000
SYNC_BASE = 0x4_3F00_0000
CCU_MACHINE = 0xCA1C  # an NPU core ISA number unknown to the host tools; only recorded
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class CalbinSpec:
    model_name: str = "tiny-qwen3-moe_b1_s64"
    layers: int = 4
    q_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    hidden: int = 64
    vocab: int = 256
    max_seq: int = 64
    batch: int = 1
    chips: int = 2
    cores: int = 2
    rope_theta: float = 1000000.0
    param_bytes: tuple[int, ...] = (24576, 20480)  # per chip
    vendor_quirks: bool = False
    seed: int = 0


@dataclass
class CalbinFixture:
    """Where the package is and the sensitive values a sanitized report must not show."""

    root: Path
    spec: CalbinSpec
    vaddrs: set[int] = field(default_factory=set)
    command_addrs: set[int] = field(default_factory=set)
    onnx_path: str = ""

    def submodel_dir(self, kind: str) -> Path:
        return self.root / f"{self.spec.model_name}_{kind}_graph"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _mask_words(mask: int) -> str:
    return f"{(mask >> 64) & 0xFFFFFFFF:08x} {(mask >> 32) & 0xFFFFFFFF:08x} {mask & 0xFFFFFFFF:08x}"


class _Alloc:
    """Sequential address allocator in one region, recording every address handed out."""

    def __init__(self, base: int, fx: CalbinFixture):
        self.pos, self.fx = base, fx

    def take(self, nbytes: int) -> int:
        addr = self.pos
        self.pos += max(64, (nbytes + 63) // 64 * 64)
        self.fx.vaddrs.add(addr)
        return addr


def write_calbin_package(parent: Path, spec: CalbinSpec = CalbinSpec()) -> CalbinFixture:
    """Write the package to ``parent / spec.model_name`` (which must not exist) and describe it."""
    root = Path(parent) / spec.model_name
    root.mkdir(parents=True, exist_ok=False)
    fx = CalbinFixture(root, spec)
    rng = np.random.default_rng(spec.seed)
    params = _write_params(fx, rng)
    dram = _Alloc(DRAM_BASE + sum(s for _, s in params["dram_segments"][0]) + 4096, fx)
    onnx_bytes = rng.integers(0, 256, 2048, dtype=np.uint8).tobytes()
    fx.onnx_path = f"/vendor/export/{spec.model_name}/model.onnx"
    cfgs = {}
    for kind in ("prefill", "decode"):
        name = f"{spec.model_name}_{kind}_graph"
        cfgs[name] = _submodel_cfg(spec, kind, fx.onnx_path)
        _write_submodel(fx, kind, name, cfgs[name], params, dram, rng)
    _write_runtime_meta(fx, params, dram)
    _write_manifest(fx, cfgs, onnx_bytes)
    _write_tokenizer(fx)
    (root / "hparam.yaml").write_text(yaml.safe_dump(
        {"batch": spec.batch, "seq_len": spec.max_seq, "prefill_len": spec.max_seq // 4, "golden_tokens": 4}))
    (root / "version.py").write_text('VERSION = "0.7.6"\nPACKER = "calbin-packer"\n')
    return fx


# -- parameters --------------------------------------------------------------------------------------
def _write_params(fx: CalbinFixture, rng: np.random.Generator) -> dict:
    """``param_blk{c}.bin`` per chip: 3/4 DRAM segments then SRAM segments, all at the same per-chip vaddrs."""
    segments: dict[int, list] = {}
    dram_segments: dict[int, list] = {}
    sram_end = SRAM_BASE
    for chip, size in enumerate(fx.spec.param_bytes):
        (fx.root / f"param_blk{chip}.bin").write_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        dram_part = size * 3 // 4 // 4096 * 4096
        segs, dsegs, off = [], [], 0
        for seg_len, base in ((dram_part, DRAM_BASE), (size - dram_part, SRAM_BASE)):
            pieces = [4096] * (seg_len // 4096) + ([seg_len % 4096] if seg_len % 4096 else [])
            vaddr = base
            for p in pieces:
                segs.append((off, vaddr, p))
                if base == DRAM_BASE:
                    dsegs.append((vaddr, p))
                else:
                    sram_end = max(sram_end, vaddr + p)
                fx.vaddrs.add(vaddr)
                off += p
                vaddr += p
        segments[chip] = segs
        dram_segments[chip] = dsegs
    return {"segments": segments, "dram_segments": dram_segments, "sram_size": sram_end - SRAM_BASE}


def _write_runtime_meta(fx: CalbinFixture, params: dict, dram: _Alloc) -> None:
    s = fx.spec
    dram_size = dram.pos - DRAM_BASE
    sram_size = params["sram_size"]
    fx.vaddrs.update({DRAM_BASE, SRAM_BASE, SYNC_BASE})
    mem_required = f"{dram_size} MB" if s.vendor_quirks else f"{(dram_size + (1 << 20) - 1) >> 20} MB"
    lines = [
        "calcc_ver: v0.1",
        "device0: [ks1]",
        f"device_memory_required: {mem_required}",
        f"model_arch {s.model_name}",
        "model_type llm",
        f"n_batch {s.batch}",
        f"max_seq_len {s.max_seq}",
        f"dram_rsvd vaddr 0x{DRAM_BASE:x} size {dram_size}",
        f"sram_rsvd vaddr 0x{SRAM_BASE:x} size {sram_size}",
        f"sync_rsvd vaddr 0x{SYNC_BASE:x} size 20",
    ]
    for chip, segs in params["segments"].items():
        for off, vaddr, size in segs:
            lines.append(f"param_blk{chip}.bin offset 0x{off:x} vaddr 0x{vaddr:x} size 0x{size:x} "
                         f"chip {_mask_words(1 << chip)}")
    (fx.root / "model_memory_reserved_info.txt").write_text("\n".join(lines) + "\n")


# -- manifest ----------------------------------------------------------------------------------------
def _submodel_cfg(s: CalbinSpec, kind: str, onnx_path: str) -> dict:
    prefill = kind == "prefill"
    tokens = s.max_seq if prefill else 1
    past = 0 if prefill else s.max_seq - 1
    shapes: dict = {"input_ids": [s.batch, tokens], "position_ids": [s.batch, tokens]}
    for i in range(s.layers):
        shapes[f"past_key_{i}"] = [s.batch, s.kv_heads, past, s.head_dim]
        shapes[f"past_value_{i}"] = [s.batch, s.kv_heads, past, s.head_dim]
    return {
        "model_path": onnx_path,
        "input_shape": shapes,
        "model_info": {
            "batch_num": s.batch, "q0_head_num": s.q_heads, "k0_head_num": s.kv_heads,
            "v_head_num": s.kv_heads, "q0_head_dim": s.head_dim, "k0_head_dim": s.head_dim,
            "v_head_dim": s.head_dim, "theta_base": s.rope_theta, "max_seq_len": s.max_seq,
            "is_encoder": False, "is_prefill": prefill, "alibi": False,
        },
        "device_cfg": {"chip_nums": s.chips, "calcore_num": s.cores},
        "calcc_env_cfg": {
            "with_codegen": True, "with_op_case": True, "with_c_oplib": True, "use_auto_alloc": True,
            "enable_flash_attention": True, "enable_one_token": True, "dynamic_d2d": prefill,
            "has_loaded_onnx": False, "has_optimized_graph": False,
        },
    }


def _write_manifest(fx: CalbinFixture, cfgs: dict, onnx_bytes: bytes) -> None:
    s = fx.spec
    onnx_sha = _sha(onnx_bytes)
    doc: dict = {
        "model_name": s.model_name,
        "seq_len": s.max_seq,
        "onnx_hash": [onnx_sha, onnx_sha],
        "git_commit_id": {"calcc": _sha(b"calcc")[:40], "lib/tvm": _sha(b"tvm")[:40]},
    }
    if s.vendor_quirks:
        doc["golden_hash"] = {"golden_prefill": [_sha(b"gp0"), _sha(b"gp1")], "golden_decode": [_sha(b"gd0")]}
    else:
        doc["golden_hash"] = {
            "golden_prefill": [{"tensor": "logits", "file": "golden/prefill_logits.bin", "sha256": _sha(b"gp0")}],
            "golden_decode": [{"tensor": "logits", "file": "golden/decode_logits.bin", "sha256": _sha(b"gd0")}],
        }
        doc.update({
            "compiler_oci_digest": "sha256:" + _sha(b"calcc-container"),
            "quant_config": {"scheme": "w8a16", "sha256": _sha(b"quant")},
            "calibration_manifest": {"dataset": "calib-128", "sha256": _sha(b"calib")},
            "oplib_version": "0.7.6",
            "calbin_schema_version": "1",
            "runtime_compat": {"runtime": "0.7.6", "driver": "1.2.0", "firmware": "3.4.1", "chip": "ks1"},
        })
        (fx.root / "onnx").mkdir()
        (fx.root / "onnx" / "model.onnx").write_bytes(onnx_bytes)
    doc["one_model_cfg"] = cfgs
    (fx.root / f"{s.model_name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


# -- submodels ---------------------------------------------------------------------------------------
def _write_submodel(fx, kind, name, cfg, params, dram, rng) -> None:
    s = fx.spec
    d = fx.root / name
    d.mkdir()
    prefill = kind == "prefill"
    tokens = s.max_seq if prefill else 1
    smodel_type = "llm_decode" if (not prefill or s.vendor_quirks) else "llm_prefill"
    lines = [f"model_arch {s.model_name}", f"smodel_type {smodel_type}", f"n_batch {s.batch}",
             "calc_mchip mchip", "calc_utype [cpu,ccu]", "workload 17179869184 Byte",
             "ccu_stack_config location dram"]
    all_chips = (1 << s.chips) - 1
    for chip in range(s.chips):
        for core in range(s.cores):
            (d / f"ccu{core}_chip{chip}.elf").write_bytes(_elf(2, CCU_MACHINE, []))
            lines.append(f"ccu{core}_chip{chip}.elf location dram chip {_mask_words(1 << chip)}")
    for engine in ("cpu", "pld"):
        for chip in range(s.chips):
            for pp in ("ping", "pong"):
                base = f"{engine}_chip{chip}_{pp}"
                text, blob = _commands(fx, engine, chip, pp, rng)
                (d / f"{base}.bin").write_bytes(blob)
                (d / f"{base}.txt").write_text(text)
                lines.append(f"{base}.bin chip {_mask_words(1 << chip)}")
    if prefill:
        for isa, machine in (("riscv64", 243), ("x86_64", 62)):
            (d / f"cpu_helper_{isa}.so").write_bytes(_elf(3, machine, ["libc.so.6", "libm.so.6"]))
            lines.append(f"cpu_helper_{isa}.so chip {_mask_words(all_chips)}")
    lines.append("icsr tokens_len offset 0x10")
    io = {}
    for bname, shape, dtype, nbytes in (
        ("input_ids", [s.batch, tokens], "int32", 4 * s.batch * tokens),
        ("position_ids", [s.batch, tokens], "int32", 4 * s.batch * tokens),
        ("logits", [s.batch, 1, s.vocab], "bfloat16", 2 * s.batch * s.vocab),
    ):
        ping, pong = dram.take(nbytes), dram.take(nbytes)
        io[bname] = ping
        direction = "obuf" if bname == "logits" else "ibuf"
        lines.append(f"{direction} {bname} shape [{','.join(map(str, shape))}] type {dtype} "
                     f"vaddr 0x{ping:x} 0x{pong:x} size {nbytes}")
    (d / "submodel_memory_reserved_info.txt").write_text("\n".join(lines) + "\n")
    ops = _ops(fx, kind, cfg, params, dram, io)
    (d / f"{name}_op_io_buf_ptr.yaml").write_text(yaml.safe_dump(ops, sort_keys=False, default_flow_style=None))
    for chip in range(s.chips):
        names = [op for op in ops if chip == 0 or not op.startswith("embedding")]
        (d / f"{name}.chip{chip}.profparts").write_text("\n".join(names) + "\n")


def _ops(fx, kind, cfg, params, dram, io) -> dict:
    """The op I/O graph: ``{op: {args_N|outs_N: [vaddr, shape, PrimitiveType, producer_or_role]}}``."""
    s = fx.spec
    tokens = s.max_seq if kind == "prefill" else 1
    counters: dict[str, int] = {}
    weights = [v for v, _ in params["dram_segments"][0]]
    ops: dict = {}
    act = [1, tokens, s.hidden]
    act_bytes = 2 * tokens * s.hidden
    scratch = dram.take(act_bytes)  # reused by every norm output: an alias the report must list

    def op(kind_name: str, args: list, outs: list) -> str:
        n = counters.get(kind_name, 0)
        counters[kind_name] = n + 1
        op_name = f"{kind_name}_{n}"
        ops[op_name] = {**{f"args_{i}": a for i, a in enumerate(args)},
                        **{f"outs_{i}": o for i, o in enumerate(outs)}}
        return op_name

    w = itertools.cycle(weights)
    rows = 2048 // s.hidden  # every constant operand fits its 4 KiB parameter segment
    h = op("embedding_gather", [[io["input_ids"], [1, tokens], "S32", "input_0"],
                                [next(w), [rows, s.hidden], "BF16", "const_0"]],
           [[dram.take(act_bytes), act, "BF16", "out"]])
    for layer in range(s.layers):
        norm = op("rms_norm", [[dram.take(act_bytes), act, "BF16", h], [next(w), [s.hidden], "BF16", "const_1"]],
                  [[scratch, act, "BF16", "out"]])
        qkv_dim = (s.q_heads + 2 * s.kv_heads) * s.head_dim
        qkv = op("nbu_fused_matmul_add_clib", [[scratch, act, "BF16", norm],
                                                [next(w), [rows, s.hidden], "BF16", "const_2"]],
                 [[dram.take(2 * tokens * qkv_dim), [1, tokens, qkv_dim], "BF16", "out"]])
        rope = op("rope", [[io["position_ids"], [1, tokens], "S32", "input_1"]],
                  [[dram.take(2 * tokens * qkv_dim), [1, tokens, qkv_dim], "BF16", qkv]])
        past = cfg["input_shape"][f"past_key_{layer}"]
        kv_bytes = 2 * int(np.prod(past))
        fa = op("flash_attention", [
            [dram.take(2 * tokens * qkv_dim), [1, tokens, qkv_dim], "BF16", rope],
            [dram.take(kv_bytes), past, "BF16", f"input_{2 + 2 * layer}"],
            [dram.take(kv_bytes), past, "BF16", f"input_{3 + 2 * layer}"],
        ], [[dram.take(act_bytes), act, "BF16", "out"]])
        if kind == "prefill":
            op("kv_cache_write", [[dram.take(act_bytes), act, "BF16", fa]], [[dram.take(act_bytes), act, "BF16", "out"]])
        proj = op("nbu_fused_matmul_add_clib", [[dram.take(act_bytes), act, "BF16", fa],
                                                 [next(w), [rows, s.hidden], "BF16", "const_3"]],
                  [[dram.take(act_bytes), act, "BF16", "out"]])
        h = op("moe_expert", [[dram.take(act_bytes), act, "BF16", proj], [next(w), [rows // 2, s.hidden], "F32", "const_4"]],
               [[dram.take(act_bytes), act, "BF16", "out"]])
    op("lm_head_matmul", [[dram.take(act_bytes), act, "BF16", h], [next(w), [rows, s.hidden], "BF16", "const_5"]],
       [[io["logits"], [1, 1, s.vocab], "BF16", "out"]])
    return ops


def _commands(fx, engine: str, chip: int, pp: str, rng) -> tuple[str, bytes]:
    """Command text (comment line with the type, then one field line) and a packed binary rendering."""
    mask = 1 << chip
    lines, blob = [], bytearray()
    for cmd_id in range(6):
        if cmd_id % 3 == 2:
            lines += ["# CMD_SYNC", f"cmdId={cmd_id} chipMask0=0x{mask:08x} chipMask1=0x00000000 "
                      f"chipMask2=0x00000000 syncRegIdx={cmd_id}"]
            blob += struct.pack("<IIIQQQ", cmd_id, 2, mask, 0, 0, cmd_id)
            continue
        src = 0x7_0000_0000 + int(rng.integers(0, 1 << 20)) * 64
        dst = DRAM_BASE + int(rng.integers(0, 1 << 12)) * 64
        if pp == "pong":
            src, dst = src + 0x100000, dst + 0x100000
        size = 256 * (cmd_id + 1)
        fx.command_addrs.update({src, dst})
        lines += [f"# CMD_{engine.upper()}_D2D", f"cmdId={cmd_id} chipMask0=0x{mask:08x} chipMask1=0x00000000 "
                  f"chipMask2=0x00000000 srcAddr=0x{src:x} dstAddr=0x{dst:x} dataSize={size}"]
        blob += struct.pack("<IIIQQQ", cmd_id, 1, mask, src, dst, size)
    return "\n".join(lines) + "\n", bytes(blob)


def _elf(e_type: int, machine: int, needed: list[str]) -> bytes:
    """ELF64 LE: header, PT_LOAD over the file, and for DT_NEEDED a PT_DYNAMIC plus string table."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in needed)
    offs = [1 + sum(len(n) + 1 for n in needed[:i]) for i in range(len(needed))]
    phnum = 2 if needed else 1
    dyn_off = 64 + 56 * phnum
    dyn = b""
    if needed:
        entries = [(1, o) for o in offs] + [(5, 0), (10, len(strtab)), (0, 0)]
        str_off = dyn_off + 16 * len(entries)
        entries[len(offs)] = (5, str_off)  # DT_STRTAB vaddr == file offset (PT_LOAD at 0)
        dyn = b"".join(struct.pack("<qQ", t, v) for t, v in entries)
    body = dyn + strtab + b"\x13\x00\x00\x00" * 8  # a few instruction-sized words
    total = dyn_off + len(body)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)  # ELFCLASS64, ELFDATA2LSB, EV_CURRENT
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", e_type, machine, 1, 0x1000, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, total, total, 0x1000)
    if needed:
        ph += struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, len(dyn), len(dyn), 8)
    return hdr + ph + body


# -- tokenizer ---------------------------------------------------------------------------------------
def _write_tokenizer(fx: CalbinFixture) -> None:
    s = fx.spec
    d = fx.root / "__Tokenizer"
    d.mkdir()
    n_regular = s.vocab - len(SPECIAL) - 8  # ids above len(tokenizer) pad the vocab, as in Qwen
    vocab = {f"t{i:04d}": i for i in range(n_regular)}
    special_ids = {tok: n_regular + i for i, tok in enumerate(SPECIAL)}
    eos, pad = special_ids["<|im_end|>"], special_ids["<|endoftext|>"]
    added = [{"id": i, "content": t, "special": True, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False} for t, i in special_ids.items()]
    merges = [f"t{i:04d} t{i + 1:04d}" for i in range(0, 16, 2)]
    files = {
        "tokenizer.json": {"version": "1.0", "added_tokens": added,
                           "model": {"type": "BPE", "vocab": vocab, "merges": merges}},
        "tokenizer_config.json": {
            "model_max_length": 131072 if s.vendor_quirks else s.max_seq, "bos_token": None,
            "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "tokenizer_class": "Qwen2Tokenizer",
            "added_tokens_decoder": {str(a["id"]): {"content": a["content"], "special": True} for a in added},
        },
        "config.json": {
            "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": s.vocab,
            "hidden_size": s.hidden, "num_hidden_layers": s.layers, "num_attention_heads": s.q_heads,
            "num_key_value_heads": s.kv_heads, "head_dim": s.head_dim, "rope_theta": s.rope_theta,
            "max_position_embeddings": s.max_seq, "bos_token_id": pad, "eos_token_id": eos,
            "tie_word_embeddings": False,
        },
        "generation_config.json": {"bos_token_id": pad, "eos_token_id": [eos, pad], "pad_token_id": pad},
        "special_tokens_map.json": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
        "added_tokens.json": special_ids,
        "vocab.json": vocab,
    }
    for fname, obj in files.items():
        (d / fname).write_text(json.dumps(obj, indent=1))
    (d / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (d / "chat_template.jinja").write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n"
                                           "{{ m.content }}<|im_end|>\n{% endfor %}")
    (d / "README.md").write_text(f"# {s.model_name} tokenizer\n")
    (d / "LICENSE").write_text("Apache-2.0\n")
    # A GGUF v3 header holding only general.architecture (the vocab GGUF's framing, no tensors).
    key, val = b"general.architecture", b"qwen3moe"
    gguf = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
            + struct.pack("<I", 8) + struct.pack("<Q", len(val)) + val)
    (d / "vocab.gguf").write_bytes(gguf)
