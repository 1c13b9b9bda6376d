"""``verify`` gates 4 and 5: each logical parameter against the source, by value and by order.

Gate 4 (values): the parameter decoded from the artifact (:class:`~converters.acceptance.gates.decode.ArtifactRows`)
against the source's values after the mapped transforms (:class:`~converters.acceptance.gates.decode.SourceRows`).
Where provenance calls every object behind the binding ``bit-exact`` or ``value-exact`` the two must be
equal element for element (``VERIFY_VALUE_NOT_EXACT``) — for a prequantized source's kept objects, the
artifact's values rounded to the library's dtype within the recorded ``max_ulp`` of the library's
(:mod:`converters.acceptance.gates.library_rule`); otherwise the cosine and the maximum error must be
within the format's tolerance (:mod:`converters.acceptance.gates.tolerance`, ``VERIFY_VALUE_TOLERANCE``).

Gate 5 (order probes) — docs/ternary.md §5: a check that compares sizes, or even a global statistic, passes when
rows are in the wrong order. So, per row of every matrix, the relative error against the source row of the
same index (a row from elsewhere is ≈ √2 away): rows whose norm is off are ``VERIFY_ROW_NORM`` (scale,
shift), rows whose norm agrees but direction does not are ``VERIFY_ROW_ORDER`` (a permutation keeps norms).
Rows whose source norm is below ``ROW_FLOOR`` × the median row norm (unused vocabulary rows) are judged
against that floor. And per head slice of a head-structured parameter
(:func:`converters.acceptance.gates.contract.heads`): a head that is outside tolerance and matches another source head
(within the ``foreign`` bound, far above format noise) better than its own, or that is so far from its own
that it matches none, is ``VERIFY_HEAD_ORDER`` — swapped heads, V heads left tiled, query and gate left
interleaved. A head outside tolerance that still matches its own index best is a value problem (gate 4).

Everything is computed by row blocks; head-structured parameters (bounded by one layer's size) are compared
whole, since their heads may lie along columns. What is compared is a list of :class:`Target`: the bound
parameters of every component (:func:`bound_targets`), and the proposal head
(:func:`converters.acceptance.gates.proposal.proposal_targets`); head slices follow each component's geometry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from converters.acceptance.gates import tolerance
from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.contract import heads
from converters.acceptance.gates.decode import ArtifactRows, SourceRows, row_blocks
from converters.acceptance.gates.library_rule import LibraryRule, library_rule
from converters.acceptance.report import Finding
from converters.errors import ConverterError
from ninfer_core.errors import NinferError

EXACT_LABELS = ("bit-exact", "value-exact")
SHOWN = 5
ROW_FLOOR = 1e-3


def _as_rows(x: np.ndarray) -> np.ndarray:
    """``x`` as ``[rows, K]`` (2-D as it is; else one element per row)."""
    return x if x.ndim == 2 else x.reshape(-1, 1)


@dataclass
class Stats:
    """Running comparison of decoded (``g``) against source (``w``) values."""

    sxy: float = 0.0
    sxx: float = 0.0
    syy: float = 0.0
    max_abs: float = 0.0
    max_want: float = 0.0
    differing: int = 0
    first_diff: int | None = None
    elements: int = 0
    row_abs: list = field(default_factory=list)  # per row ‖g − w‖
    row_want: list = field(default_factory=list)  # per row ‖w‖
    row_got: list = field(default_factory=list)  # per row ‖g‖
    rule: LibraryRule | None = None  # a prequantized source's library rule: g rounded to its dtype, max_ulp apart

    def add(self, g: np.ndarray, w: np.ndarray) -> None:
        """Add a block: one compiled pass (:mod:`.stats_kernel`) gives the per-row float64 sums and the block's
        extremes and differing elements (with a library rule: those beyond its bound)."""
        from converters.acceptance.gates import stats_kernel

        if self.rule is not None:
            g = self.rule.rounded(g)
        g2 = np.ascontiguousarray(_as_rows(g), dtype=np.float32)
        w2 = np.ascontiguousarray(_as_rows(w), dtype=np.float32)
        sums = np.empty((g2.shape[0], 4), dtype=np.float64)
        max_abs, max_want, n, first = stats_kernel.row_stats(g2, w2, sums) if g.size else (0.0, 0.0, 0, -1)
        if self.rule is not None and g.size:
            neq = self.rule.beyond(g, w)
            n = int(np.count_nonzero(neq))
            first = int(np.argmax(neq.reshape(-1))) if n else -1
        self.sxx += float(np.sum(sums[:, 0]))
        self.syy += float(np.sum(sums[:, 1]))
        self.sxy += float(np.sum(sums[:, 2]))
        self.max_abs = max_abs if math.isnan(max_abs) else max(self.max_abs, max_abs)
        self.max_want = max(self.max_want, max_want)
        if n and self.first_diff is None:
            self.first_diff = self.elements + first
        self.differing += n
        self.elements += g.size
        if g.ndim == 2 and g.shape[1] > 1:
            self.row_abs.append(np.sqrt(sums[:, 3]))
            self.row_want.append(np.sqrt(sums[:, 0]))
            self.row_got.append(np.sqrt(sums[:, 1]))

    def rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Per row: relative error ‖g − w‖ / ‖w‖ and norm deviation |‖g‖ − ‖w‖| / ‖w‖, where ‖w‖ is floored at
        :data:`ROW_FLOOR` × the median row norm (a near-empty source row — an unused vocabulary entry — is
        judged by its absolute error against a typical row, not by a ratio that format noise blows up)."""
        if not self.row_abs:
            return None
        err, wn, gn = (np.concatenate(x) for x in (self.row_abs, self.row_want, self.row_got))
        floor = ROW_FLOOR * float(np.median(wn)) if wn.size else 0.0
        denom = np.maximum(wn, floor)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(denom > 0, err / denom, np.where(err > 0, np.inf, 0.0))
            dev = np.where(denom > 0, np.abs(gn - wn) / denom, np.where(gn > 0, np.inf, 0.0))
        return rel, dev

    @property
    def cosine(self) -> float:
        if self.sxx == 0 and self.syy == 0:
            return 1.0
        if self.sxx == 0 or self.syy == 0:
            return 0.0
        return self.sxy / math.sqrt(self.sxx * self.syy)

    @property
    def max_rel(self) -> float:
        return self.max_abs / self.max_want if self.max_want > 0 else (0.0 if self.max_abs == 0 else math.inf)


