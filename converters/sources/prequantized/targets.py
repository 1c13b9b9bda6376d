"""Exact v3 targets of prequantized weights: the table, the transcoders, the ulp bounds
(docs/prequantized.md §Exactness table, §Ulp distance).

Targets per family, in preference order (each only where the values fit, else absent):

- NVFP4 → ``nvfp4`` (bit-exact: nibbles and E4M3 block scales copied, the scales into 128×4 tiles; the
  divisor is the convention's, docs/prequantized.md §Value relations);
- FP8 per tensor / channel → ``fp8_e4m3fn_row_bf16`` (codes copied; bit-exact when the scale is bfloat16,
  value-exact when the scale as the library applies it is a bfloat16 value — ModelOpt rounds it to the model
  dtype first, so a bfloat16 model's always is);
- INT4 → ``q4_g64_fp16`` (symmetric, group a multiple of 64 or per channel), ``q5_g64_fp16`` (also with zero
  points: ``q - z`` is in −15..15), ``q8_g32_fp16`` (group a multiple of 32); INT8 → ``q8_g32_fp16`` when no
  code is −128 (the one check that reads the codes); every one needs FP16-exact scales;
- every kind → ``bf16`` when the library's output dtype is bfloat16, and ``fp32``: the library's values.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ninfer_core import codecs
from ninfer_core.codecs.base import fail
from ninfer_core.codecs.bitpack import pack
from ninfer_core.codecs.nvfp4 import swizzle

from .numeric import E2M1, E4M3, NP_DTYPES, as_f32, component_bytes, ulp_distance

SECTION = "docs/prequantized.md §Exactness table"
ROW_SPLIT = {"q4_g64_fp16": (4, 64, -8, 7), "q5_g64_fp16": (5, 64, -16, 15), "q8_g32_fp16": (8, 32, -127, 127)}
BLOCK_ROWS = 4096  # rows per read when a whole tensor's scales or codes are scanned
#: (family, target) whose code plane the converter copies from the source's code rows (code_span). FP8 rows
#: into fp8_e4m3fn_row_bf16 are byte copies too, but their NaN check reads every code anyway, and reading them
#: again for a kernel copy measured slower (docs/io-speed.md §Prequantized bench)
CODE_COPY = {("nvfp4", "nvfp4")}


def _blocks(n: int, step: int = BLOCK_ROWS):
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _fits(values: np.ndarray, dtype) -> bool:
    """Whether every value converts to ``dtype`` and back unchanged (finite)."""
    v = np.asarray(values, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # out of range: infinity, which does not fit
        back = v.astype(dtype).astype(np.float32)
    return bool(np.isfinite(back).all() and np.array_equal(back, v))


def _scan(qw, read, test) -> bool:
    return all(test(read(a, b)) for a, b in _blocks(qw.shape[0]))


def distinct_scales(qw) -> np.ndarray:
    """The distinct values of ``qw``'s scale tensor (its stored dtype), read in order once and kept: a histogram
    of the bit patterns for 1- and 2-byte scales (one linear pass), sorted unique values otherwise."""
    if qw._distinct is None:
        t = qw.parts[qw.SCALES]
        seen, dtype = None, NP_DTYPES.get(t.dtype)
        for chunk in component_bytes(t):  # read in order (numeric.py); pieces of whole elements
            x = chunk.view(dtype)
            word = x.view(f"u{x.dtype.itemsize}")
            if x.dtype.itemsize <= 2:
                h = np.bincount(word, minlength=1 << (8 * x.dtype.itemsize)) > 0
                seen = h if seen is None else seen | h
            else:
                u = np.unique(word)
                seen = u if seen is None else np.union1d(seen, u)
        if seen is None:
            qw._distinct = np.zeros(0, dtype=np.float32)
        elif seen.dtype == bool:
            qw._distinct = np.flatnonzero(seen).astype(f"u{dtype.itemsize}").view(dtype)
        else:
            qw._distinct = seen.astype(f"u{dtype.itemsize}").view(dtype)
    return qw._distinct


def scale_byte_range(qw) -> tuple[int, int] | None:
    """The smallest and largest byte of an NVFP4 weight's E4M3 block scales (None when it has none), read in
    order once and kept: two vectorised reductions per piece, where the distinct set (:func:`distinct_scales`)
    costs a histogram (40 ms per 16 MiB on the benchmark VM, against 0.2 ms). Every NVFP4 check needs only
    this range unless the ulp bound over the whole range is not 0 (:func:`ulp_bound`)."""
    if qw._span is None:
        lo, hi = 255, -1
        for x in component_bytes(qw.parts[qw.SCALES]):  # read in order, not through a map (numeric.py)
            lo, hi = min(lo, int(x.min())), max(hi, int(x.max()))
        qw._span = (lo, hi) if hi >= 0 else ()
    return qw._span or None


def exact_targets(qw) -> dict[str, str]:
    """The table above for one weight."""
    out: dict[str, str] = {}
    n, k = qw.shape
    if qw.family == "nvfp4":
        ok_shape = n % 128 == 0 and k % 64 == 0
        d = qw.weight_divisor
        ok_div = d is not None and np.isfinite(np.float32(d)) and np.float32(d) > 0
        span = scale_byte_range(qw)  # no NaN (0x7F, 0xFF) and no negative (bit 7) byte: every byte below 0x7F
        if ok_shape and ok_div and (span is None or span[1] < 0x7F):
            out["nvfp4"] = "bit-exact"
    elif qw.family == "fp8" and qw.block[1] == k:
        label = _fp8_row_label(qw)
        if label:
            out["fp8_e4m3fn_row_bf16"] = label
    elif qw.family == "int":
        if _fits(as_f32(distinct_scales(qw)), np.float16):
            sg = qw.group or k
            if qw.bits == 4:
                if qw.symmetric and sg % 64 == 0:
                    out["q4_g64_fp16"] = "value-exact"
                if sg % 64 == 0:
                    out["q5_g64_fp16"] = "value-exact"
            if sg % 32 == 0 and (qw.bits == 4 or _no_code(qw, -128)):
                out["q8_g32_fp16"] = "value-exact"
    if qw.library_dtype == "bfloat16":
        out["bf16"] = "value-exact"
    out["fp32"] = "value-exact"
    return out


def _fp8_row_label(qw) -> str | None:
    """``bit-exact`` for BF16 scales; ``value-exact`` when every scale as the library applies it
    (``applied_scales``: ModelOpt rounds it to the model dtype first) is a bfloat16 value; else None."""
    if qw.parts[qw.SCALES].dtype == "BF16":
        return "bit-exact"
    if _fits(qw.applied_scales(distinct_scales(qw)), ml_dtypes.bfloat16):
        return "value-exact"
    return None


def no_quantized_target(qw) -> str | None:
    """Why ``qw`` has no quantized exact target — only float widenings (``bf16``, ``fp32``) — for the plan's
    notes; None when it has one."""
    if any(codecs.codec_traits(f).bits_per_weight < 16 for f in exact_targets(qw)):
        return None
    n, k = qw.shape
    if qw.family == "nvfp4":
        if n % 128 or k % 64:
            return f"nvfp4 needs [N, K] with N % 128 == 0 and K % 64 == 0, not [{n}, {k}]"
        d = qw.weight_divisor
        if d is None or not (np.isfinite(np.float32(d)) and np.float32(d) > 0):
            return f"nvfp4: its divisor {d!r} is not finite and positive"
        return "nvfp4: a block scale is NaN or negative"
    if qw.family == "fp8":
        if qw.block[1] != k:
            return f"its {qw.block[0]}x{qw.block[1]} scale blocks have no per-row form"
        applied = qw.applied_scales(distinct_scales(qw))
        bad = next(float(v) for v in applied if not _fits(np.float32(v), ml_dtypes.bfloat16))
        how = f" (ModelOpt applies it rounded to {qw.library_dtype})" if qw.kind == "MO_FP8" else ""
        return f"fp8_e4m3fn_row_bf16: scale {bad!r}{how} is not a bfloat16 value"
    if not _fits(as_f32(distinct_scales(qw)), np.float16):
        return "its scales are not all float16 values"
    if (qw.group or k) % 32:
        return f"its groups of {qw.group or k} columns are not whole 32- or 64-column groups"
    return "a code is -128, which q8_g32_fp16 (-127..127) cannot hold"


def _no_code(qw, code: int) -> bool:
    return _scan(qw, qw.codes, lambda q: not (q == code).any())


# --- transcoding -------------------------------------------------------------------------------------------

def code_span(qw, fmt: str, r0: int, r1: int) -> tuple[object, int, int] | None:
    """``(file, offset, length)``: the source bytes that are, byte for byte, the code plane of rows ``[r0, r1)``
    of ``qw`` as one ``fmt`` object — nvfp4's packed nibbles (:data:`CODE_COPY`), the first plane and row-major
    like the source's code tensor — or None."""
    if (qw.family, fmt) not in CODE_COPY or fmt not in qw.exact_targets():
        return None
    t = qw.parts[qw.CODES]
    plane = codecs.planes(fmt, codecs.FORMATS[fmt].layout, (r1 - r0, qw.shape[1]))[0]
    row = qw.shape[1] // 2
    if t.dtype != "U8" or tuple(t.shape) != (qw.shape[0], row) or plane.name != "codes" or plane.offset != 0 \
            or plane.size != (r1 - r0) * row:
        return None
    return t.file, t.file_offset + r0 * row, (r1 - r0) * row


