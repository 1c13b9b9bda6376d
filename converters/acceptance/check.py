"""``convert check``: the read-only self-test of a conversion (docs/ternary.md §5), for every mapping and recipe.

Nothing is written. The source is opened and bound, the plan made (and the template applied) exactly as
``convert gguf2ninfer`` would, then three checks run:

**CHECK 1 — geometry.** Every planned piece (a logical parameter's rows in its object), grouped by (source
type, rows ``n``, columns ``k``, target format, method): groups per row of the target, source bytes, the
bytes the same rows take in the target, and the padding between them. For an exact transcode the healthy
padding is 0 (the GGML block stream and the v3 planes hold the same bytes, docs/ternary.md §3); a non-zero
padding of a transcode is reported (``pad != 0``), not failed — a ``K`` that is not a multiple of 128 pads.
Ternary and binary sources (Ternary Bonsai, :mod:`converters.sources.ternary`) are measured with
:func:`converters.sources.ternary.geometry`, and their padding is explained from storage-layouts §1 instead of flagged:
``pad = codes + multipliers + alignment`` — trits and bits widen to t2's 2-bit codes (PTQ1_0 28 B per 128
elements → 34, TQ1_0 54 per 256 → 68, Q1_0 18 → 34), a 256-element block's multiplier is kept once per
128-group (TQ2_0 66 → 68), two 64-element Q2_0 blocks share one t2 multiplier, and the scale plane starts
at a multiple of 256. Only a payload that this arithmetic does not give (the codec's size disagreeing with
the layout) fails CHECK 1; PQ2_0 / Q2_0 (128) → t2 and Q2_0 → q2 have padding 0.

**CHECK 2 — byte round trip, decode equality, offset probe** on a fixed sample: the source tensor of the
first parameter of each role (mapping order: the lowest layer). ``bytes_equal`` — the source blocks
transcoded to the target and taken apart again (:data:`DISASSEMBLERS`, written from storage-layouts §1, not
from the transcoders) give the same bytes; for a ternary source in ``t2_g128_fp16`` (trits and bits cannot
be reassembled byte for byte) the same proof is ``codes_equal`` — every code and multiplier of the
transcoded rows equals the source block's (:func:`converters.sources.ternary.compare_codes`, read back from the
planes); ``decode_equal`` — the transcoded object decodes to the source's own float values. Each of them
passes on bytes read at a wrong offset whenever the transcoder accepts them (wrong bytes in, the same wrong
bytes out: docs/ternary.md §5), so the content is probed too. The probe is format-aware
(:func:`multiplier_of`): ternary types keep ``d`` where :func:`converters.sources.ternary.scale_columns` says
(PTQ1_0 last, bytes 26..27 of 28; PQ2_0 / Q2_0 / Q1_0 first), other GGML types per :data:`MULTIPLIERS` —
the original packer's release probed every source as 34-byte blocks with ``d`` at ``slice(0, 2)``, which reads
PTQ1_0 wrong. The multipliers of real blocks are a tight cluster — all finite, non-negative where the
format's quantizer makes them so, few distinct high bytes (sign masked), median of |d| in
(0, :data:`MEDIAN_MAX`) — while bytes read at a shifted offset look like uniform 16-bit samples: half
negative, some non-finite, every exponent. (The original packer bounded the median by 1; small synthetic models
legitimately exceed it — the tiny Bonsai embedding's ternary ``d`` is about 1.26 — and the negatives,
non-finite words and high-byte spread carry the offset signature, so the bound here only rejects
multipliers no weight tensor has.)
Anything else prints ``IMPLAUSIBLE -- offset bug?`` and fails. Rows are sampled (the first and the last
:data:`SAMPLE_BYTES` of each tensor), so the check stays fast on any model size.

**CHECK 3 — producer smoke** for every object of the output: produced (streamed, bytes counted, nothing
kept) with the planned byte count equal to the codec's encoded size of its shape; template objects that
would be borrowed are listed as such (``borrowed``), not produced. Byte counts are what a wrongly ordered
row gets right (docs/ternary.md §5: check is no substitute for acceptance): run ``convert verify``
after writing.

``RESULT: OK`` / ``RESULT: FAILED``; :func:`run_check` returns the whole report as JSON-ready data.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from converters.acceptance.gates.codes import finding
from converters.acceptance.registry import GateContext, gate, new_report, run_gates
from converters.acceptance.report import SCHEMA_CHECK, Report
from converters.mapping.recipes import load_recipe
from converters.model.engine import open_model
from converters.pipeline.convert import conversion_recipe, plan_conversion
from converters.pipeline.planned import PlannedTensor
from converters.pipeline.produce import Producer
from converters.pipeline.template import BorrowedObject, apply_template
from converters.sources import ternary
from converters.sources.prequantized import KINDS, ulp_distance
from converters.sources.rows import TensorRows, storage_of
from ninfer_core import codecs, open_artifact
from ninfer_core.codecs.ggml_types import BY_NAME as GGML_TYPES
from ninfer_core.errors import NinferError

#: bytes of each end of a sampled tensor read by CHECK 2
SAMPLE_BYTES = 8 * 1024 * 1024
HI_DISTINCT_MAX = 64
MEDIAN_MAX = 64.0


@dataclass(frozen=True)
class Multiplier:
    """Where a GGML block keeps its FP16 multiplier ``d``, and whether its quantizer makes ``d >= 0``."""

    offset: int
    non_negative: bool


# From the GGML type table (ninfer_core.codecs.ggml_types): the types whose quantizer's sign of d is
# recorded. Ternary and binary types: multiplier_of().
MULTIPLIERS: dict[str, Multiplier] = {t.name: Multiplier(t.multipliers[0], t.d_non_negative)
                                      for t in GGML_TYPES.values() if t.d_non_negative is not None}


def multiplier_of(ggml_type: str) -> Multiplier | None:
    """Where ``ggml_type`` keeps ``d``: ternary/binary types from :func:`converters.sources.ternary.scale_columns`
    (non-negative: the probe of docs/ternary.md §5 requires ``negative = 0`` of PTQ1_0 and PQ2_0 sources alike), other
    GGML types from :data:`MULTIPLIERS`."""
    if ternary.is_ternary(ggml_type):
        return Multiplier(ternary.scale_columns(ggml_type).start, True)
    return MULTIPLIERS.get(ggml_type)


def multiplier_words(blocks: np.ndarray, columns: slice) -> np.ndarray:
    """The little-endian FP16 words at byte ``columns`` (two bytes) of each ``(n_blocks, block bytes)`` block."""
    lo, hi = columns.start, columns.start + 1
    return blocks[:, lo].astype(np.uint16) | (blocks[:, hi].astype(np.uint16) << 8)


def plausibility(blocks: np.ndarray, ggml_type: str) -> dict | None:
    """Probe the multipliers of ``(n_blocks, type_size)`` raw blocks; None for types without an FP16 ``d``."""
    m = multiplier_of(ggml_type)
    if m is None or blocks.size == 0:
        return None
    return probe_words(multiplier_words(blocks, slice(m.offset, m.offset + 2)), non_negative=m.non_negative)


def probe_words(words: np.ndarray, *, non_negative: bool = True) -> dict:
    """The content probe of FP16 multiplier words (docs/ternary.md §5): plausible when all finite, none negative (where
    the format's quantizer makes ``d >= 0``), at most :data:`HI_DISTINCT_MAX` distinct high bytes (sign
    masked) and the median of ``|d|`` in ``(0, MEDIAN_MAX)``."""
    d = words.view(np.float16).astype(np.float32)
    finite = np.isfinite(d)
    mag = np.abs(d[finite])
    stats = {
        "blocks": int(d.size),
        "nonfinite": int(d.size - np.count_nonzero(finite)),
        "negative": int(np.count_nonzero(d[finite] < 0)),
        "hi_distinct": int(np.unique((words & 0x7FFF) >> 8).size),
        "median": float(np.median(mag)) if mag.size else float("nan"),
    }
    stats["plausible"] = bool(stats["nonfinite"] == 0 and (stats["negative"] == 0 or not non_negative)
                              and stats["hi_distinct"] <= HI_DISTINCT_MAX and 0.0 < stats["median"] < MEDIAN_MAX)
    return stats


# --- taking a transcoded object apart again (storage-layouts §1) -----------------------------------------

def _planes(fmt: str, shape: tuple[int, int], data: bytes) -> dict[str, np.ndarray]:
    """The planes of a row_split object as ``(N, row bytes)`` arrays (storage-layouts §1)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    out = {}
    for p in codecs.planes(fmt, codecs.FORMATS[fmt].layout, shape):
        out[p.name] = buf[p.offset:p.offset + p.size].reshape(shape[0], -1)
    return out