@dataclass
class ParameterCheck:
    """One parameter's figures (a row of the verify table)."""

    name: str
    exactness: str
    formats: tuple[str, ...]
    cosine: float
    max_abs: float
    max_rel: float
    worst_row_rel: float | None
    ok_values: bool
    ok_order: bool
    rule: LibraryRule | None = None  # compared with a prequantized source's library rule (library_rule.py)

    def to_dict(self) -> dict:
        library = {"library_dtype": self.rule.dtype, "max_ulp": self.rule.max_ulp} if self.rule is not None else {}
        return {"name": self.name, "exactness": self.exactness, **library, "formats": list(self.formats),
                "cosine": round(self.cosine, 9), "max_abs": float(f"{self.max_abs:.6g}"),
                "max_rel": float(f"{self.max_rel:.6g}"),
                "worst_row_rel": None if self.worst_row_rel is None else float(f"{self.worst_row_rel:.6g}"),
                "values": "pass" if self.ok_values else "fail", "order": "pass" if self.ok_order else "fail"}


@dataclass
class ValuesResult:
    values: list[Finding] = field(default_factory=list)
    order: list[Finding] = field(default_factory=list)
    checked: list[ParameterCheck] = field(default_factory=list)


def object_facts(art, object_ids) -> tuple[str, tuple[str, ...], str]:
    """(exactness, formats, encoder) of the objects behind a binding, from provenance (worst exactness)."""
    prov = art.provenance.get("objects") or {}
    order = ("bit-exact", "value-exact", "requantized", "unknown")
    worst, formats, encoders = "bit-exact", [], set()
    for oid in object_ids:
        formats.append(art.object(oid).format)
        entry = prov.get(oid) if isinstance(prov, dict) else None
        label = entry.get("exactness") if isinstance(entry, dict) else None
        label = label if label in order else "unknown"
        if order.index(label) > order.index(worst):
            worst = label
        if isinstance(entry, dict) and isinstance(entry.get("encoder"), str):
            encoders.add(entry["encoder"])
    return worst, tuple(dict.fromkeys(formats)), ",".join(sorted(encoders)) or "absmax"


