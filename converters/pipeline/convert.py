"""``convert gguf2ninfer`` / ``convert st2ninfer`` as a library function: :func:`convert`.

Order of work (each step can fail before the next writes anything):

1. refuse an existing output (never overwritten) and load + validate the recipe — before the input is
   read (style: "check flag combinations and refuse existing outputs before reading input");
2. open the source, normalise the config, bind the mappings (every tensor accounted for);
3. plan every object from codec geometry (``plan.py``); apply the template (``template.py``); label each
   object's exactness (``exactness.py``: small float re-encodings probed);
4. ``dry_run``: return the plan, write nothing;
5. write: declare the objects, plan the files (the measured errors' JSON space reserved, so the layout
   never depends on measured values: :mod:`converters.scaleout.reservation`), produce every object on a
   worker pool at its planned offset (``ArtifactWriter.write_object`` from any thread), each requantized
   object's error measured as it is written — every object encoded once (docs/imatrix.md
   §Requantization speed) — then put the measured provenance in and commit (crash-safe, publish last).

Reproducible output: with ``artifact_id`` or ``artifact_id_from_content`` the same inputs give
byte-identical files for any ``workers``; :mod:`converters.scaleout` splits the same conversion into
plan → encode → seal across processes or machines with identical output.

Memory: workers × (one row block + the later planes of one object); inputs are mapped per row block
(``rows.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from converters import __version__
from converters.errors import ConversionError
from converters.mapping.recipes import Recipe, load_recipe
from converters.model.engine import Model, open_model
from converters.pipeline.exactness import FLOAT_SOURCES, counts, predict
from converters.pipeline.expert_bank import bank_shares
from converters.pipeline.importance import plan_importance
from converters.pipeline.plan import make_plan
from converters.pipeline.planned import Plan, PlannedLiteral, PlannedResource, PlannedTensor, needs_measure
from converters.pipeline.prequantized import object_record
from converters.pipeline.produce import BlockErrors, ErrorStats, Producer
from converters.pipeline.proposal import ProposalRequest
from converters.pipeline.proposal import prepare as prepare_proposal
from converters.pipeline.template import BorrowedObject, apply_template, prefix
from converters.sources.fileio import is_directory, lexists, resolved
from converters.sources.frontend import TEXT_ROLES
from converters.sources.hadamard import read_rotation
from converters.sources.imatrix import read_imatrix
from converters.sources.kind import wrong_kind
from converters.sources.ternary import prove_objects
from ninfer_core import ArtifactWriter, cleanup_temporaries, open_artifact
from ninfer_core.container.filecopy import FileRange
from ninfer_core.container.object_data import Placed
from ninfer_core.errors import ArtifactExistsError

log = logging.getLogger(__name__)

DEFAULT_RECIPE = "groupwise-int"
#: the command that converts each source kind (``expect_kind``).
CONVERT_COMMAND = {"gguf": "gguf2ninfer", "hf": "st2ninfer"}
#: an expert bank at least this large is written by several workers at once, in shares of experts
SHARE_BYTES = 64 * 1024 * 1024


@dataclass
class Result:
    """What a conversion did (or, with ``dry_run``, would do)."""

    output: Path
    plan: Plan
    objects: list
    dry_run: bool
    errors: dict[str, ErrorStats] = field(default_factory=dict)
    proofs: dict[str, list[dict]] = field(default_factory=dict)  # ternary transcodes checked (ternary.py)
    artifact_id: str | None = None
    files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    write_seconds: float = 0.0  # the writing step alone (what the progress bar's rate measures)

    def object_rows(self) -> list[dict]:
        rows = []
        for o in self.objects:
            borrowed = isinstance(o, BorrowedObject)
            row = {"id": o.id, "kind": o.kind, "bytes": o.bytes, "origin": "borrowed" if borrowed else "produced",
                   "exactness": o.exactness}
            if o.kind == "tensor":
                row.update(shape=list(o.shape), format=o.format, layout=o.layout)
            if isinstance(o, PlannedTensor):
                if o.rule:
                    row["format_rule"] = o.rule
                row["method"] = sorted({p.method for p in o.pieces})
                row["sources"] = o.sources
                if quant := object_record(o.pieces):  # a prequantized source (docs/prequantized.md)
                    row["source_quantization"] = quant["source_quantization"]
                    if "max_ulp" in quant:
                        row["max_ulp"] = quant["max_ulp"]
                if o.notes:
                    row["notes"] = list(o.notes)
            if o.id in self.errors:
                row["error"] = self.errors[o.id].to_json()
            rows.append(row)
        return rows

    def summary(self) -> dict:
        rows = self.object_rows()
        produced = [r for r in rows if r["origin"] == "produced"]
        borrowed = [r for r in rows if r["origin"] == "borrowed"]
        by_prefix: dict[str, dict] = {}
        for r in borrowed:
            e = by_prefix.setdefault(prefix(r["id"]), {"objects": 0, "bytes": 0})
            e["objects"] += 1
            e["bytes"] += r["bytes"]
        produced_by_prefix: dict[str, dict] = {}  # docs/ternary.md §6: produced and borrowed bytes, by prefix
        for r in produced:
            e = produced_by_prefix.setdefault(prefix(r["id"]), {"objects": 0, "bytes": 0})
            e["objects"] += 1
            e["bytes"] += r["bytes"]
        total = sum(r["bytes"] for r in rows)
        out = {
            "output": str(self.output), "dry_run": self.dry_run, "recipe": self.plan.recipe.name,
            "architecture": self.plan.bound.architecture, "source_kind": self.plan.bound.source_kind,
            "objects": len(rows), "total_bytes": total,
            "produced": {"objects": len(produced), "bytes": sum(r["bytes"] for r in produced),
                         "by_prefix": produced_by_prefix},
            "borrowed": {"objects": len(borrowed), "bytes": sum(r["bytes"] for r in borrowed), "by_prefix": by_prefix},
            "exactness": counts(r["exactness"] for r in produced if r["kind"] == "tensor"),
            "only_layer": self.plan.only_layer, "notes": list(self.plan.notes),
        }
        quant = [r for r in produced if "source_quantization" in r]
        if quant:  # objects read from a prequantized source (docs/prequantized.md)
            kinds = {q["kind"] for r in quant for q in (r["source_quantization"] if isinstance(r["source_quantization"], list)
                                                        else [r["source_quantization"]])}
            out["prequantized"] = {"objects": len(quant), "kinds": sorted(kinds),
                                   "exactness": counts(r["exactness"] for r in quant),
                                   "max_ulp": max((r["max_ulp"] for r in quant if "max_ulp" in r), default=None)}
        if self.plan.importance is not None:
            imp = self.plan.importance.to_json()
            out["importance"] = {k: imp[k] for k in ("file", "sha256", "objects_weighted", "objects_unweighted")}
            out["importance"]["missing"] = len(imp["missing"])
        if not self.dry_run:
            out.update(artifact_id=self.artifact_id, files=self.files, seconds=round(self.seconds, 3),
                       bytes_per_second=round(total / self.seconds) if self.seconds > 0 else None,
                       write_seconds=round(self.write_seconds, 3),
                       write_bytes_per_second=round(total / self.write_seconds) if self.write_seconds > 0 else None)
        if self.proofs:
            pieces = [r for rs in self.proofs.values() for r in rs]
            out["exactness_check"] = {"objects": len(self.proofs), "pieces": len(pieces),
                                      "elements": sum(r["elements"] for r in pieces),
                                      "codes_and_multipliers_equal": all(r["codes_equal"] and r["multipliers_equal"]
                                                                         for r in pieces)}
        worst = [(k, v) for k, v in self.errors.items() if not v.exact]
        if worst:
            k, v = min(worst, key=lambda kv: kv[1].cosine)
            out["worst_cosine"] = {"object": k, **v.to_json()}
        if requant := self.requantized_quantized(rows):
            out["requantized_quantized_source"] = requant
        return out

    def requantized_quantized(self, rows: list[dict]) -> dict | None:
        """The requantized objects whose source is already quantized (docs/recipes.md §Requantizing a quantized
        source): their count, the source types and the worst measured cosine (``None`` before writing)."""
        types = {o.id: {p.source_type for p in o.pieces} - FLOAT_SOURCES for o in self.objects
                 if isinstance(o, PlannedTensor)}
        hit = [r["id"] for r in rows if r["origin"] == "produced" and r["exactness"] == "requantized" and types.get(r["id"])]
        if not hit:
            return None
        measured = [(self.errors[i].cosine, i) for i in hit if i in self.errors]
        worst = min(measured) if measured else None
        return {"objects": len(hit), "source_types": sorted({t for i in hit for t in types[i]}),
                "worst_cosine": round(worst[0], 6) if worst else None, "worst_object": worst[1] if worst else None}


def check_output_free(output: Path, *, create_parent: bool = False, source=None) -> list[Path]:
    """Refuse an existing ``output``; its directory must exist, or with ``create_parent`` is created (as
    ``mkdir -p``: the commands do this, docs/cli.md §Outputs) — once ``source``, when given, is found, so a
    mistyped source leaves nothing behind and is the error reported. Returns the directories it created,
    deepest first (:func:`output_parent` removes them again when the command fails)."""
    if source is not None and not os.path.exists(source) and not lexists(output):
        return []
    if lexists(output):
        cleanup_temporaries(output)  # a dead writer's leftovers of the published output (docs/robustness.md)
        raise ArtifactExistsError(f"{output.name} already exists; it is never overwritten (remove it or choose "
                                  "another name)", file=str(output), section="§11.4", rule="target_exists")
    created: list[Path] = []
    if create_parent and not is_directory(output.parent):
        created = [d for d in [output.parent, *output.parent.parents] if not lexists(d)]
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConversionError(f"the output's directory cannot be created: {exc.strerror or exc}",
                                  file=str(output.parent), rule="target_path") from None
    if not is_directory(output.parent):
        raise ConversionError("the output's directory does not exist", file=str(output), rule="target_path")
    return created


@contextlib.contextmanager
def output_parent(output: Path, *, source=None) -> Iterator[None]:
    """:func:`check_output_free` creating the output's directory; when the body fails, the directories it
    created are removed again if still empty, so a refused command leaves no ``out/`` behind (docs/cli.md
    §Outputs)."""
    created = check_output_free(output, create_parent=True, source=source)
    try:
        yield
    except BaseException:
        for d in created:  # deepest first; a directory something was written into stays
            with contextlib.suppress(OSError):
                d.rmdir()
        raise


@dataclass(frozen=True)
class ConvertOptions:
    """One conversion as ``convert gguf2ninfer`` / ``st2ninfer`` asks for it: the parameters of
    :func:`convert` (``kind`` is its ``expect_kind``) plus where it runs. ``plan_only`` (stage the files
    and write this plan file) or ``backend="dask"`` (encode on a Dask cluster at ``scheduler``) make it a
    staged conversion (:mod:`converters.scaleout.run`); the default runs here, on ``workers`` threads."""

    source: Path
    output: Path
    kind: str | None = None
    recipe: str | Path | None = None
    template: Path | None = None
    max_file_bytes: int | None = None
    only_layer: int | None = None
    dry_run: bool = False
    components: tuple[str, ...] = ("text",)
    inputs: dict | None = None
    workers: int | None = None
    proposal: ProposalRequest | None = None
    artifact_id: str | None = None
    artifact_id_from_content: bool = False
    plan_only: Path | None = None
    backend: str = "local"
    scheduler: str | None = None
    format_overrides: tuple = ()  # converters.mapping.overrides.FormatOverride (staged too: in the plan file)
    imatrix: Path | None = None  # llama.cpp importance file (docs/imatrix.md; not staged either)

    def __post_init__(self) -> None:
        if self.imatrix is not None and self.staged:
            raise ConversionError("importance weights (--imatrix) are not carried by a staged conversion's plan "
                                  "file; convert in one process (docs/imatrix.md §Provenance)", rule="imatrix_staged")

    @property
    def staged(self) -> bool:
        """Whether the conversion runs staged (plan → encode → seal) rather than in this process."""
        return self.plan_only is not None or self.backend == "dask"

    def resolved(self) -> ConvertOptions:
        """These options with absolute input paths and the component selection checked
        (:func:`converters.model.components.parse_components`). Provenance records the input paths, so
        absolute ones make the output the same from any working directory, here or staged elsewhere."""
        from converters.model.components import parse_components

        inputs = {k: [resolved(p) for p in v] if isinstance(v, list) else resolved(v) if v is not None
                  else None for k, v in (self.inputs or {}).items()} or None
        return dataclasses.replace(self, source=resolved(self.source), inputs=inputs,
                                   template=resolved(self.template) if self.template is not None else None,
                                   imatrix=resolved(self.imatrix) if self.imatrix is not None else None,
                                   components=parse_components(self.components))


def convert_with(options: ConvertOptions, *, on_plan: Callable[[list], None] | None = None,
                 progress: Callable[[str, int], None] | None = None) -> Result:
    """:func:`convert` in this process with ``options`` (their staging fields are not read): the output is
    refused before the input paths are resolved or anything is read."""
    with contextlib.nullcontext() if options.dry_run else output_parent(Path(options.output), source=options.source):
        o = options.resolved()
        return convert(o.source, o.output, recipe=o.recipe, template=o.template, max_file_bytes=o.max_file_bytes,
                       only_layer=o.only_layer, dry_run=o.dry_run, components=o.components, inputs=o.inputs,
                       workers=o.workers, expect_kind=o.kind, progress=progress, on_plan=on_plan,
                       artifact_id=o.artifact_id, proposal=o.proposal,
                       artifact_id_from_content=o.artifact_id_from_content,
                       format_overrides=o.format_overrides, imatrix=o.imatrix)


def convert(source, output, *, recipe: str | Path | None = None, template: str | Path | None = None,
            max_file_bytes: int | None = None, only_layer: int | None = None, dry_run: bool = False,
            components: Iterable[str] = ("text",), inputs: dict | None = None, workers: int | None = None,
            expect_kind: str | None = None, progress: Callable[[str, int], None] | None = None,
            on_plan: Callable[[list], None] | None = None, artifact_id: bytes | str | None = None,
            proposal: ProposalRequest | None = None, artifact_id_from_content: bool = False,
            format_overrides: tuple = (), imatrix: str | Path | None = None) -> Result:
    """Convert ``source`` (GGUF file or HF directory) into the artifact ``output``.

    ``recipe``: shipped name or path (default: the template's ``metadata.identity.weights_id`` when it
    names a shipped recipe, else :data:`DEFAULT_RECIPE`). ``expect_kind``: ``gguf`` / ``hf`` — the
    command that was used (``gguf2ninfer`` / ``st2ninfer``) — checked against the detected source.
    ``components`` / ``inputs``: what is converted besides ``text`` and the extra inputs it reads
    (:func:`converters.model.engine.open_model`: ``{"mmproj": path, "drafter": [dirs]}``); a selected component
    the inputs lack fails here, before anything is written. ``proposal``: ``text.proposal`` (§9.2).
    ``on_plan(objects)`` is called once the output's objects are known; ``progress(object_id, nbytes)``
    as bytes are written (from worker threads). ``artifact_id`` (16 bytes / 32 hex) or
    ``artifact_id_from_content`` (:mod:`ninfer_core.container.contentid`) make the output reproducible:
    the same inputs give byte-identical files whatever ``workers`` is. ``imatrix``: a llama.cpp importance
    file whose weights the requantizing encoders minimise against (docs/imatrix.md)."""
    started = time.perf_counter()
    with open_conversion(source, output, recipe=recipe, template=template, only_layer=only_layer, dry_run=dry_run,
                         components=components, inputs=inputs, expect_kind=expect_kind, proposal=proposal,
                         format_overrides=format_overrides, imatrix=imatrix) as c:
        result = c.result
        predict(c.objects, c.producer)  # the one exactness label of each object, dry run included
        if on_plan is not None:
            on_plan(c.objects)
        if dry_run:
            return result
        result.proofs = prove_objects(c.objects, c.producer)
        writing = time.perf_counter()
        _write(c.model, c.plan, c.objects, c.producer, result, max_file_bytes=max_file_bytes, workers=workers,
               progress=progress, artifact_id=artifact_id, artifact_id_from_content=artifact_id_from_content)
        result.write_seconds = time.perf_counter() - writing
    result.seconds = time.perf_counter() - started
    return result


@dataclass
class Conversion:
    """An opened conversion: the model (inputs open), recipe, plan, output objects and their producer."""

    model: Model
    recipe: Recipe
    plan: Plan
    objects: list
    result: Result
    producer: Producer


@contextlib.contextmanager
def open_conversion(source, output, *, recipe: str | Path | None = None, template: str | Path | None = None,
                    only_layer: int | None = None, dry_run: bool = False, components: Iterable[str] = ("text",),
                    inputs: dict | None = None, expect_kind: str | None = None,
                    proposal: ProposalRequest | None = None, format_overrides: tuple = (),
                    imatrix: str | Path | None = None) -> Iterator[Conversion]:
    """Steps 1–3 of :func:`convert` (same parameters): refuse an existing output, load the recipe, open and
    bind the source, plan, apply the template. The model and template stay open inside the block (the
    staged conversion of :mod:`converters.scaleout` produces objects from it in other processes)."""
    output = Path(output)
    if not dry_run:
        check_output_free(output, source=source if isinstance(source, (str, os.PathLike)) else None)
    weights = read_imatrix(imatrix) if imatrix is not None else None  # a bad file is refused before the source
    tpl = open_artifact(template) if template is not None else None
    try:
        named = load_recipe(recipe) if recipe is not None else None  # a named recipe is checked before reading
        with open_model(source, components=components, inputs=inputs) as model:
            if expect_kind is not None and model.source.kind != expect_kind:
                raise wrong_kind(model.source.path, model.source.kind, (expect_kind,),
                                 command=CONVERT_COMMAND[expect_kind])
            rec = conversion_recipe(named, tpl, model.source)
            if format_overrides:  # per-tensor formats from the command line (docs/recipes.md §Overrides)
                rec = rec.with_overrides(format_overrides)
            plan = plan_conversion(model, rec, only_layer=only_layer, proposal=proposal)
            objects = apply_template(plan, tpl) if tpl is not None else list(plan.objects)
            if weights is not None:
                plan.importance = plan_importance(weights, objects, model.sources, plan.bound.architecture,
                                                  bound=plan.bound)
            yield Conversion(model, rec, plan, objects, Result(output, plan, objects, dry_run),
                             Producer(model.sources, hadamard_seed=rec.hadamard_seed, importance=plan.importance))
    finally:
        if tpl is not None:
            tpl.close()


def template_recipe(tpl) -> str:
    """The recipe a template was made with (``metadata.identity.weights_id``) if it is a shipped one, else
    :data:`DEFAULT_RECIPE`."""
    from converters.mapping.recipes import list_recipes

    name = template_kind(tpl)
    return name if name is not None and name in list_recipes() else DEFAULT_RECIPE


def template_kind(tpl) -> str | None:
    """A template's ``metadata.identity.weights_id`` (the recipe it was made with), or None."""
    ident = tpl.metadata.get("identity") if tpl is not None else None
    name = ident.get("weights_id") if isinstance(ident, dict) else None
    return name if isinstance(name, str) else None


