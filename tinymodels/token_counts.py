"""A deterministic token-count file for the indexed proposal shortlist (``text.proposal`` ``indexed``,
container §9.2: ``proposal/head`` holds the head rows of ``proposal/token_ids``, e.g. the ``rows`` most
frequent tokens).

Counts cover the ids the tiny tokenizer spells (:func:`tinymodels.tokenizer.default_size`; padding ids
above it never occur) and follow a Zipf law over a seeded permutation of the ids, made strictly
decreasing with the rank so the shortlist of any length is unambiguous (:func:`shortlist` is the
reference: count descending, then id ascending). File forms:

- TSV: a header line ``token_id<TAB>count``, then one line per id in id order;
- JSON: ``{"vocab_size": V, "counts": {"<id>": count, ...}}`` (ids as strings, in id order).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tinymodels import tokenizer

FORMATS = ("tsv", "json")


def token_counts(seed: int = 0, total: int = 1_000_000) -> dict[int, int]:
    """Token id → count for every id the tiny tokenizer spells."""
    n = tokenizer.default_size()
    rank = np.random.default_rng([seed, 0x70C0]).permutation(n)  # rank[id]
    counts = np.floor(total / (rank + 1.0) ** 1.07).astype(np.int64) + (n - rank)
    return {i: int(c) for i, c in enumerate(counts)}


def shortlist(counts: Mapping[int, int], rows: int) -> list[int]:
    """The ``rows`` most frequent ids (count descending, ties by id ascending)."""
    if not 0 < rows <= len(counts):
        raise ValueError(f"rows must be between 1 and {len(counts)}, got {rows}")
    return sorted(counts, key=lambda i: (-counts[i], i))[:rows]


def write_token_counts(path: str | os.PathLike[str], counts: Mapping[int, int] | None = None, fmt: str = "tsv",
                       vocab_size: int = 512) -> Path:
    """Write the counts as TSV or JSON; an existing path is refused."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} not supported; choose one of {', '.join(FORMATS)}")
    counts = token_counts() if counts is None else counts
    ordered = sorted(counts.items())
    if fmt == "tsv":
        text = "token_id\tcount\n" + "".join(f"{i}\t{c}\n" for i, c in ordered)
    else:
        text = json.dumps({"vocab_size": vocab_size, "counts": {str(i): c for i, c in ordered}}, indent=1) + "\n"
    path = Path(path)
    with open(path, "x", encoding="utf-8") as f:
        f.write(text)
    return path