@dataclass(frozen=True)
class Target:
    """One parameter to compare: its logical ``name``, ``shape`` and ``component``, and ``source()`` giving its
    expected values (:class:`~converters.acceptance.gates.decode.SourceRows`)."""

    name: str
    shape: tuple[int, ...]
    component: str
    source: Callable[[], SourceRows]


def bound_targets(model, params) -> list[Target]:
    """:class:`Target` of each bound parameter of ``model`` in ``params``."""
    return [Target(p.name, tuple(p.shape), p.component, partial(SourceRows, model.sources, p, model.bound))
            for p in params]


def check_parameters(art, targets, geometries: Mapping[str, object] | None = None,
                     progress: Callable[[int, int], None] | None = None) -> ValuesResult:
    """Gates 4 and 5 over ``targets``; ``geometries``: component → head geometry for the head slices
    (:func:`converters.acceptance.gates.contract.head_geometry`; a component without one gets row probes only);
    ``progress(done, total)`` before each target."""
    out = ValuesResult()
    for i, t in enumerate(targets):
        if progress is not None:
            progress(i, len(targets))
        if t.name not in art.bindings:
            continue  # coverage (gate 2) reports it
        try:
            a = ArtifactRows(art, t.name, t.shape)
            s = t.source()
            if (a.n_rows, a.k) != (s.n_rows, s.k):
                continue  # coverage reports the element count
            _check_one(art, t.name, a, s, (geometries or {}).get(t.component), out)
        except (NinferError, ConverterError, ValueError) as exc:
            msg = getattr(exc, "message", None) or str(exc)
            out.values.append(finding("VERIFY_PARAMETER_UNREADABLE", f"{t.name}: {msg}", path=t.name))
    return out


def _check_one(art, name: str, a: ArtifactRows, s: SourceRows, spec, out: ValuesResult) -> None:
    exactness, formats, encoder = object_facts(art, a.objects)
    if exactness == "bit-exact" and same_bytes(art, a, s):  # equal bytes of one block type: equal values, rows
        out.checked.append(ParameterCheck(name, exactness, formats, 1.0, 0.0, 0.0, 0.0, True, True))
        return
    exact = exactness in EXACT_LABELS
    tol = tolerance.EXACT if exact else tolerance.loosest(formats)
    head_slices = heads(name, spec) if spec is not None else None
    rule = library_rule(art, a.objects) if exact else None
    st = Stats(rule=rule)
    if head_slices is not None:
        g, w = _side_by_side(a, s, 0, a.n_rows)
        st.add(g, w)
    else:
        for r0, r1 in row_blocks(a.n_rows, a.k):
            st.add(*_side_by_side(a, s, r0, r1))
    ok_values = _judge_values(name, st, exact, exactness, tol, encoder, formats, out)
    ok_order = True
    limit = rule.row_limit if rule is not None else None
    row_issues = _row_probe(name, st, tol, exact, limit)
    if head_slices is not None:
        axis, slices = head_slices
        shape = (a.n_rows, a.k)
        if rule is not None:
            g = rule.rounded(g)
        head_issues = _head_probe(name, g.reshape(shape), w.reshape(shape), axis, slices, tol, exact, limit)
        if head_issues:
            row_issues = head_issues  # the rows of a misplaced head are its symptom, not a second finding
    if row_issues:
        ok_order = False
        out.order += row_issues
    rows = st.rows()
    worst_row = float(np.max(rows[0])) if rows is not None and rows[0].size else None
    out.checked.append(ParameterCheck(name, exactness, formats, st.cosine, st.max_abs, st.max_rel, worst_row,
                                      ok_values, ok_order, rule))