def conversion_recipe(named: Recipe | None, tpl, source) -> Recipe:
    """The recipe of a conversion (docs/ternary.md §1): the ``named`` one (``--recipe``); else, for a ternary
    source (a ternary or binary GGML type, found by content: :func:`converters.sources.ternary.ternary_tensors`),
    the ternary recipe, which keeps every code; else the template's; else :data:`DEFAULT_RECIPE`. A ternary
    recipe packs onto a ``groupwise-int`` template only: another kind is refused before anything is written."""
    from converters.sources import ternary

    rec = named
    if rec is None:
        rec = load_recipe(ternary.RECIPE if ternary.ternary_tensors(source) else template_recipe(tpl))
    kind = template_kind(tpl)
    if rec.name in ternary.RECIPES and tpl is not None and kind != ternary.TEMPLATE_KIND:
        raise ConversionError(
            f"the template is a {kind or 'template of unknown kind (no metadata.identity.weights_id)'} artifact; "
            f"the {rec.name} recipe packs a ternary source onto a {ternary.TEMPLATE_KIND} template of the same model, "
            f"whose grouping it keeps (docs/ternary.md §1); nothing was written", file=str(tpl.path),
            json_path="$.metadata.identity.weights_id", rule="template_kind")
    return rec


def plan_conversion(model: Model, recipe: Recipe, *, only_layer: int | None = None,
                    proposal: ProposalRequest | None = None) -> Plan:
    """The plan of ``model`` under ``recipe``: the text frontend resources and config, each selected
    component's record (config, ``target``, resources) and the ``text.proposal`` when asked for.

    With ``only_layer`` the minimal artifact holds text layer ``only_layer`` only: no other component is
    declared (a component record promises its data, container §4.2) and no proposal is made."""
    fr = model.frontend()
    files = [(role, fr.files[role], fr.provenance.get(role, {})) for role in TEXT_ROLES if role in fr.files]
    resources, configs = {"text": files}, {"text": model.config}
    bound, extra = model.bound, None
    comps = list(model.component_records.values()) if only_layer is None else []
    if only_layer is not None:
        bound = dataclasses.replace(bound, parameters=tuple(p for p in bound.parameters if p.component == "text"))
    for c in comps:
        configs[c.id] = c.config
        if c.resources:
            resources[c.id] = c.resources
    if proposal is not None and only_layer is None:
        bound, extra = prepare_proposal(bound, proposal, model.config["vocab_size"])
    plan = make_plan(bound, recipe, model.sources, only_layer=only_layer, resources=resources,
                     component_configs=configs)
    for c in comps:
        if c.target is not None:
            plan.components[c.id]["target"] = c.target
    if extra is not None:
        extra.finish(plan)
    return plan


