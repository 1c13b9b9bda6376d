"""Half-open byte interval arithmetic for address and file-range reports (docs/calbin.md §4.3 rules 5–6, §6).

"地址覆盖统计要先把 [address,address+bytes) 区间去重并合并": the union of many ranges, the bytes covered
more than once, and the overlapping pairs are computed vectorized (sort once, running maximum of ends)
so a graph with thousands of entries costs one ``argsort``. Addresses can exceed 2**63, so values are
kept in ``uint64`` after the caller has checked ``start + length <= 2**64``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Coverage:
    """Union of a set of intervals: merged ranges, their total, and how many bytes were claimed twice."""

    merged: list[tuple[int, int]]  # sorted, disjoint [start, end)
    union_bytes: int
    total_bytes: int  # sum of lengths, duplicates counted
    overlap_bytes: int  # total_bytes - union_bytes
    overlapping_pairs: int  # number of intervals that start before the running end of earlier ones


def coverage(starts: list[int] | np.ndarray, lengths: list[int] | np.ndarray) -> Coverage:
    """Merge ``[start, start + length)`` intervals (zero-length ones ignored)."""
    s = np.asarray(starts, dtype=np.uint64)
    n = np.asarray(lengths, dtype=np.uint64)
    keep = n > 0
    s, n = s[keep], n[keep]
    if s.size == 0:
        return Coverage([], 0, 0, 0, 0)
    order = np.argsort(s, kind="stable")
    s = s[order]
    e = s + n[order]
    run_end = np.maximum.accumulate(e)
    # An interval starts a new merged range when it begins at or after every earlier end.
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] >= run_end[:-1]
    starts_idx = np.flatnonzero(new)
    ends_idx = np.append(starts_idx[1:] - 1, s.size - 1)
    merged = [(int(s[a]), int(run_end[b])) for a, b in zip(starts_idx, ends_idx, strict=True)]
    union = sum(b - a for a, b in merged)
    total = sum(n.tolist())
    return Coverage(merged, union, total, total - union, int(np.count_nonzero(~new)))


def uncovered(extent: int, merged: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The gaps of ``[0, extent)`` not covered by sorted disjoint ``merged`` ranges."""
    gaps: list[tuple[int, int]] = []
    pos = 0
    for a, b in merged:
        if a > pos:
            gaps.append((pos, min(a, extent)))
        pos = max(pos, b)
        if pos >= extent:
            break
    if pos < extent:
        gaps.append((pos, extent))
    return [(a, b) for a, b in gaps if b > a]
