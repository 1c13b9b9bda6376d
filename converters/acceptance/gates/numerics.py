"""``verify`` gate 7, golden numerics: the numpy reference forward (:mod:`converters.acceptance.golden`) over a few
tokens, asked two questions (docs/acceptance.md §Golden: two questions; thresholds: docs/thresholds.md §Golden):

- *structure* — the artifact's forward (its decoded bindings, its config) against the source's forward under
  the source's config and storage conventions on the same values read back (:mod:`converters.acceptance.storage`):
  the same function to float rounding (:data:`STRUCTURE`), whatever the format. Checked while the artifact's
  forward reads each parameter; the source's forward runs again only when a value reads back otherwise or the
  configs differ.
- *cost* — the source's forward (its values through the mapping) against the artifact's: logits and per-layer
  hidden states, judged against the recipe's ``golden_budget`` or the precision class's default (:data:`CLASSES`;
  the class is the coarsest format among the objects bound to the text parameters, exact objects not counting,
  an object kept from a prequantized source within its library's rounding counting as 16-bit).

The forward runs in float32 with the project's own decoders, through every layer up to
:data:`FULL_FORWARD_ELEMENTS` text parameters (or with ``--sweep``), else through the stated subset of
:func:`golden_layers` (docs/acceptance.md §Golden at scale). Parameters are materialised one at a time
(:class:`~converters.acceptance.gates.decode.LazyParameters`), the embedding and head only for the rows the
tokens and head blocks need, so memory stays near one layer's weights; the two forwards run on two threads.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import numpy as np

from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.decode import ArtifactRows, LazyParameters, SourceRows
from converters.acceptance.gates.library_rule import library_rule
from converters.acceptance.gates.values import EXACT_LABELS, object_facts
from converters.acceptance.golden import MoeSpec, TextSpec, compare_logits, cosine, forward, parameter_shapes
from converters.acceptance.report import Finding
from converters.acceptance.storage import ReadBack, SourceReading, storage_name
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


#: the cost question's default budget of each precision class (a recipe states its own: ``golden_budget``)
CLASSES = {
    "exact": Threshold("exact", 1 - 1e-9, 1.0),
    "16-bit": Threshold("16-bit", 0.99, 0.75),
    "8-bit": Threshold("8-bit", 0.95, 0.5),
    "6-bit": Threshold("6-bit", 0.85, 0.25),
    "4-bit": Threshold("4-bit", 0.75, 0.25),
}
#: the structure question's floor, the same for every format: two forwards of one function on the same values
STRUCTURE = Threshold("structure", 0.99999, 1.0)
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
    """The source's and the artifact's logits (each ``(config, parameters, observe)``), computed side by side on
    two threads: they share nothing but the tokens, and their decoders and matrix products release the GIL, so
    on two cores the pair takes about the time of one (docs/acceptance.md §Golden at scale). ``progress(done,
    total)`` counts the steps of both (each: every layer, then the head)."""
    total, done, lock = 2 * (len(layers) + 1), [0], threading.Lock()

    def tick(_n: int) -> None:
        with lock:
            done[0] += 1
            if progress is not None:
                progress(done[0], total)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="golden") as pool:
        runs = [pool.submit(forward, config, params, tokens, dtype=DTYPE, layers=layers, progress=tick,
                            observe=observe) for config, params, observe in (source, artifact)]
        return runs[0].result(), runs[1].result()


def per_layer(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> list[dict]:
    """``[{layer, cosine}]``: the two forwards' hidden states after each layer both ran, compared."""
    return [{"layer": n, "cosine": float(f"{cosine(a[n], b[n]):.9g}")} for n in a if n in b]


def cost_budget(art, precision: Threshold) -> tuple[Threshold, str]:
    """The cost question's budget and where it comes from (docs/acceptance.md §Golden: two questions): the
    recipe's ``golden_budget`` as provenance records it, held to exactness when every object is exact, and
    loosened to the default of the artifact's precision class where that is coarser (an object kept from a
    prequantized source within its library's rounding); without a stated budget, or when ``--tensor-type``
    overrides changed what the recipe stores, the class default alone."""
    recipe = (art.provenance or {}).get("recipe")
    recipe = recipe if isinstance(recipe, dict) else {}
    stated = recipe.get("golden_budget")
    own = f"{precision.precision} precision class default"
    if not isinstance(stated, dict) or recipe.get("overrides") or precision.precision == "exact":
        return precision, own
    try:
        cosine, top1 = float(stated["cosine"]), float(stated["top1_agreement"])
    except (KeyError, TypeError, ValueError):
        return precision, own
    if cosine <= precision.cosine and top1 <= precision.top1:
        return Threshold(precision.precision, cosine, top1), f"recipe {recipe.get('name')}"
    return (Threshold(precision.precision, min(cosine, precision.cosine), min(top1, precision.top1)),
            f"{own}, looser than recipe {recipe.get('name')}'s")


def spec_differences(a: TextSpec, b: TextSpec) -> dict[str, list]:
    """The fields the two sides' forwards read differently (``{field: [source, artifact]}``)."""
    out = {}
    for f in fields(TextSpec):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x != y:
            out[f.name] = [repr(x) if isinstance(x, MoeSpec) else x, repr(y) if isinstance(y, MoeSpec) else y]
    return out