def worker_count(workers: int | None) -> int:
    """The worker threads of a conversion: ``workers``, or up to 4 (one per CPU)."""
    n = workers if workers is not None else min(4, os.cpu_count() or 1)
    if n < 1:
        raise ConversionError(f"--workers must be at least 1, got {n}", rule="workers")
    return n


def worker_pool(workers: int | None) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=worker_count(workers), thread_name_prefix="convert")


def write_shares(o, workers: int, placed: bool) -> list[tuple | None]:
    """How object ``o`` is written: ``[None]`` by one task, or an expert bank of at least
    :data:`SHARE_BYTES` in shares of consecutive experts written at once by up to ``workers`` tasks, when
    the writer takes placed chunks (docs/io-speed.md §Write path)."""
    if not placed or not getattr(o, "bank_rows", 0) or o.bytes < SHARE_BYTES or workers < 2:
        return [None]
    shares = bank_shares(o, workers)
    return shares if len(shares) > 1 else [None]


def metadata_of(model: Model, plan: Plan) -> dict:
    name = None
    if model.source.kind == "gguf":
        meta = model.source.metadata
        # a name that is not UTF-8 (docs/inspect.md §Non-canonical metadata values) gives the file name
        read = getattr(meta, "exact", meta.get)
        name = read("general.name") if "general.name" in meta else None
    if not isinstance(name, str) or not name:
        name = model.source.path.name
    return {"name": name,
            "identity": {"weights_id": plan.recipe.name, "architecture": plan.bound.architecture,
                         "components": list(plan.components)}}