def same_bytes(art, a: ArtifactRows, s: SourceRows, chunk: int = 64 << 20) -> bool:
    """Whether binding ``a`` is one whole ``gguf_<type>`` object whose bytes are the source tensor's own bytes
    (type ``<type>``, a chain that moves no row or column and changes no value, no rotation, no auxiliary):
    then every value and every row is the source's, and decoding both sides would only confirm it
    (docs/acceptance.md §Golden at scale). Compared by ``chunk`` bytes; any difference, or any other case,
    is ``False``, and the parameter is decoded and compared value by value as usual."""
    from converters.sources.hadamard import read_rotation
    from converters.sources.rows import TensorRows

    if len(a.segments) != 1 or a.columns is not None or a.signs is not None or s.ids is not None:
        return False
    obj, begin, end = a.segments[0]
    t, chain = s.tensor, s.chain
    if (begin != 0 or end != obj.elements or not isinstance(t, TensorRows) or chain.columns is not None
            or chain.values or tuple(chain.shape) != tuple(chain.source_shape)
            or not _whole_in_order(chain.row_ids(0, chain.n_rows), chain.n_rows)):
        return False
    st = t.storage
    if st.ggml_type is None or st.row_bytes is None or obj.format != f"gguf_{st.ggml_type.lower()}":
        return False
    rot = read_rotation(s.file)
    if rot is not None and rot.mode(s.source) is not None:
        return False
    mine = art.object_bytes(obj.id)
    try:
        theirs = np.asarray(t.raw(slice(0, st.rows))).reshape(-1)
        view = np.frombuffer(mine, dtype=np.uint8)
        equal = view.size == theirs.size and all(np.array_equal(view[i:i + chunk], theirs[i:i + chunk])
                                                 for i in range(0, theirs.size, chunk))
        del view  # the buffer is released below
        return equal
    finally:
        mine.release()


def _whole_in_order(ids, n: int) -> bool:
    """Whether a chain's source rows ``ids`` are rows ``0..n`` in order (a slice; an index array is not)."""
    return isinstance(ids, slice) and (ids.start, ids.stop) == (0, n)


def _side_by_side(a: ArtifactRows, s: SourceRows, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``[r0, r1)`` of the artifact and of the source, the source's decoded on a second thread meanwhile
    (both decoders release the GIL: on two cores a block takes about the time of one side)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="values-source") as pool:
        want = pool.submit(s.rows, r0, r1)
        got = a.rows(r0, r1)
        return got, want.result()


def _judge_values(name, st: Stats, exact: bool, exactness: str, tol, encoder: str, formats, out) -> bool:
    if exact:
        if st.differing:
            rule = st.rule
            how = (f"differ from the library's {rule.dtype} values by more than the recorded {rule.max_ulp} ulp"
                   if rule is not None else "differ from the source")
            out.values.append(finding(
                "VERIFY_VALUE_NOT_EXACT", f"{name}: provenance says {exactness}, but {st.differing} of {st.elements} "
                f"elements {how} (first at flat index {st.first_diff}; max abs error "
                f"{st.max_abs:.6g}, cosine {st.cosine:.6f})", path=name,
                detail={"differing": st.differing, "first_index": st.first_diff, "max_abs": st.max_abs,
                        **({"library_dtype": rule.dtype, "max_ulp": rule.max_ulp} if rule is not None else {})}))
            return False
        return True
    bad = []
    if st.cosine < tol.cosine:
        bad.append(f"cosine {st.cosine:.6f} < {tol.cosine}")
    if "mse" not in encoder and st.max_rel > tol.max_rel:
        bad.append(f"max error {st.max_rel:.4g} of max |value| > {tol.max_rel}")
    if bad:
        out.values.append(finding(
            "VERIFY_VALUE_TOLERANCE", f"{name} ({'/'.join(formats)}, {exactness}): {'; '.join(bad)}", path=name,
            detail={"cosine": st.cosine, "max_abs": st.max_abs, "max_rel": st.max_rel, "tolerance": vars(tol)}))
        return False
    return True


