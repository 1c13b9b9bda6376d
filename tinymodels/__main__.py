"""Write a deterministic tiny checkpoint: python -m tinymodels MODEL [--hf DIR] [--gguf FILE] [options].

Models
  Text models (qwen2, qwen3, qwen35, qwen3moe, qwen35moe, qwen3next, qwen3vl, qwen3vlmoe) are written as an HF
  checkpoint directory (--hf DIR) and/or a GGUF laid out as llama.cpp writes it (--gguf FILE, with
  --matrix-type for the matrices). qwen3vl and qwen3vlmoe also write their vision tower as an mmproj GGUF
  (--mmproj FILE). MoE models take --expert-layout (HF) and --fused-gate-up (GGUF).

Components
  vision        the Qwen3.5 vision tower: --hf (a Qwen3_5ForConditionalGeneration directory) and/or
                --mmproj (the tower's mmproj GGUF); --vision-family picks the tower
  dflash        a DFlash drafter directory (--hf); dflash2 the DFlash2 one
  bonsai        a ternary GGUF (--gguf), --ternary-type, --rotated for a Hadamard-rotated one
  token-counts  a token-count file for --proposal indexed (--counts, --counts-format)

Config overrides (--set KEY=VALUE, repeatable)
  KEY is any field of the model's config.json (--show-config prints them all, with the overrides applied)
  or one of the aliases: layers (num_hidden_layers), hidden (hidden_size), intermediate
  (intermediate_size), vocab (vocab_size), heads (num_attention_heads), kv_heads (num_key_value_heads).
  VALUE is read as JSON, else kept as a string. Examples:
    --set layers=24 --set hidden=2048           the multi-GB benchmark models come from the same command
    --set mtp_num_hidden_layers=1               a Qwen3.5 model with an MTP head

Real geometries (tinymodels.real, docs/architectures.md §Real geometries)
  A released checkpoint's name (qwen2.5-0.5b, qwen2.5-7b, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, qwen3.5-0.8b,
  qwen3-vl-2b, qwen3-next-80b-a3b) builds its generator's model from the published config.json, every value
  real unless a knob changes it: --layers N keeps the first N layers, --shrink K divides every width by K
  (head and expert counts stay real), --vocab V and --experts E set those counts, --spelling
  published|resaved writes config.json as released or as transformers 5 re-saves it. Example:
    qwen3-30b-a3b --gguf m.gguf --layers 2 --shrink 8 --vocab 512   128 experts, 2 layers, hidden 256
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from tinymodels import bonsai, dflash, gguf_writer, models, qwen3_moe, qwen35, real, token_counts, vision
from tinymodels.ternary_blocks import FORMATS

COMPONENTS = ("vision", "dflash", "dflash2", "bonsai", "token-counts")
MODELS = {name: module for name, module in models().items() if name not in COMPONENTS}


def _override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tinymodels", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", choices=sorted(MODELS) + list(COMPONENTS) + real.names())
    parser.add_argument("--hf", metavar="DIR", help="write the HF checkpoint directory here (must not exist)")
    parser.add_argument("--gguf", metavar="FILE", help="write the GGUF here (must not exist)")
    parser.add_argument("--mmproj", metavar="FILE", help="vision: write the mmproj GGUF here (must not exist)")
    parser.add_argument("--counts", metavar="FILE", help="token-counts: write the count file here (must not exist)")
    parser.add_argument("--counts-format", default="tsv", choices=token_counts.FORMATS)
    parser.add_argument("--matrix-type", default="F32", choices=sorted(gguf_writer.MATRIX_TYPES),
                        help="GGUF matrix type (llama.cpp --outtype); norms and 1-D tensors stay F32")
    parser.add_argument("--hf-dtype", default="bf16", choices=["bf16", "f16", "f32"])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--expert-layout", default="per_expert", choices=qwen3_moe.EXPERT_LAYOUTS)
    parser.add_argument("--fused-gate-up", action="store_true", help="MoE GGUF: ffn_gate_up_exps (--fuse-gate-up-exps)")
    parser.add_argument("--vision-family", default="qwen3_5", choices=sorted(vision.FAMILIES))
    parser.add_argument("--ternary-type", default="PTQ1_0", choices=sorted(FORMATS))
    parser.add_argument("--rotated", action="store_true", help="bonsai: Hadamard-rotated with prism.hadamard.*")
    parser.add_argument("--layers", type=int, default=None, help="real geometry: keep the first N layers")
    parser.add_argument("--shrink", type=int, default=1, help="real geometry: divide every width by K")
    parser.add_argument("--vocab", type=int, default=None, help="real geometry: vocabulary size (default: real)")
    parser.add_argument("--experts", type=int, default=None, help="real geometry: routed experts (default: real)")
    parser.add_argument("--spelling", default="published", choices=sorted(real.SPELLINGS),
                        help="real geometry: config.json as released or as transformers 5 re-saves it")
    parser.add_argument("--set", dest="overrides", type=_override, action="append", default=[],
                        metavar="KEY=VALUE", help="config override (repeatable; see Config overrides above)")
    parser.add_argument("--show-config", action="store_true",
                        help="print the text model's config.json (overrides applied) and write nothing")
    return parser


def _run_real(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.overrides:
        parser.error("--set is for the tiny models; a real geometry takes --layers, --shrink, --vocab, --experts")
    cfg = real.geometry(args.model, layers=args.layers, shrink=args.shrink, vocab=args.vocab, experts=args.experts)
    if args.show_config:
        print(json.dumps(real.respell(args.model, cfg, args.spelling), indent=2, default=str))
        return
    if not args.hf and not args.gguf:
        parser.error("nothing to write: give --hf and/or --gguf")
    if args.hf:
        real.write_hf_dir(args.hf, args.model, cfg, args.spelling, seed=args.seed, dtype=args.hf_dtype,
                          shards=args.shards)
    if args.gguf:
        real.write_gguf(args.gguf, args.model, cfg, seed=args.seed, matrix_type=args.matrix_type)


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    overrides = dict(args.overrides)
    if args.model in real.names():
        _run_real(args, parser)
    elif args.model in MODELS:
        module = MODELS[args.model]
        if args.show_config:
            print(json.dumps(module.config(**overrides), indent=2, default=str))
            return
        if not args.hf and not args.gguf and not (args.mmproj and hasattr(module, "write_mmproj")):
            parser.error("nothing to write: give --hf and/or --gguf" + (" and/or --mmproj" if hasattr(
                module, "write_mmproj") else ""))
        moe = getattr(module, "MOE", False)
        cfg = module.config(**overrides)
        if args.hf:
            extra = {"expert_layout": args.expert_layout} if moe else {}
            module.write_hf_dir(args.hf, cfg, seed=args.seed, dtype=args.hf_dtype, shards=args.shards, **extra)
        if args.gguf:
            extra = {"fused_gate_up": args.fused_gate_up} if moe else {}
            module.write_gguf(args.gguf, cfg, seed=args.seed, matrix_type=args.matrix_type, **extra)
        if args.mmproj:
            if not hasattr(module, "write_mmproj"):
                parser.error(f"{args.model} has no vision tower: --mmproj is for vision, qwen3vl, qwen3vlmoe")
            module.write_mmproj(args.mmproj, cfg, seed=args.seed, matrix_type=args.matrix_type)
    elif args.model == "vision":
        if not args.hf and not args.mmproj:
            parser.error("nothing to write: give --hf and/or --mmproj")
        text_cfg, vision_cfg = qwen35.config(**overrides), vision.config(args.vision_family)
        if args.hf:
            vision.write_hf_dir(args.hf, text_cfg, vision_cfg, seed=args.seed, dtype=args.hf_dtype, shards=args.shards)
        if args.mmproj:
            vision.write_mmproj(args.mmproj, vision_cfg, text_cfg, seed=args.seed, matrix_type=args.matrix_type)
    elif args.model in ("dflash", "dflash2"):
        if not args.hf:
            parser.error("nothing to write: give --hf")
        cfg = dflash.config(2 if args.model == "dflash2" else 1, qwen35.config(), **overrides)
        dflash.write_hf_dir(args.hf, cfg, seed=args.seed, dtype=args.hf_dtype, shards=1)
    elif args.model == "bonsai":
        if not args.gguf:
            parser.error("nothing to write: give --gguf")
        bonsai.write_gguf(args.gguf, seed=args.seed, ternary_type=args.ternary_type, rotated=args.rotated, **overrides)
    else:
        if not args.counts:
            parser.error("nothing to write: give --counts")
        token_counts.write_token_counts(args.counts, token_counts.token_counts(args.seed), args.counts_format)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        _run(args, parser)
    except (FileExistsError, ValueError, KeyError) as exc:
        print(f"tinymodels: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