def transcode(qw, fmt: str, runs: list[tuple[int, int]], *, codes: bool = True) -> np.ndarray:
    """The source rows of ``runs`` (``[(r0, r1), …]``, in that order: a row gather — one run for a plain row range)
    as one ``fmt`` object (uint8 array). Each row's codes and scales belong to it alone, so rows move with them
    exactly; nvfp4's block scales are gathered as rows and tiled (128×4) for the destination rows, which must be
    whole 128-row tiles (the runs need not be). ``codes=False`` (a target of :data:`CODE_COPY`, one run): the
    code plane is not filled (its bytes are unspecified), for a caller that copies it from :func:`code_span`."""
    targets = qw.exact_targets()
    if fmt not in targets:
        raise fail(f"tensor {qw.name!r}: {qw.kind} has no exact path into {fmt} (exact targets: "
                   f"{', '.join(targets) or 'none'})", "no_exact_transcode", SECTION, where=qw.name)
    n, k = sum(r1 - r0 for r0, r1 in runs), qw.shape[1]
    codes = codes or (qw.family, fmt) not in CODE_COPY or len(runs) != 1
    if fmt in ("fp32", "bf16"):
        v = _gather(qw.dequantize, runs)
        if fmt == "fp32":
            return np.ascontiguousarray(v, dtype="<f4").view(np.uint8).reshape(-1)
        return (v.view("<u4") >> np.uint32(16)).astype("<u2").view(np.uint8).reshape(-1)  # bfloat16 values: exact
    if fmt == "nvfp4" and n % 128:
        where = ", ".join(f"[{r0}, {r1})" for r0, r1 in runs[:4]) + (", …" if len(runs) > 4 else "")
        raise fail(f"tensor {qw.name!r}: nvfp4 rows {where} are {n} rows, not whole 128-row tiles", "nvfp4_rows",
                   "storage-layouts §3", where=qw.name)
    codec = codecs.FORMATS[fmt]
    geom = codec.geometry((n, k), 1)
    if codes:
        buf = np.zeros(geom.nbytes, dtype=np.uint8)
    else:  # the code plane (the first, code_span) is not made: only the bytes after it are zeroed, then filled
        buf = np.empty(geom.nbytes, dtype=np.uint8)
        buf[geom.planes[0].offset + geom.planes[0].size:] = 0
    views = codec.plane_views(geom, buf)
    if fmt == "nvfp4":
        _nvfp4(qw, views, runs, codes)
    elif fmt == "fp8_e4m3fn_row_bf16":
        _fp8_row(qw, views, runs)
    else:
        _row_split(qw, fmt, views, runs)
    return buf