def provenance_of(model: Model, plan: Plan, objects: list, result: Result) -> dict:
    fr_prov = {}
    for o in objects:
        if isinstance(o, PlannedResource):
            fr_prov[o.role] = o.provenance
    per_object = {}
    for o in objects:
        if isinstance(o, PlannedTensor):
            imp = plan.importance.object_record(o.id) if plan.importance is not None else None
            # weights make every requantizing encoder a search that may clip (docs/imatrix.md §Weighted search)
            encoder = "mse" if imp is not None and imp["used"] else o.encoder
            entry = {"pieces": [p.describe() for p in o.pieces], "encoder": encoder,
                     "exactness": o.exactness, **object_record(o.pieces)}
            if o.notes:
                entry["notes"] = list(o.notes)
            if o.id in result.errors:
                entry["measured_error"] = result.errors[o.id].to_json()
            if o.id in result.proofs:
                entry["exactness_check"] = result.proofs[o.id]
            if imp is not None:
                entry["importance"] = imp
            per_object[o.id] = entry
        elif isinstance(o, PlannedLiteral):
            per_object[o.id] = {"generated": o.note, "exactness": "bit-exact"}
        elif isinstance(o, BorrowedObject):
            per_object[o.id] = {"borrowed_from": str(o.template.path), "template_artifact_id": o.template.artifact_id,
                                "exactness": "bit-exact"}
        elif isinstance(o, PlannedResource):
            per_object[o.id] = {"resource": o.role, **o.provenance}
    return {
        "converter": {"name": "ninfer-convert", "version": __version__},
        "source": {"kind": model.source.kind, **model.source.identity(),
                   "layout_assumptions": list(getattr(model.source, "layout_assumptions", [])),
                   **({"hadamard": rot.to_json()} if (rot := read_rotation(model.source)) is not None else {})},
        "recipe": plan.recipe.to_json(),
        "mappings": [{"component": m.component, "file": Path(m.file).name, "sha256": m.sha256}
                     for m in plan.bound.mappings],
        "config": {"rules": Path(model.config_rules).name, "evidence": model.config_evidence},
        "components": {c.id: c.provenance for c in model.component_records.values()
                       if c.id in plan.components},
        "frontend": fr_prov,
        "skipped_tensors": dict(sorted(plan.bound.skipped.items())),
        "only_layer": plan.only_layer,
        **({"importance": plan.importance.to_json()} if plan.importance is not None else {}),
        "objects": per_object,
    }


