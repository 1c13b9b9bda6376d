"""``make demo``: convert the bundled tiny Qwen3.5 GGUF with the default recipe and show the result.

1. ``out/tiny-qwen35.Q8_0.gguf`` is generated with :mod:`tinymodels` if missing (deterministic: 8 layers,
   full attention at 3 and 7, 2 key / 4 value heads so the V-head reorder is exercised, written the way
   llama.cpp writes it: +1 norms, ``-exp(A_log)``, tiled V heads, F32 norms, Q8_0 matrices).
2. It is converted with the default recipe, ``groupwise-int`` (:data:`converters.pipeline.convert.DEFAULT_RECIPE`):
   the container §12.3 deployment grouping (query+key q4 parent, gate+value q5 parent, q4 MLP, q8
   embedding and head), the template kind docs/ternary.md §1 expects, and it exercises the three ways an object
   is made — exact Q8_0 → q8 transcoding, requantization with measured error, and grouping bound through
   parts — on any shape (row_split pads K, unlike nvfp4).
3. The conversion summary is printed, then every logical parameter is decoded from the artifact and
   compared with the generator's float reference (per role: worst cosine and max error).
4. ``convert verify --sweep`` accepts the artifact against the GGUF (seven gates: structure, coverage, codec validity,
   values, order probes, resources, golden numerics).

The demo owns ``out/tiny-qwen35.groupwise-int.ninfer``: a rerun removes the previous one first (the
converter itself never overwrites). Run as ``python -m converters.cli.demo``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from converters.cli.convert import print_summary
from converters.cli.output import console, table

OUT = Path("out")
GGUF = OUT / "tiny-qwen35.Q8_0.gguf"
ARTIFACT = OUT / "tiny-qwen35.groupwise-int.ninfer"


def ensure_gguf(path: Path = GGUF) -> Path:
    """Generate the demo GGUF with tinymodels unless it is already there."""
    from tinymodels import qwen35

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        qwen35.write_gguf(path, qwen35.config(), matrix_type="Q8_0")
        console.print(f"generated {path} ({path.stat().st_size:,} bytes) with tinymodels.qwen35")
    return path


def compare_with_reference(artifact: Path) -> tuple[list[list], bool]:
    """Per role: parameters, worst cosine, max abs error of the decoded artifact vs the generator."""
    from converters.model.engine import logical_array
    from ninfer_core import open_artifact
    from tinymodels import qwen35

    ref = qwen35.logical_parameters(qwen35.config())
    per_role: dict[str, list] = {}
    with open_artifact(artifact) as art:
        for name, want in ref.items():
            got = logical_array(art, name, want.shape).astype(np.float64)
            w = want.astype(np.float64).reshape(-1)
            g = got.reshape(-1)
            cos = float(w @ g / (np.linalg.norm(w) * np.linalg.norm(g))) if w.any() or g.any() else 1.0
            role = name.split("/")[-1] if "/layers/" not in name else "/".join(name.split("/")[3:])
            entry = per_role.setdefault(role, [0, 1.0, 0.0])
            entry[0] += 1
            entry[1] = min(entry[1], cos)
            entry[2] = max(entry[2], float(np.max(np.abs(w - g))))
    rows = [[role, n, f"{cos:.6f}", f"{err:.3g}"] for role, (n, cos, err) in sorted(per_role.items())]
    return rows, all(cos > 0.99 for _, cos, _ in per_role.values())


def main() -> int:
    from converters.acceptance.gates.verify import verify
    from converters.cli.verify import print_report
    from converters.pipeline.convert import DEFAULT_RECIPE, convert

    logging.basicConfig(level=logging.WARNING)
    gguf = ensure_gguf()
    for path in [ARTIFACT, *ARTIFACT.parent.glob(f"{ARTIFACT.name}.part-*")]:
        path.unlink(missing_ok=True)
    result = convert(gguf, ARTIFACT, recipe=DEFAULT_RECIPE, expect_kind="gguf")
    print_summary(result.summary())
    rows, ok = compare_with_reference(ARTIFACT)
    console.print(table("decoded artifact vs tinymodels reference (per parameter kind)",
                        ["parameter", "count", "worst cosine", "max abs error"], rows))
    console.print("[bold green]demo conversion OK[/]" if ok else "[bold red]demo conversion FAILED[/]")
    report = verify(ARTIFACT, gguf, sweep=True)
    print_report(report)
    return 0 if ok and report.result == "pass" else 1


if __name__ == "__main__":
    raise SystemExit(main())