def _gather(read, runs: list[tuple[int, int]]) -> np.ndarray:
    """``read(r0, r1)`` of every run, stacked by rows (no copy for one run)."""
    parts = [read(r0, r1) for r0, r1 in runs]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _source_row(runs: list[tuple[int, int]], i: int) -> int:
    """The source row of gathered row ``i``."""
    for r0, r1 in runs:
        if i < r1 - r0:
            return r0 + i
        i -= r1 - r0
    raise IndexError(i)


def _where(qw, row: int, what: str) -> str:
    return f"tensor {qw.name!r}: row {row}, {what}"


def _nvfp4(qw, views: dict, runs: list[tuple[int, int]], codes: bool = True) -> None:
    k = qw.shape[1]
    if codes:  # every byte is two valid E2M1 codes: nothing to check
        views["codes"][...] = _gather(qw.codes, runs)
    s = np.ascontiguousarray(_gather(qw.block_scales, runs))  # the rows' own scales, untiled, in gathered order
    if s.size and s.max() >= 0x7F:  # NaN (0x7F, 0xFF) or negative (bit 7): every byte from 0x7F up
        i, j = (int(x) for x in np.argwhere(s >= 0x7F)[0])
        raise fail(_where(qw, _source_row(runs, i), f"block {j} (columns {16 * j}..{16 * j + 15}): block scale "
                          f"byte {int(s[i, j]):#04x} is NaN or negative, which nvfp4 cannot hold"),
                   "unrepresentable_block", SECTION, where=qw.name)
    views["block_scales"][...] = swizzle(s, k)
    views["divisors"][...] = np.asarray([qw.weight_divisor], dtype="<f4").view(np.uint8).reshape(-1, 4)