def declare_writer(model: Model, plan: Plan, objects: list, result: Result, *, max_file_bytes: int | None,
                   artifact_id=None, artifact_id_from_content: bool = False) -> ArtifactWriter:
    """A writer with every object declared, planned with the measured errors' *reserved* provenance.

    The JSON space is planned for the longest error record any object could get
    (:func:`converters.scaleout.reservation.reserved`), so the directory's size — and with it every
    offset — does not depend on measured values: the in-process conversion and the staged one
    (plan → encode → seal, where errors are measured while writing) lay out identical files. The caller
    puts the real provenance in with ``replace_provenance`` once the errors are known."""
    from converters.scaleout.reservation import reserved

    components = {k: dict(v) for k, v in plan.components.items()}
    writer = ArtifactWriter(result.output, components=components, bindings=plan.bindings, uses=plan.uses,
                            metadata=metadata_of(model, plan),
                            provenance=provenance_of(model, plan, objects, reserved(result, objects)),
                            max_file_bytes=max_file_bytes, artifact_id=artifact_id,
                            artifact_id_from_content=artifact_id_from_content)
    for o in objects:
        if o.kind == "resource":
            writer.add_resource(o.id, o.bytes)
        else:
            writer.add_tensor(o.id, o.shape, o.format, o.layout, divisors=o.divisors)
    return writer


