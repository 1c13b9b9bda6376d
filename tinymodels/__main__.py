"""``python -m tinymodels qwen35|qwen3 [--hf DIR] [--gguf FILE] [--matrix-type Q8_0] [--seed N] [--set K=V ...]``.

Writes the tiny model as an HF directory and/or a GGUF (llama.cpp layout). ``--set`` overrides config
fields (HF names or the aliases ``layers``, ``hidden``, ``intermediate``, ``vocab``, ``heads``,
``kv_heads``), values parsed as JSON (``--set layers=24 --set hidden=2048``), so the same command
produces the multi-GB benchmark models.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from tinymodels import gguf_writer, qwen3, qwen35

MODELS = {"qwen35": qwen35, "qwen3": qwen3}


def _override(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinymodels", description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--hf", metavar="DIR", help="write the HF checkpoint directory here (must not exist)")
    parser.add_argument("--gguf", metavar="FILE", help="write the GGUF here (must not exist)")
    parser.add_argument("--matrix-type", default="F32", choices=sorted(gguf_writer.MATRIX_TYPES),
                        help="GGUF matrix type (llama.cpp --outtype); norms and 1-D tensors stay F32")
    parser.add_argument("--hf-dtype", default="bf16", choices=["bf16", "f16", "f32"])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", type=_override, action="append", default=[],
                        metavar="KEY=VALUE", help="config override (repeatable)")
    args = parser.parse_args(argv)
    if not args.hf and not args.gguf:
        parser.error("nothing to write: give --hf and/or --gguf")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    module = MODELS[args.model]
    try:
        cfg = module.config(**dict(args.overrides))
        if args.hf:
            module.write_hf_dir(args.hf, cfg, seed=args.seed, dtype=args.hf_dtype, shards=args.shards)
        if args.gguf:
            module.write_gguf(args.gguf, cfg, seed=args.seed, matrix_type=args.matrix_type)
    except (FileExistsError, ValueError, KeyError) as exc:
        print(f"tinymodels: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