def _bf16_words(qw, s: np.ndarray, rows) -> np.ndarray:
    if qw.parts[qw.SCALES].dtype == "BF16":
        return np.ascontiguousarray(s).view("<u2")
    f = qw.applied_scales(s)
    b = f.astype(ml_dtypes.bfloat16)
    off = np.flatnonzero(b.astype(np.float32).reshape(-1) != f.reshape(-1))
    if off.size:
        i = int(off[0])
        raise fail(_where(qw, rows(i), f"scale {float(f.reshape(-1)[i])!r} is not a bfloat16 value"),
                   "unrepresentable_block", SECTION, where=qw.name)
    return b.view("<u2")


def _fp8_row(qw, views: dict, runs: list[tuple[int, int]]) -> None:
    c = _gather(qw.codes, runs)
    nan = (c & 0x7F) == 0x7F
    if nan.any():
        i, j = (int(x) for x in np.argwhere(nan)[0])
        raise fail(_where(qw, _source_row(runs, i), f"column {j}: code {int(c[i, j]):#04x} is NaN"), "invalid_code",
                   SECTION, where=qw.name)
    views["codes"][...] = c
    words = _bf16_words(qw, _gather(qw.scale_grid, runs)[:, 0], lambda i: _source_row(runs, i))
    views["scales"][...] = np.ascontiguousarray(words).view(np.uint8).reshape(-1, 2)