def _row_probe(name: str, st: Stats, tol, exact: bool, limit: float | None = None) -> list[Finding]:
    """``limit``: the per-row bound when not the class's (a library rule's, :mod:`.library_rule`)."""
    rows = st.rows()
    if rows is None:
        return []
    err, dev = rows
    limit = limit if limit is not None else (1e-7 if exact else tol.row_rel)
    bad = err > limit
    if not bad.any():
        return []
    issues = []
    norm_bad = bad & (dev > limit)
    order_bad = bad & ~norm_bad
    for mask, code, what in ((order_bad, "VERIFY_ROW_ORDER", "keep their norm but not their direction "
                              "(rows from elsewhere)"),
                             (norm_bad, "VERIFY_ROW_NORM", "have a different norm (scale or shift)")):
        idx = np.flatnonzero(mask)
        if idx.size:
            shown = ", ".join(str(int(i)) for i in idx[:SHOWN]) + (" …" if idx.size > SHOWN else "")
            issues.append(finding(code, f"{name}: {idx.size} of {err.size} rows differ from the source rows of the same "
                                f"index beyond {limit:g} relative and {what}: rows {shown} (worst "
                                f"{float(np.max(err[idx])):.3g})", path=name,
                                detail={"rows": [int(i) for i in idx[:50]], "count": int(idx.size)}))
    return issues


def _head_probe(name: str, g: np.ndarray, w: np.ndarray, axis: int, slices, tol, exact: bool,
                limit: float | None = None) -> list[Finding]:
    """Heads outside tolerance whose nearest source head (relative L2) is another head, or that are so far from
    their own (``foreign``) that they match no head of this parameter."""
    limit = limit if limit is not None else (1e-7 if exact else tol.row_rel)
    foreign = min(1.2, max(0.5, 1.5 * limit))  # ≈ √2 for an unrelated head; far beyond every format's noise
    by_size: dict[int, list[int]] = {}
    for i, (s, e) in enumerate(slices):
        by_size.setdefault(e - s, []).append(i)
    moved = []
    for members in by_size.values():
        def flat(x, i):
            s, e = slices[i]
            return (x[s:e] if axis == 0 else x[:, s:e]).astype(np.float64).reshape(-1)

        own_rel = {}
        for i in members:  # each head against its own first: only a head outside the limit is matched against all
            gi, wi = flat(g, i), flat(w, i)
            d_own, w_own = float(np.linalg.norm(gi - wi)), float(np.linalg.norm(wi))
            own_rel[i] = d_own / w_own if w_own > 0 else (np.inf if d_own > 0 else 0.0)
        if all(r <= limit for r in own_rel.values()):
            continue
        G = np.stack([flat(g, i) for i in members])
        W = np.stack([flat(w, i) for i in members])
        gg, ww = np.sum(G * G, axis=1), np.sum(W * W, axis=1)
        d = np.sqrt(np.maximum(gg[:, None] + ww[None, :] - 2 * G @ W.T, 0.0))
        wn = np.sqrt(ww)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(wn[None, :] > 0, d / wn[None, :], np.where(d > 0, np.inf, 0.0))
        for row, i in enumerate(members):
            if own_rel[i] <= limit:
                continue
            own = float(rel[row, row])
            best = int(np.argmin(rel[row]))
            if best != row and rel[row, best] < own and rel[row, best] <= foreign:
                moved.append((i, members[best], own, float(rel[row, best])))
            elif own > foreign:
                moved.append((i, None, own, own))
    if not moved:
        return []
    shown = "; ".join(f"head {i} matches source head {j} ({dj:.3g}) better than its own ({di:.3g})" if j is not None
                      else f"head {i} matches no source head of this parameter ({di:.3g} from its own: taken from "
                      "another parameter, or interleaved)" for i, j, di, dj in moved[:SHOWN])
    more = f" … and {len(moved) - SHOWN} more" if len(moved) > SHOWN else ""
    where = "rows" if axis == 0 else "columns"
    return [finding("VERIFY_HEAD_ORDER", f"{name}: {len(moved)} of {len(slices)} head slices ({where}) are out of "
                  f"order: {shown}{more}", path=name,
                  detail={"moved": [{"head": i, "matches": j} for i, j, _, _ in moved]})]