def _write(model: Model, plan: Plan, objects: list, producer: Producer, result: Result, *,
           max_file_bytes: int | None, workers: int | None, progress, artifact_id,
           artifact_id_from_content: bool = False) -> None:
    writer = declare_writer(model, plan, objects, result, max_file_bytes=max_file_bytes, artifact_id=artifact_id,
                            artifact_id_from_content=artifact_id_from_content)
    try:
        writer.plan()  # with the reserved provenance: the real one replaces it below once errors are measured,
        # and is the same when no object is measured (docs/io-speed.md §Fixed costs)

        measured: dict[tuple, ErrorStats | BlockErrors] = {}  # (object id, share index) -> errors measured

        def data(o, share, index):
            if isinstance(o, BorrowedObject):
                yield from borrowed_chunks(o)
                return
            stats = None
            if needs_measure(o):  # a share's blocks apart, merged in row order below (BlockErrors)
                stats = measured[o.id, index] = ErrorStats() if share is None else BlockErrors()
            if share is not None:  # some experts of a bank, placed (docs/io-speed.md §Write path)
                yield from producer.stream(o, stats, share=share)
            else:  # unchanged bytes as file ranges (copied in the kernel), banks placed in one pass (docs/io-speed.md)
                yield from producer.stream(o, stats, file_ranges=True, placed=placed)

        def one(o, share=None, index=0) -> None:
            for chunk in data(o, share, index):
                inner = chunk.data if isinstance(chunk, Placed) else chunk
                n = len(inner) if isinstance(inner, bytes | FileRange) else memoryview(inner).nbytes
                if progress is not None:
                    progress(o.id, n)
                yield chunk

        placed, n = not artifact_id_from_content, worker_count(workers)
        tasks = [(o, share, i, len(shares)) for o in objects for shares in [write_shares(o, n, placed)]
                 for i, share in enumerate(shares)]
        with worker_pool(workers) as pool:
            futures = [pool.submit(writer.write_object, o.id, one(o, share, i), parts=parts)
                       for o, share, i, parts in tasks]
            for f in futures:
                f.result()
        for o, _share, i, _ in tasks:  # in object and row order
            if (o.id, i) in measured:
                got = measured[o.id, i]
                if isinstance(got, BlockErrors):
                    got.merge_into(result.errors.setdefault(o.id, ErrorStats()))
                else:
                    result.errors[o.id] = got
        if measured:  # the reserved JSON space takes the errors measured while writing
            writer.replace_provenance(provenance_of(model, plan, objects, result))
        for source in model.sources.values():  # nothing is published from a source changed meanwhile
            source.verify_unchanged()
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    result.artifact_id = writer.artifact_id
    result.files = [str(result.output)] + [str(result.output.parent / n) for n in writer.plan().names[1:]]


BORROW_CHUNK = 64 * 1024 * 1024


def borrowed_chunks(o: BorrowedObject):
    rec = o.record
    for off in range(0, rec.bytes, BORROW_CHUNK):
        n = min(BORROW_CHUNK, rec.bytes - off)
        view = o.template.read_range(rec.offset + off, n)
        data = bytes(view)
        view.release()  # a view left on the template's map would keep it from closing (docs/ternary.md §6)
        yield data