def check_golden(art, model, art_config, *, sweep: bool = False, progress=None) -> tuple[list[Finding], dict]:
    """Gate 7 on the text component: the structure question, then the cost question (docs/acceptance.md
    §Golden: two questions); (issues, evidence). ``progress(done, total)`` after each forward step."""
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

    def artifact() -> LazyParameters:
        return LazyParameters(shapes_art, artifact_rows, ROW_VIEWS)

    reading = SourceReading(model, spec_src, fetch=artifact().__getitem__)
    src = LazyParameters(shapes_src, source_rows, ROW_VIEWS)
    got = ReadBack(artifact(), reading, as_source=False)  # the artifact's values, each read back on the way
    tokens = golden_tokens(spec_src.vocab_size)
    layers, truncated = golden_layers(spec_src, shapes_src, sweep)
    hidden_src, hidden_art = {}, {}
    reference, candidate = _both_forwards((model.config, src, hidden_src.__setitem__),
                                          (art_config, got, hidden_art.__setitem__), tokens, layers, progress)
    issues, structure = _structure(model, spec_src, spec_art, reading, got, tokens, layers, candidate, hidden_art,
                                   artifact)
    metrics = compare_logits(reference, candidate)
    th, budget_from = cost_budget(art, precision_class(art, shapes_art))
    cost_layers = per_layer(hidden_src, hidden_art)
    evidence = {"tokens": [int(t) for t in tokens], "layers": layers, "truncated": truncated,
                "layers_run": describe_layers(layers, len(spec_src.layer_types)), "dtype": np.dtype(DTYPE).name,
                "precision_class": th.precision,
                "thresholds": {"cosine": th.cosine, "top1_agreement": th.top1}, "budget_from": budget_from,
                **{k: float(f"{v:.9g}") for k, v in metrics.items()},
                "per_layer": cost_layers, "structure": structure}
    bad = []
    if metrics["cosine"] < th.cosine:
        bad.append(f"logits cosine {metrics['cosine']:.6f} < {th.cosine}")
    if metrics["top1_agreement"] < th.top1:
        bad.append(f"top-1 agreement {metrics['top1_agreement']:.3f} < {th.top1}")
    if bad:
        worst = min(cost_layers, key=lambda r: r["cosine"], default=None)
        at = f"; worst layer {worst['layer']} (hidden cosine {worst['cosine']:.6f})" if worst else ""
        issues.append(finding("VERIFY_GOLDEN_LOGITS", f"cost: {len(tokens)} tokens, {th.precision} artifact, budget of "
                              f"the {budget_from}: {'; '.join(bad)} (max abs error {metrics['max_abs_error']:.4g}){at}",
                              detail=evidence))
    return issues, evidence


def _structure(model, spec_src, spec_art, reading, got, tokens, layers, candidate, hidden_art,
               artifact) -> tuple[list[Finding], dict]:
    """The structure question (docs/acceptance.md §Golden: two questions): the artifact's forward against the
    source's forward, under the source's config and conventions, on the artifact's values read back
    (:mod:`converters.acceptance.storage`). When every value reads back equal and the two configs give the same
    forward, that second forward is the artifact's own computation on the same inputs — identical logits — and is
    not run again; otherwise it runs, and the finding names what differs and the first layer it shows in."""
    configs = spec_differences(spec_src, spec_art)
    differing = {n: d for n, d in got.differences.items() if d > 0.0}
    evidence = {"thresholds": {"cosine": STRUCTURE.cosine, "top1_agreement": STRUCTURE.top1},
                "storage": storage_name(model), "parameters_read_back": len(got.differences),
                "max_read_back_difference": float(f"{max(got.differences.values(), default=0.0):.9g}")}
    if not configs and not differing:
        return [], {**evidence, "second_forward": False, "cosine": 1.0, "top1_agreement": 1.0, "max_abs_error": 0.0}
    hidden = {}
    try:
        logits = forward(model.config, ReadBack(artifact(), reading, as_source=True), tokens, dtype=DTYPE,
                         layers=layers, observe=hidden.__setitem__)
    except ConverterError as exc:
        metrics = {"cosine": 0.0, "top1_agreement": 0.0, "max_abs_error": math.inf}
        failed = f"the source's forward cannot read the artifact: {exc.message} ({exc.json_path})"
    else:
        metrics, failed = compare_logits(logits, candidate), None
    layer_rows = per_layer(hidden, hidden_art)
    first = next((r["layer"] for r in layer_rows if r["cosine"] < STRUCTURE.cosine), None)
    top = sorted(differing.items(), key=lambda kv: -kv[1])
    evidence |= {"second_forward": True, **{k: float(f"{v:.9g}") for k, v in metrics.items()},
                 "config_differences": configs, "first_layer": first, "per_layer": layer_rows,
                 "differing_parameters": [{"parameter": n, "difference": float(f"{d:.6g}")} for n, d in top[:10]],
                 "differing_parameter_count": len(differing)}
    if failed is None and metrics["cosine"] >= STRUCTURE.cosine and metrics["top1_agreement"] >= STRUCTURE.top1:
        return [], evidence
    what = [failed] if failed else [f"logits cosine {metrics['cosine']:.6f} (needs {STRUCTURE.cosine}), top-1 "
                                    f"{metrics['top1_agreement']:.3f} (needs {STRUCTURE.top1})"]
    if configs:
        what.append("config " + ", ".join(f"{k} {v[0]!r} (source) vs {v[1]!r} (artifact)" for k, v in configs.items()))
    if top:
        more = f" and {len(top) - 1} more" if len(top) > 1 else ""
        what.append(f"{top[0][0]} reads back {top[0][1]:.3g} away from the artifact's values{more}")
    if first is not None:
        what.append(f"first diverging layer {first}")
    path = top[0][0] if top else None
    return [finding("VERIFY_GOLDEN_STRUCTURE", f"structure: the source's conventions read the artifact as another "
                    f"function: {'; '.join(what)}", path=path, detail=evidence)], evidence