def _q8_blocks(data: bytes, shape: tuple[int, int], block_bytes: int) -> np.ndarray:
    """q8_g32_fp16 → Q8_0 blocks ``[d][qs x32]``: d is scale group b, qs the low plane's 32 codes of block b."""
    n, k = shape
    planes = _planes("q8_g32_fp16", shape, data)
    nb = k // 32
    out = np.empty((n, nb, block_bytes), dtype=np.uint8)
    out[:, :, :2] = planes["scale"][:, : 2 * nb].reshape(n, nb, 2)
    out[:, :, 2:] = planes["low"][:, : 32 * nb].reshape(n, nb, 32)
    return out.reshape(n, -1)


def _q2_blocks(block: int) -> Callable:
    """q2_g64_fp16 → Q2_0 / PQ2_0 blocks ``[d][qs]``: the 2-bit fields are already in Q2_0's order; ``d`` is
    the first 64-group multiplier of the block."""

    def run(data: bytes, shape: tuple[int, int], block_bytes: int) -> np.ndarray:
        n, k = shape
        planes = _planes("q2_g64_fp16", shape, data)
        nb, qbytes, per = k // block, block // 4, block // 64
        scale = planes["scale"][:, : 2 * nb * per].reshape(n, nb, per, 2)[:, :, 0, :]
        out = np.empty((n, nb, block_bytes), dtype=np.uint8)
        out[:, :, :2] = scale
        out[:, :, 2:] = planes["low"][:, : qbytes * nb].reshape(n, nb, qbytes)
        return out.reshape(n, -1)

    return run


