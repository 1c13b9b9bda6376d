"""``verify`` gate 7, golden numerics: the numpy reference forward (:mod:`converters.acceptance.golden`) over a few tokens,
once on the source's weights (after the mapped transforms) and once on the artifact's decoded bindings,
each with its own text config; logits compared by top-1 agreement, cosine and max absolute error.

The forward runs in float32 with the project's own decoders, through every layer up to
:data:`FULL_FORWARD_ELEMENTS` text parameters (or with ``--sweep``), else through the stated subset of
:func:`golden_layers` (docs/acceptance.md §Golden at scale). Parameters are materialised one at a time (:class:`~converters.acceptance.gates.decode.LazyParameters`), the embedding
and head only for the rows the tokens and head blocks need, so memory stays near one layer's weights.

Thresholds depend on the artifact's precision class — the coarsest format among the objects bound to the
text parameters, exact objects not counting (but an object kept from a prequantized source whose library
rounds to bf16 or is within ``max_ulp`` counts as 16-bit, docs/acceptance.md §Prequantized sources); a format's class follows from its codec's tolerance class
(:data:`TOLERANCE_CLASS_PRECISION`; docs/thresholds.md §Golden):

=================  ==========  =====  ======================================================================
class              min cosine  top-1  measured on the tiny Qwen3.5 (these 16 tokens; random weights amplify
                                      quantization noise far beyond a real checkpoint's)
=================  ==========  =====  ======================================================================
exact              1 - 1e-9    1.0    bit/value-exact artifacts reproduce the source's logits exactly
16-bit (bf16)      0.9995      0.75   bf16 of a Q8_0 source: 0.99992 / 1.0; one swapped query head: 0.9970
8-bit (q8, fp8)    0.95        0.5    fp8-row: 0.9815-0.9828 / 0.69-0.75 (golden author: Q8_0 vs float 0.9993)
6-bit, 5-bit       0.85        0.25   between the 8-bit and 4-bit classes
4-bit and below    0.75        0.25   groupwise-int (q4): 0.846-0.848 / 0.5-0.56; nvfp4: 0.868-0.873 / 0.5-0.63
=================  ==========  =====  ======================================================================

On tiny random models the low classes are a coarse net (a swapped head moves the logits less than q4 noise
does); the order probes of gate 5 are the sharp check there. Real checkpoints sit far above these floors.
Mixture-of-experts models route each token through its top-k experts (:func:`converters.acceptance.golden.sparse_moe`);
on the tiny Qwen3-MoE / Qwen3.5-MoE / Qwen3-Next (Q8_0 GGUFs) bf16 gives 0.99997-0.99999 / 1.0 and
groupwise-int 0.918-0.988 / 0.31-0.69 (q4 noise flips near-tied routing), while two routed experts swapped
in one layer give 0.961-0.971: caught in the exact and 16-bit classes, left to gate 5 in the 4-bit class.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.decode import ArtifactRows, LazyParameters, SourceRows
from converters.acceptance.gates.library_rule import library_rule
from converters.acceptance.gates.values import EXACT_LABELS, object_facts
from converters.acceptance.golden import TextSpec, compare_logits, forward, parameter_shapes
from converters.acceptance.report import Finding
from converters.errors import ConverterError
from ninfer_core import codecs

N_TOKENS = 16
DTYPE = np.float32  # the forward's arithmetic; the logits are compared in float64 (docs/acceptance.md §Golden at scale)
#: text parameters (elements) up to which gate 7 runs every layer without --sweep (docs/acceptance.md §Golden at scale)
FULL_FORWARD_ELEMENTS = 4_000_000_000
EDGE_LAYERS = 2  # a truncated forward's first and last layers
TOKEN_SEED = 20260407
ROW_VIEWS = ("text/token_embedding", "text/output_head")


@dataclass(frozen=True)
class Threshold:
    precision: str
    cosine: float
    top1: float


CLASSES = {
    "exact": Threshold("exact", 1 - 1e-9, 1.0),
    "16-bit": Threshold("16-bit", 0.9995, 0.75),
    "8-bit": Threshold("8-bit", 0.95, 0.5),
    "6-bit": Threshold("6-bit", 0.85, 0.25),
    "4-bit": Threshold("4-bit", 0.75, 0.25),
}
ORDER = ("exact", "16-bit", "8-bit", "6-bit", "4-bit")
#: a codec's tolerance class (docs/format/codec-traits.md) -> precision class; any other class is 4-bit
TOLERANCE_CLASS_PRECISION = {"fp32": "16-bit", "bf16": "16-bit", "int8": "8-bit", "fp8-e4m3": "8-bit",
                             "int6": "6-bit", "int5": "6-bit"}


def format_precision(fmt: str) -> str:
    """The precision class of a re-quantised object of format ``fmt`` (an unknown format: ``4-bit``)."""
    codec = codecs.FORMATS.get(fmt)
    return TOLERANCE_CLASS_PRECISION.get(codec.tolerance_class, "4-bit") if codec is not None else "4-bit"


#: format -> precision class, for the registered formats above 4-bit (the list of docs/thresholds.md §Golden)
FORMAT_CLASS = {f: c for f in codecs.FORMATS if (c := format_precision(f)) != "4-bit"}


def golden_tokens(vocab_size: int, n: int = N_TOKENS) -> np.ndarray:
    """A fixed token sequence (seeded), the same for every run of every artifact of one vocabulary size."""
    return np.random.default_rng(TOKEN_SEED).integers(0, vocab_size, size=min(n, vocab_size))


def precision_class(art, names) -> Threshold:
    """The coarsest class of the objects bound to ``names`` (exact objects do not count)."""
    worst = "exact"
    for name in names:
        b = art.bindings.get(name)
        if b is None:
            continue
        exactness, formats, _ = object_facts(art, b.object_ids)
        if exactness in EXACT_LABELS:
            rule = library_rule(art, b.object_ids)  # kept from a prequantized source: its library's rounding
            if rule is not None and (rule.dtype != "float32" or rule.max_ulp) and ORDER.index(worst) < 1:
                worst = "16-bit"
            continue
        for f in formats:
            c = format_precision(f)
            if ORDER.index(c) > ORDER.index(worst):
                worst = c
    return CLASSES[worst]


def golden_layers(spec: TextSpec, shapes, sweep: bool) -> tuple[list[int], bool]:
    """The decoder layers gate 7 runs, and whether that is a truncated forward (docs/acceptance.md §Golden at
    scale): every layer with ``sweep`` or when the text parameters number at most :data:`FULL_FORWARD_ELEMENTS`;
    else the first and last :data:`EDGE_LAYERS` layers and the first layer of every kind (mixer, dense or
    sparse feed-forward) not among them, in order."""
    n = len(spec.layer_types)
    elements = sum(math.prod(shape) for shape in shapes.values())
    if sweep or elements <= FULL_FORWARD_ELEMENTS or n <= 2 * EDGE_LAYERS:
        return list(range(n)), False
    chosen = set(range(EDGE_LAYERS)) | set(range(n - EDGE_LAYERS, n))
    first: dict[tuple[str, bool], int] = {}
    for layer, kind in enumerate(spec.layer_types):
        first.setdefault((kind, spec.sparse(layer)), layer)
    return sorted(chosen | set(first.values())), True


def describe_layers(layers: list[int], n_layers: int) -> str:
    """``every layer (28)`` or ``8 of 28 layers: 0-3, 24-27``."""
    if len(layers) == n_layers:
        return f"every layer ({n_layers})"
    runs, start = [], layers[0]
    for a, b in zip(layers, [*layers[1:], None], strict=True):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return f"{len(layers)} of {n_layers} layers: {', '.join(runs)}"


def _both_forwards(source, artifact, tokens, layers: list[int], progress) -> tuple[np.ndarray, np.ndarray]:
    """The source's and the artifact's logits (each ``(config, parameters)``), computed side by side on two
    threads: they share nothing but the tokens, and their decoders and matrix products release the GIL, so
    on two cores the pair takes about the time of one (docs/acceptance.md §Golden at scale). ``progress(done,
    total)`` counts the steps of both (each: every layer, then the head)."""
    total, done, lock = 2 * (len(layers) + 1), [0], threading.Lock()

    def tick(_n: int) -> None:
        with lock:
            done[0] += 1
            if progress is not None:
                progress(done[0], total)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="golden") as pool:
        runs = [pool.submit(forward, config, params, tokens, dtype=DTYPE, layers=layers, progress=tick)
                for config, params in (source, artifact)]
        return runs[0].result(), runs[1].result()


def check_golden(art, model, art_config, *, sweep: bool = False, progress=None) -> tuple[list[Finding], dict]:
    """Gate 7 on the text component; (issues, evidence). ``progress(done, total)`` after each forward step."""
    try:
        spec_src, spec_art = TextSpec.from_config(model.config), TextSpec.from_config(art_config)
    except ConverterError as exc:
        return [finding("VERIFY_GOLDEN_UNAVAILABLE", f"golden forward not run: {exc.message} ({exc.json_path})")], {}
    shapes_src, shapes_art = parameter_shapes(spec_src), parameter_shapes(spec_art)
    bound = model.bound
    names = {p.name for p in bound.parameters}
    missing = sorted(n for n in shapes_src if n not in names and n != "text/output_head")
    if missing:
        return [finding("VERIFY_GOLDEN_UNAVAILABLE", f"golden forward not run: the source's mapping does not bind "
                      f"{missing[0]} (and {len(missing) - 1} more)")], {}
    for spec, shapes in ((spec_src, shapes_src), (spec_art, shapes_art)):
        if spec.tie_word_embeddings:  # name the head explicitly: golden would otherwise copy the whole mapping
            shapes["text/output_head"] = shapes["text/token_embedding"]

    def source_rows(name: str) -> SourceRows:
        p = bound.parameter(name if name in names else "text/token_embedding")
        return SourceRows(model.sources, p, bound)

    def artifact_rows(name: str) -> ArtifactRows:
        return ArtifactRows(art, name if name in art.bindings else "text/token_embedding", shapes_art[name])

    src = LazyParameters(shapes_src, source_rows, ROW_VIEWS)
    got = LazyParameters(shapes_art, artifact_rows, ROW_VIEWS)
    tokens = golden_tokens(spec_src.vocab_size)
    layers, truncated = golden_layers(spec_src, shapes_src, sweep)
    reference, candidate = _both_forwards((model.config, src), (art_config, got), tokens, layers, progress)
    metrics = compare_logits(reference, candidate)
    th = precision_class(art, shapes_art)
    evidence = {"tokens": [int(t) for t in tokens], "layers": layers, "truncated": truncated,
                "layers_run": describe_layers(layers, len(spec_src.layer_types)), "dtype": np.dtype(DTYPE).name,
                "precision_class": th.precision,
                "thresholds": {"cosine": th.cosine, "top1_agreement": th.top1},
                **{k: float(f"{v:.9g}") for k, v in metrics.items()}}
    bad = []
    if metrics["cosine"] < th.cosine:
        bad.append(f"logits cosine {metrics['cosine']:.6f} < {th.cosine}")
    if metrics["top1_agreement"] < th.top1:
        bad.append(f"top-1 agreement {metrics['top1_agreement']:.3f} < {th.top1}")
    issues = []
    if bad:
        issues.append(finding("VERIFY_GOLDEN_LOGITS", f"{len(tokens)} tokens, {th.precision} artifact: {'; '.join(bad)} "
                            f"(max abs error {metrics['max_abs_error']:.4g})", detail=evidence))
    return issues, evidence