def _row_split(qw, fmt: str, views: dict, runs: list[tuple[int, int]]) -> None:
    bits, tg, lo, hi = ROW_SPLIT[fmt]
    n, k = sum(r1 - r0 for r0, r1 in runs), qw.shape[1]
    sg = qw.group or k
    v = _gather(qw.values, runs).reshape(n, k)
    bad = (v < lo) | (v > hi)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise fail(_where(qw, _source_row(runs, i), f"column {j} (group {j // tg}): value {int(v[i, j])} is outside {fmt}'s "
                          f"{lo}..{hi}"), "unrepresentable_block", SECTION, where=qw.name)
    kp = views["low"].shape[1] * 8 // (4 if bits != 8 else 8)
    p = np.zeros((n, kp), dtype=np.uint8)
    p[:, :k] = v.astype(np.int8).view(np.uint8)
    if bits == 8:
        views["low"][...] = p
    else:
        pack(p, 4, out=views["low"])
        if bits == 5:
            pack(np.right_shift(p, 4) & 1, 1, out=views["high"])
    s = np.asarray(_gather(qw.scales, runs), dtype=np.float32)
    s16 = s.astype(np.float16)
    if not np.array_equal(s16.astype(np.float32), s):
        i, j = (int(x) for x in np.argwhere(s16.astype(np.float32) != s)[0])
        raise fail(_where(qw, _source_row(runs, i), f"group {j}: scale {float(s[i, j])!r} is not an fp16 value"),
                   "unrepresentable_block", SECTION, where=qw.name)
    per = sg // tg
    scale = views["scale"].view("<f2")
    scale[:, : k // tg] = np.repeat(s16, per, axis=1)[:, : k // tg]


# --- ulp bounds ---------------------------------------------------------------------------------------------

def ulp_bound(qw, fmt: str) -> int:
    """Largest ulp distance between ``fmt``'s decode and the library rule over every code with every distinct
    scale the tensor holds (a bound on the whole tensor, reading only the scales)."""
    if fmt not in qw.exact_targets():
        raise fail(f"tensor {qw.name!r}: {fmt} is not an exact target of {qw.kind}", "no_exact_transcode", SECTION,
                   where=qw.name)
    if fmt in ("fp32", "bf16"):
        return 0
    if qw.family == "nvfp4":
        span = scale_byte_range(qw)
        if span is None:
            return 0
        # every byte of the range first: a bound of 0 over a superset of the scales is the bound (one read of
        # the scales for their range, none for their histogram); else the distinct scales decide
        wide = _nvfp4_ulp(qw, np.arange(span[0], span[1] + 1, dtype=np.uint8))
        return 0 if wide == 0 else _nvfp4_ulp(qw, distinct_scales(qw).view(np.uint8))
    if qw.family == "fp8":
        u = distinct_scales(qw)[:, None]
        codes = np.arange(256, dtype=np.uint8)
        codes = codes[(codes & 0x7F) != 0x7F]
        q = E4M3[codes][None, :]
        words = _bf16_words(qw, u, lambda i: i).reshape(-1, 1)
        v3 = np.multiply(q, (words.astype(np.uint32) << 16).view(np.float32), dtype=np.float32)
        return ulp_distance(v3, qw.rule(np.broadcast_to(q, v3.shape), np.broadcast_to(u, v3.shape)), qw.library_dtype)
    bits, _, lo, hi = ROW_SPLIT[fmt]
    u = distinct_scales(qw)[:, None]
    vals = np.arange(max(lo, -255), min(hi, 255) + 1, dtype=np.float32)[None, :]
    v3 = np.multiply(vals, u.astype(np.float32).astype(np.float16).astype(np.float32), dtype=np.float32)
    return ulp_distance(v3, qw.rule(np.broadcast_to(vals, v3.shape), np.broadcast_to(u, v3.shape)), qw.library_dtype)


def _nvfp4_ulp(qw, u: np.ndarray) -> int:
    """The ulp bound of nvfp4's decode against the library rule for every code under the block-scale bytes ``u``."""
    s = E4M3[u][:, None]  # (U, 1)
    c = np.broadcast_to(E2M1, (len(u), 1, 16))
    v3 = np.divide(np.multiply(c, s[:, :, None], dtype=np.float32), np.float32(qw.weight_divisor), dtype=np.float32)
    return ulp_distance(v3, qw.rule(c, s), qw.library_dtype)


__all__ = ["CODE_COPY", "ROW_SPLIT", "code_span", "distinct_scales", "exact_targets", "no_quantized_target",
           "scale_byte_range", "transcode", "ulp_bound"]