def _copy(data: bytes, shape, block_bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def _f16_from_fp32(data: bytes, shape, block_bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").astype("<f2").view(np.uint8)  # widening is exact, so is narrowing back


DISASSEMBLERS: dict[tuple[str, str], Callable] = {
    ("Q8_0", "q8_g32_fp16"): _q8_blocks,
    ("Q2_0_G128", "q2_g64_fp16"): _q2_blocks(128),
    ("PQ2_0", "q2_g64_fp16"): _q2_blocks(128),
    ("Q2_0_G64", "q2_g64_fp16"): _q2_blocks(64),
    ("BF16", "bf16"): _copy,
    ("F32", "fp32"): _copy,
    ("F16", "fp32"): _f16_from_fp32,
}


def _disassembler(kind: str, fmt: str) -> Callable | None:
    if codecs.codec_traits(fmt).ggml_passthrough:
        return _copy
    return DISASSEMBLERS.get((kind, fmt))


# --- the checks ------------------------------------------------------------------------------------------

def _group_size(fmt: str) -> int | None:
    return codecs.codec_traits(fmt).group


def ternary_padding(type_name: str, n: int, k: int, fmt: str) -> dict:
    """Where the bytes of ``n × k`` elements of a ternary/binary ``type_name`` transcoded into ``fmt`` go,
    from storage-layouts §1 (not from the codec): the low plane of 2-bit codes ``n·Kp/4`` bytes, the scale
    plane ``2·n·Kp/G`` bytes starting at the next multiple of 256. ``codes`` / ``multipliers``: target minus
    source bytes of each; ``alignment``: the gap before the scale plane (their sum is the padding);
    ``payload``: the object's bytes."""
    t = ternary.TYPES[type_name]
    group = codecs.FORMATS[fmt].group
    kp = -(-k // 128) * 128
    low, scale = n * kp // 4, 2 * n * kp // group
    blocks = n * (k // t.block)
    return {"codes": low - blocks * (t.block_bytes - 2), "multipliers": scale - 2 * blocks,
            "alignment": -(-low // 256) * 256 - low, "payload": -(-low // 256) * 256 + scale}


def _ternary_note(type_name: str, fmt: str, pad: dict) -> str:
    if not any(pad.values()):
        return ""
    t = ternary.TYPES[type_name]
    why = []
    if pad["codes"]:
        why.append(f"codes {pad['codes']:+,} ({t.codes} codes → 2 bits)" if t.codes != "two_bit"
                   else f"codes {pad['codes']:+,}")
    if pad["multipliers"]:
        why.append(f"multipliers {pad['multipliers']:+,} (one d per {t.block}-block, one per "
                   f"{codecs.FORMATS[fmt].group}-group)")
    if pad["alignment"]:
        why.append(f"scale plane alignment {pad['alignment']:+,}")
    return "expected: " + ", ".join(why)


def check_geometry(plan, sources) -> dict:
    """CHECK 1: planned pieces grouped by (source type, n, k, target format, method). Ternary transcodes:
    :func:`converters.sources.ternary.geometry`, the padding explained by :func:`ternary_padding`; a payload that
    the layout arithmetic does not give fails."""
    groups: dict[tuple, dict] = {}
    for obj in plan.objects:
        if not isinstance(obj, PlannedTensor):
            continue
        for pc in obj.pieces:
            st = storage_of(sources[pc.source.input].tensor(pc.source.tensor))
            k = obj.shape[-1] if len(obj.shape) >= 2 else 1
            n = pc.rows
            key = (pc.source_type, n, k, obj.format, pc.method)
            g = groups.setdefault(key, {"source_type": pc.source_type, "n": n, "k": k, "format": obj.format,
                                        "method": pc.method, "tensors": 0, "source_bytes": 0, "payload_bytes": 0})
            g["tensors"] += 1
            if (pc.method == "transcode" and ternary.is_ternary(pc.source_type) and obj.format in ternary.TARGETS
                    and obj.divisors == 1):
                geo = ternary.geometry(pc.source_type, n, k, obj.format)
                pad = ternary_padding(pc.source_type, n, k, obj.format)
                g["blocks_per_row"] = geo["blocks_per_row"]
                g["layout_payload"] = g.get("layout_payload", 0) + pad.pop("payload")
                g.setdefault("explained", dict.fromkeys(pad, 0))
                for part, v in pad.items():
                    g["explained"][part] += v
                g["source_bytes"] += geo["source_bytes"]
                g["payload_bytes"] += geo["payload_bytes"]
                continue
            qw = sources[pc.source.input].quantized(pc.source.tensor)
            if qw is not None:  # prequantized: the bytes its components hold for these rows (docs/prequantized.md)
                src_bytes = sum(t.byte_length for t in qw.parts.values()) * n // max(1, qw.shape[0])
            else:
                src_bytes = n * st.row_bytes if st.row_bytes is not None else n * k * st.block_bytes // st.block
            shape = (n, k) if len(obj.shape) >= 2 else (n,)
            payload = codecs.encoded_size(obj.format, obj.layout, shape, 1) if obj.divisors == 1 else None
            g["source_bytes"] += src_bytes
            g["payload_bytes"] = None if payload is None or g["payload_bytes"] is None else g["payload_bytes"] + payload
    rows, ok = [], True
    for g in groups.values():
        size = _group_size(g["format"])
        g["groups_per_row"] = -(-g["k"] // size) if size else None
        exact = g["method"] == "transcode"
        g["pad"] = g["payload_bytes"] - g["source_bytes"] if exact and g["payload_bytes"] is not None else None
        g["note"] = ("pad != 0" if g["pad"] else "") if exact else "requantized: sizes differ by design"
        if exact and g["source_type"] in KINDS:
            g["note"] = "prequantized: codes and scales kept, the source's tensor-level scales differ in form"
        if "explained" in g:
            if g["layout_payload"] != g["payload_bytes"]:
                g["note"] = (f"MISMATCH: storage-layouts §1 gives {g['layout_payload']:,} payload bytes, the codec "
                             f"{g['payload_bytes']:,}")
                ok = False
            else:
                g["note"] = _ternary_note(g["source_type"], g["format"], g["explained"])
        rows.append(g)
    rows.sort(key=lambda g: (g["source_type"], g["format"], g["n"], g["k"]))
    return {"groups": rows, "ok": ok}


def _sample_parameters(bound) -> list:
    seen_roles, seen_tensors, out = set(), set(), []
    for p in bound.parameters:
        if p.source is None or p.role in seen_roles:
            continue
        seen_roles.add(p.role)
        key = (p.source.input, p.source.tensor)
        if key not in seen_tensors:
            seen_tensors.add(key)
            out.append(p)
    return out


def _target(plan, p, kind: str) -> str | None:
    """The plan's format for ``p`` when it is transcoded, else the best exact target of the source type."""
    for obj in plan.objects:
        if isinstance(obj, PlannedTensor):
            for pc in obj.pieces:
                if pc.parameter == p.name and pc.method == "transcode":
                    return obj.format
    try:
        targets = codecs.exact_targets(kind)
    except NinferError:
        return None
    ranked = sorted(targets.items(),
                    key=lambda kv: (codecs.codec_traits(kv[0]).ggml_passthrough, kv[1] != "bit_exact", kv[0]))
    return ranked[0][0] if ranked else None


def _sample_rows(rows: TensorRows) -> list[tuple[int, int]]:
    st = rows.storage
    if st.row_bytes is None:
        return [(0, st.rows)]
    per = max(1, SAMPLE_BYTES // max(1, st.row_bytes))
    if st.rows <= 2 * per:
        return [(0, st.rows)]
    return [(0, per), (st.rows - per, st.rows)]


def _roundtrip(rows: TensorRows, kind: str, fmt: str | None, tensor: str, entry: dict, probe_blocks: list) -> None:
    """Transcode the sampled rows, take them apart again, decode both ways (updates ``entry``)."""
    st = rows.storage
    if rows.quantized is not None:
        _roundtrip_prequantized(rows.quantized, fmt, entry)
        return
    for r0, r1 in _sample_rows(rows):
        ids = slice(r0, r1) if st.row_bytes is not None else slice(0, st.rows)
        raw = np.ascontiguousarray(rows.raw(ids))
        entry["rows_sampled"] += r1 - r0
        if st.ggml_type is not None and st.block > 1:
            probe_blocks.append(raw.reshape(-1, st.block_bytes))
        if fmt is None:
            continue
        shape = (r1 - r0, st.cols) if len(rows.tensor.shape) >= 2 else (r1 - r0,)
        data = codecs.transcode_ggml(kind, raw.reshape(-1), shape, fmt, tensor=tensor)
        back = _disassembler(kind, fmt)
        if back is not None:
            same = bool(np.array_equal(np.asarray(back(data, shape, st.block_bytes)).reshape(-1), raw.reshape(-1)))
            entry["bytes_equal"] = same and entry["bytes_equal"] is not False
        if ternary.is_ternary(kind) and fmt in ternary.TARGETS:
            proof = ternary.compare_codes(kind, raw.reshape(r1 - r0, -1), fmt, data, shape)
            for key in ("codes_equal", "multipliers_equal"):
                if not proof[key]:
                    entry["codes_differ"].append(key.removesuffix("_equal"))
            entry["codes_equal"] = not entry["codes_differ"]
        decoded = codecs.decode(fmt, codecs.FORMATS[fmt].layout, shape, data)
        same = bool(np.array_equal(decoded.reshape(-1), rows.floats(ids).reshape(-1), equal_nan=True))
        entry["decode_equal"] = same and entry["decode_equal"] is not False


def _roundtrip_prequantized(qw, fmt: str | None, entry: dict) -> None:
    """A prequantized weight: its transcode decodes to the library's values within ``max_ulp``
    (docs/prequantized.md §Ulp distance)."""
    n = qw.shape[0]
    entry["rows_sampled"] += n
    if fmt is None:
        return
    data = qw.transcode(fmt, 0, n)
    decoded = codecs.decode(fmt, codecs.FORMATS[fmt].layout, qw.shape, data)
    same = ulp_distance(decoded, qw.dequantize(0, n), qw.library_dtype) <= qw.max_ulp(fmt)
    entry["decode_equal"] = same and entry["decode_equal"] is not False


def check_roundtrip(plan, model) -> dict:
    """CHECK 2 on one source tensor per role."""
    samples, ok = [], True
    for p in _sample_parameters(model.bound):
        rows = TensorRows(model.sources[p.source.input], p.source.tensor)
        st = rows.storage
        kind = st.ggml_type or st.dtype
        fmt = _target(plan, p, kind)
        if fmt is None and rows.quantized is not None:  # prequantized: its first exact target (docs/prequantized.md)
            fmt = next(iter(rows.quantized.exact_targets()))
        entry = {"tensor": p.source.tensor, "parameter": p.name, "role": p.role, "type": kind, "target": fmt,
                 "rows_sampled": 0, "bytes_equal": None, "codes_equal": None, "codes_differ": [], "decode_equal": None,
                 "probe": None, "verdict": "OK"}
        problems, probe_blocks = [], []
        try:
            with np.errstate(invalid="ignore", over="ignore"):  # misread bytes decode to NaN/inf; probed below
                _roundtrip(rows, kind, fmt, p.source.tensor, entry, probe_blocks)
        except NinferError as exc:
            problems.append(f"transcode refused: {exc.message}")
        if probe_blocks:
            entry["probe"] = plausibility(np.concatenate(probe_blocks), kind)
        if entry["bytes_equal"] is False:
            problems.append("bytes differ after the round trip")
        if entry["codes_equal"] is False:
            problems.append(f"{' and '.join(entry['codes_differ'])} differ from the source blocks' after the transcode")
        if entry["decode_equal"] is False:
            problems.append("decoded values differ from the source's")
        if entry["probe"] is not None and not entry["probe"]["plausible"]:
            problems.append("IMPLAUSIBLE -- offset bug?")
        if problems:
            entry["verdict"] = "FAILED"
            entry["problems"] = problems
            ok = False
        samples.append(entry)
    return {"samples": samples, "ok": ok}


def check_producer(objects, producer: Producer, workers: int | None = None) -> dict:
    """CHECK 3: produce every non-borrowed object and count its bytes."""
    rows, ok = [], True

    def one(o) -> dict:
        row = {"object": o.id, "kind": o.kind, "bytes": o.bytes}
        if isinstance(o, BorrowedObject):
            row["status"] = "borrowed"
            return row
        if o.kind == "tensor":
            row.update(shape=list(o.shape), format=o.format)
            want = codecs.encoded_size(o.format, o.layout, o.shape, getattr(o, "divisors", 1))
        else:
            want = o.bytes
        n = 0
        try:
            for chunk in producer.stream(o):
                n += len(chunk) if isinstance(chunk, bytes) else memoryview(chunk).nbytes
        except NinferError as exc:
            row["status"] = f"FAILED: {exc.message}"
            return row
        row["produced"] = n
        if n != o.bytes or want != o.bytes:
            row["status"] = f"MISMATCH want {want}"
        else:
            row["status"] = "OK"
        return row

    n = workers if workers is not None else min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="check") as pool:
        for row in pool.map(one, objects):
            rows.append(row)
            ok = ok and row["status"] in ("OK", "borrowed")
    borrowed = Counter(r["object"].split("/", 1)[0] for r in rows if r["status"] == "borrowed")
    return {"objects": rows, "produced": sum(r["status"] != "borrowed" for r in rows),
            "borrowed": dict(sorted(borrowed.items())), "ok": ok}


class CheckRun(GateContext):
    """What check's three gates share: the opened source, the plan, the objects to write (template applied)."""

    def __init__(self, report: Report, model, plan, objects, producer: Producer, workers: int | None):
        super().__init__(report)
        self.model, self.plan, self.objects, self.producer, self.workers = model, plan, objects, producer, workers

    def has(self, need: str) -> bool:
        return need in ("source", "plan")


@gate("check", "1", "geometry", needs=("source", "plan"),
      summary="planned pieces grouped by source type, rows, columns, target format and method: source bytes, "
              "target bytes, padding; a ternary payload the layout arithmetic does not give fails")
def geometry(run, g):
    c1 = run.report.sections["check1"] = check_geometry(run.plan, run.model.sources)
    g.check("groups", "padding", "layout_payload")
    return [finding("CHECK_GEOMETRY_MISMATCH", f"{r['source_type']} {r['n']}x{r['k']} -> {r['format']}: {r['note']}")
            for r in c1["groups"] if r["note"].startswith("MISMATCH")]


@gate("check", "2", "roundtrip", needs=("source", "plan"),
      summary="one source tensor per role: byte round trip (or codes for ternary sources), decode equality, "
              "the multiplier probe that catches a wrong offset")
def roundtrip(run, g):
    c2 = run.report.sections["check2"] = check_roundtrip(run.plan, run.model)
    g.check("bytes_equal", "codes_equal", "decode_equal", "offset_probe")
    return [finding("CHECK_ROUNDTRIP_FAILED", f"{s['tensor']}: {'; '.join(s['problems'])}", path=s["parameter"])
            for s in c2["samples"] if s["verdict"] != "OK"]


@gate("check", "3", "producer", needs=("source", "plan"),
      summary="every object of the output produced (streamed, counted, not kept) to its planned encoded size; "
              "objects a template lends listed as borrowed")
def producer(run, g):
    c3 = run.report.sections["check3"] = check_producer(run.objects, run.producer, run.workers)
    g.check("produced_bytes", "encoded_size")
    return [finding("CHECK_PRODUCER_FAILED", f"{r['object']}: {r['status']}", path=r["object"])
            for r in c3["objects"] if r["status"] not in ("OK", "borrowed")]


def run_check(gguf, *, template=None, recipe=None, components=("text",), workers: int | None = None,
              source=None) -> dict:
    """The three checks on ``gguf`` (a path; or ``source``, an open Source, for tests); read-only. The JSON
    document: ``source``, ``recipe``, ``template``, ``check1``–``check3``, the ``gates`` with their findings
    (docs/acceptance.md) and ``result`` ``OK`` / ``FAILED``."""
    tpl = open_artifact(template) if template is not None else None
    report = new_report("check", SCHEMA_CHECK)
    try:
        named = load_recipe(recipe) if recipe is not None else None
        with open_model(source if source is not None else gguf, components=components) as model:
            rec = conversion_recipe(named, tpl, model.source)  # as a conversion chooses it (docs/ternary.md §1)
            plan = plan_conversion(model, rec)
            objects = apply_template(plan, tpl) if tpl is not None else list(plan.objects)
            report.sections.update(source=str(model.source.path), recipe=rec.name,
                                   template=None if template is None else str(template))
            run_gates("check", CheckRun(report, model, plan, objects,
                                        Producer(model.sources, hadamard_seed=rec.hadamard_seed), workers))
    finally:
        if tpl is not None:
            tpl.close()
    doc = report.to_json()
    doc["verdict"] = "pass" if report.ok else "fail"  # docs/cli.md §JSON contract; ``result`` kept for one release
    doc["result"] = "OK" if report.ok else "FAILED"
    return doc
