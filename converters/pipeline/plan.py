"""Planning a conversion: every object with its format, layout, shape and encoded size, the pieces that
produce it, and the bindings and uses — before any payload byte is read.

Sizes come from codec geometry (``ninfer_core.codecs.encoded_size``), so the writer can lay out the
whole directory first and the payload can then be produced on a worker pool.

Objects:

- a *group* of the recipe (members stacked by rows in one rank-2 parent, container §7.1–§7.3) or one
  logical parameter per object; each member is a :class:`Piece`: its row range in the parent, its
  bound source and how its bytes are made — ``transcode`` (the source's raw blocks, rows reordered
  whole, converted without a float round trip: layout spec §6) or ``encode`` (decoded, transformed in
  float64, encoded once; error measured);
- auxiliary tensors the uses bind (container §8): Hadamard signs and widths, ``input_columns``
  permutations, activation divisors — :class:`PlannedLiteral`;
- frontend resources (§9.1) — :class:`PlannedResource`.
"""

from __future__ import annotations

import hashlib

import numpy as np

from converters.errors import ConversionError, RecipeError
from converters.mapping import transforms as T
from converters.mapping.binder import BoundModel, BoundParameter
from converters.mapping.overrides import FormatOverride, check_matched, first_match
from converters.mapping.recipes import EXACT, REFUSE, SOURCE, GroupSpec, Recipe, RoleSpec
from converters.pipeline import prequantized as PQ
from converters.pipeline.expert_bank import plan_bank
from converters.pipeline.planned import (
    Piece,
    Plan,
    PlannedLiteral,
    PlannedResource,
    PlannedTensor,
)
from converters.sources.hadamard import (
    FORWARD,
    INVERSE,
    SIGNS_OBJECT,
    WIDTHS_OBJECT,
    SourceRotation,
    read_rotation,
)
from converters.sources.rows import storage_of
from ninfer_core import codecs
from ninfer_core.errors import EncodingError

# --- planning --------------------------------------------------------------------------------------


def make_plan(bound: BoundModel, recipe: Recipe, sources: dict, *, only_layer: int | None = None,
              resources: dict[str, list[tuple[str, bytes, dict]]] | None = None,
              component_configs: dict[str, dict] | None = None) -> Plan:
    """Plan every object of ``bound`` under ``recipe``.

    ``only_layer``: keep layer ``only_layer``'s parameters and the auxiliaries their uses need
    (docs/ternary.md §6). ``resources``: component → ``[(role, bytes, provenance)]`` (frontend files).
    ``component_configs``: component → normalised config.
    """
    params = list(bound.parameters)
    check_matched(recipe.overrides, params)
    if only_layer is not None:
        n = len(bound.layer_kinds)
        if not 0 <= only_layer < n:
            raise ConversionError(f"--only-layer {only_layer}: the model has layers 0..{n - 1}",
                                  rule="only_layer_range")
        params = [p for p in params if p.layer == only_layer]
    planner = _Planner(bound, recipe, sources)
    for obj in planner.tensors(params):
        planner.objects.append(obj)
    planner.bind_and_use(params)
    comps: dict[str, dict] = {}
    for comp, cfg in (component_configs or {}).items():
        comps[comp] = {"config": cfg}
    for comp, files in (resources or {}).items():
        table = comps.setdefault(comp, {"config": {}}).setdefault("resources", {})
        for role, data, prov in files:
            rid = f"frontend/{role}" if comp == "text" else f"frontend/{comp}/{role}"
            planner.objects.append(PlannedResource(rid, data, role, comp, prov))
            table[role] = rid
    return Plan(planner.objects, planner.bindings, planner.uses, comps, recipe, bound, only_layer, planner.notes)


def _scope(name: str, first_segment: str) -> str | None:
    marker = f"/{first_segment}/"
    i = name.rfind(marker)
    return name[:i] if i >= 0 else None


class _Planner:
    def __init__(self, bound: BoundModel, recipe: Recipe, sources: dict) -> None:
        self.bound, self.recipe, self.sources = bound, recipe, sources
        self.objects: list = []
        self.bindings: dict[str, dict] = {}
        self.uses: list[dict] = []
        self.notes: list[str] = []
        self.placement: dict[str, tuple[str, Piece]] = {}  # parameter → (object id, piece)
        self.signs: dict[int, tuple[int, int]] = {}  # width → (offset, width) in text/hadamard_signs
        self.source_rotation: SourceRotation | None = None  # the sign table of a rotated source, once used
        self.literals: dict[str, PlannedLiteral] = {}
        self.without_input_scale = 0  # uses whose role asks for the source's input scale and that have none

    # -- objects ---------------------------------------------------------------------------------

    def tensors(self, params: list[BoundParameter]) -> list[PlannedTensor]:
        own = [p for p in params if p.source is not None and not self.role(p).same_as]
        banks: dict[str, list[BoundParameter]] = {}  # expert banks come from the mapping, not the recipe
        for p in own:
            if p.bank is not None:
                banks.setdefault(p.bank, []).append(p)
        overridden = {p.name: o for p in own if p.bank is None
                      and (o := first_match(self.recipe.overrides, p.name, p.role, p.source.tensor)) is not None}
        grouped: dict[str, tuple[GroupSpec, list[BoundParameter]]] = {}
        taken: set[str] = {p.name for members in banks.values() for p in members} | set(overridden)
        for spec in self.recipe.groups:
            first = spec.key.split("/")[0]
            buckets: dict[str, list[BoundParameter]] = {}
            for p in own:
                if p.name not in taken and p.role in spec.members:
                    scope = _scope(p.name, first)
                    if scope is not None:
                        buckets.setdefault(scope, []).append(p)
            for scope, members in buckets.items():
                if {p.role for p in members} != set(spec.members):
                    continue
                if not PQ.keeps_group(self, spec, members):
                    continue
                members.sort(key=lambda p: spec.members.index(p.role))  # stable: mapping order within a role
                taken.update(p.name for p in members)
                grouped[members[0].name] = (spec, members, f"{scope}/{spec.key}")
        out = []
        for p in own:
            if p.bank is not None:
                if p is banks[p.bank][0]:
                    out.append(plan_bank(self, p.bank, banks[p.bank]))
            elif p.name in overridden:
                out.append(self.overridden_object(p, overridden[p.name]))
            elif p.name in grouped:
                spec, members, oid = grouped[p.name]
                out.append(self.group_object(oid, spec, members))
            elif p.name not in taken:
                out.append(self.single_object(p))
        return out

    def role(self, p: BoundParameter) -> RoleSpec:
        try:
            return self.recipe.role(p.role, p.mapping.stored_like.get(p.role))
        except RecipeError as exc:
            raise RecipeError(f"{exc.message} (parameter {p.name}, {p.where})", file=exc.file, rule=exc.rule) from None

    def fit(self, oid: str, fmt: str, fallback: str | None, shape: tuple[int, ...], divisors: int,
            notes: list[str]) -> tuple[str, int]:
        """``fmt`` if the shape allows it, else the fallback (noted); raises when neither fits."""
        try:
            codecs.validate_combination(fmt, codecs.FORMATS[fmt].layout, shape, divisors)
            return fmt, divisors
        except EncodingError as exc:
            if fallback is None:
                raise ConversionError(f"{oid}: {fmt} cannot store shape {list(shape)} ({exc.message}) and the "
                                      f"recipe gives no fallback", file=self.recipe.file, rule="format_shape") from None
            codecs.validate_combination(fallback, codecs.FORMATS[fallback].layout, shape, 1)
            notes.append(f"{fmt} cannot store {list(shape)} ({exc.message}): fallback {fallback}")
            return fallback, 1

    def group_object(self, oid: str, spec: GroupSpec, members: list[BoundParameter]) -> PlannedTensor:
        ks = {p.shape[1:] for p in members}
        if any(len(p.shape) != 2 for p in members) or len(ks) != 1:
            shapes = ", ".join(f"{p.name} {list(p.shape)}" for p in members)
            raise ConversionError(f"group {oid}: members must be matrices with the same number of columns "
                                  f"({shapes})", file=self.recipe.file, rule="group_shape")
        rows = [p.shape[0] for p in members]
        shape = (sum(rows), members[0].shape[1])
        divisors = 1
        if spec.divisors == "per_member":
            if len(set(rows)) != 1:
                raise ConversionError(f"group {oid}: divisors per_member needs members with equal rows, got {rows}",
                                      file=self.recipe.file, rule="group_divisors")
            divisors = len(members)
        notes: list[str] = []
        fmt, divisors = self.fit(oid, spec.format, spec.fallback, shape, divisors, notes)
        hadamard = {self.rotation(p, self.role(p)) for p in members}
        if len(hadamard) != 1:
            raise ConversionError(f"group {oid}: members disagree on Hadamard rotation", file=self.recipe.file,
                                  rule="group_hadamard")
        rot = next(iter(hadamard))

        def make(f: str) -> list[Piece]:
            out, start = [], 0
            for p in members:
                out.append(self.piece(p, f, start, hadamard=rot))
                start += p.shape[0]
            return out

        pieces = make(fmt)
        inexact = [pc for pc in pieces if pc.method == "encode"]
        for pc in inexact if spec.when_inexact is None else ():
            self.note_unkept(next(m for m in members if m.name == pc.parameter), pc, fmt)
        if inexact and spec.when_inexact is not None:
            p = next(m for m in members if m.name == inexact[0].parameter)
            if spec.when_inexact == REFUSE:
                raise self.refusal(p, fmt, f"group {spec.key}", inexact[0].row_start)
            notes.append(f"{p.name}: {self.why_not_exact(p, fmt, inexact[0].row_start)}; when_inexact: "
                         f"{spec.when_inexact}")
            fmt, divisors = self.fit(oid, spec.when_inexact, None, shape, 1, notes)
            pieces = make(fmt)
        return self.tensor(oid, shape, fmt, divisors, pieces, spec.encoder, members, notes,
                           rule=f"recipe {self.recipe.name} group {spec.key}")

    def overridden_object(self, p: BoundParameter, override: FormatOverride) -> PlannedTensor:
        """``p`` in the format a command-line override gives (docs/recipes.md §Overrides): an object of its own;
        a source it cannot hold exactly is requantized, and the plan says why (as for a recipe's formats)."""
        spec = self.role(p)
        notes: list[str] = []
        if override.format == EXACT:
            fmt, piece = self.exact_piece(p)
            divisors = 1
        else:
            fmt, divisors = self.fit(p.name, override.format, None, p.shape, 1, notes)
            piece = self.piece(p, fmt, 0, hadamard=self.rotation(p, spec))
            if piece.method == "encode":
                notes.append(f"{self.why_not_exact(p, fmt)}: requantized into {fmt} ({override.flag})")
        return self.tensor(p.name, p.shape, fmt, divisors, [piece], spec.encoder, [p], notes, rule=override.flag)

    def single_object(self, p: BoundParameter) -> PlannedTensor:
        spec = self.role(p)
        notes: list[str] = []
        kept = PQ.keep_piece(self, p) if self.recipe.prequantized == "keep" else None
        if kept is not None:
            fmt, piece = kept
            divisors = 1
            self.fit(p.name, fmt, None, p.shape, 1, notes)
        elif spec.format == EXACT:
            fmt, piece = self.exact_piece(p)
            divisors = 1
        else:
            fmt, divisors = self.fit(p.name, spec.format, spec.fallback, p.shape, 1, notes)
            piece = self.piece(p, fmt, 0, hadamard=self.rotation(p, spec))
            if piece.method == "encode" and spec.when_inexact is None:
                self.note_unkept(p, piece, fmt)
            elif piece.method == "encode":
                if spec.when_inexact == REFUSE:
                    raise self.refusal(p, fmt, f"role {spec.pattern}")
                notes.append(f"{self.why_not_exact(p, fmt)}; when_inexact: {spec.when_inexact}")
                fmt, divisors = self.fit(p.name, spec.when_inexact, None, p.shape, 1, notes)
                piece = self.piece(p, fmt, 0, hadamard=self.rotation(p, spec))
        return self.tensor(p.name, p.shape, fmt, divisors, [piece], spec.encoder, [p], notes,
                           rule=f"recipe {self.recipe.name} role {spec.pattern}")

    def tensor(self, oid, shape, fmt, divisors, pieces, encoder, members, notes, rule: str = "") -> PlannedTensor:
        if codecs.codec_traits(fmt).whole_object:  # kept nvfp4 members carry their source divisors
            divisors, pieces = PQ.reconcile_divisors(self.sources, oid, fmt, divisors, list(pieces), notes)
        layout = codecs.FORMATS[fmt].layout
        nbytes = codecs.encoded_size(fmt, layout, shape, divisors)
        for pc in pieces:
            self.placement[pc.parameter] = (oid, pc)
        return PlannedTensor(oid, tuple(shape), fmt, layout, divisors, nbytes, tuple(pieces), encoder,
                             tuple(dict.fromkeys(p.role for p in members)), members[0].component,
                             members[0].layer, tuple(notes), rule=rule)

    def rotation(self, p: BoundParameter, spec: RoleSpec) -> int | None:
        if not spec.hadamard:
            return None
        k = p.shape[-1]
        if len(p.shape) != 2 or k % T.HADAMARD_BLOCK:
            self.notes.append(f"{p.name}: not Hadamard-rotated (input width {k} is not a multiple of "
                              f"{T.HADAMARD_BLOCK})")
            return None
        if p.input is None:
            raise ConversionError(f"{p.name}: the recipe rotates role {p.role}, but the parameter has no use to "
                                  "carry hadamard_signs", rule="hadamard_without_use")
        return k

    def piece(self, p: BoundParameter, fmt: str, row_start: int, *, hadamard: int | None) -> Piece:
        src = p.source
        qw = PQ.quantized_weight(self.sources, src)
        if qw is not None:  # a prequantized tensor: kept when fmt holds it exactly, else requantized
            if (hadamard is None and self.recipe.exact_transcoding == "prefer"
                    and PQ.why_not_kept(qw, src.chain, fmt, row_start) is None):
                return PQ.kept_piece(p, qw, fmt, row_start)
            return PQ.requantized_piece(p, qw, row_start, hadamard)
        t = self.sources[src.input].tensor(src.tensor)
        st = storage_of(t)
        kind = st.ggml_type or st.dtype
        chain = src.chain
        mode = self.source_mode(p, hadamard)
        groups = _column_groups(chain.columns, st.block, fmt, kind)
        raw_ok = (not chain.values and hadamard is None and mode != INVERSE and st.row_bytes is not None
                  and (_columns_move_whole(chain.columns, st.block) or groups is not None))
        if raw_ok and self.recipe.exact_transcoding == "prefer" and (kind, fmt) in codecs.TRANSCODES:
            label = codecs.TRANSCODES[(kind, fmt)].exactness.replace("_", "-")
            regroup = None if _columns_move_whole(chain.columns, st.block) else groups
            return Piece(p.name, row_start, _rows(p.shape), src, kind, "transcode", label, hadamard,
                         source_hadamard=mode, column_groups=regroup)
        return Piece(p.name, row_start, _rows(p.shape), src, kind, "encode", "requantized", hadamard,
                     source_hadamard=mode)

    def source_mode(self, p: BoundParameter, hadamard: int | None) -> str | None:
        """How the source stores ``p`` (:mod:`converters.sources.hadamard`): ``forward``, ``inverse`` or None.

        A rotated tensor's input columns cannot be permuted (the rotation mixes them), value transforms
        would act on rotated values, and the recipe cannot rotate it a second time: each is refused."""
        src = p.source
        rot = read_rotation(self.sources[src.input])
        mode = rot.mode(src.tensor) if rot is not None else None
        if mode is None:
            return None
        problem = None
        if hadamard is not None:
            problem = f"the recipe rotates role {p.role} as well (hadamard: true)"
        elif src.chain.columns is not None:
            problem = "the mapping permutes its input columns, which the rotation mixes"
        elif src.chain.values:
            problem = f"the mapping applies value transforms ({', '.join(src.chain.steps)}) to rotated values"
        elif mode == FORWARD and p.input is None:
            problem = "the parameter has no use to carry hadamard_signs"
        if problem:
            raise ConversionError(f"{p.name}: {src.tensor} is stored Hadamard-rotated (prism.hadamard.{'weight_names' if mode == FORWARD else 'inverse_weight_names'}), "
                                  f"but {problem}", file=rot.file, rule="hadamard_source")
        if mode == FORWARD:
            if self.source_rotation is not None and self.source_rotation is not rot:
                raise ConversionError(f"{p.name}: two inputs carry their own Hadamard sign tables; one "
                                      f"{SIGNS_OBJECT} cannot hold both", file=rot.file, rule="hadamard_source")
            self.source_rotation = rot
        return mode

    def note_unkept(self, p: BoundParameter, piece: Piece, fmt: str) -> None:
        """A plan note for a prequantized piece requantized although ``fmt`` is one of its exact targets: the
        piece's rows or place do not fit the format (docs/prequantized.md §Row gathers)."""
        qw = PQ.quantized_weight(self.sources, p.source)
        if qw is not None and fmt in qw.exact_targets():
            self.notes.append(f"{p.name}: {self.why_not_exact(p, fmt, piece.row_start)}: requantized into {fmt}")

    def why_not_exact(self, p: BoundParameter, fmt: str, row_start: int = 0) -> str:
        """Why ``p`` (a piece from row ``row_start`` of its object) cannot be transcoded exactly into ``fmt`` (for
        notes and refusals)."""
        src = p.source
        if (qw := PQ.quantized_weight(self.sources, src)) is not None:
            why = PQ.why_not_kept(qw, src.chain, fmt, row_start)
            if why is None and self.recipe.exact_transcoding != "prefer":
                why = f"recipe {self.recipe.name} sets exact_transcoding: {self.recipe.exact_transcoding}"
            return why or "the recipe rotates it"
        st = storage_of(self.sources[src.input].tensor(src.tensor))
        kind = st.ggml_type or st.dtype
        chain = src.chain
        rot = read_rotation(self.sources[src.input])
        if rot is not None and rot.mode(src.tensor) == INVERSE:
            return f"{src.tensor} is stored rotated and looked up, so it is un-rotated here (not {kind} any more)"
        if chain.values:
            return f"value transforms {', '.join(chain.steps)} change its {kind} values"
        if (kind, fmt) not in codecs.TRANSCODES:
            try:
                targets = ", ".join(sorted(codecs.exact_targets(kind))) or "none"
            except EncodingError:
                targets = "none"
            return f"{kind} has no exact path into {fmt} (its exact targets: {targets})"
        if self.recipe.exact_transcoding != "prefer":
            return f"recipe {self.recipe.name} sets exact_transcoding: {self.recipe.exact_transcoding}"
        if st.row_bytes is None:
            return f"its rows are not whole {kind} blocks"
        if not _columns_move_whole(chain.columns, st.block):
            return (f"the mapping moves its input columns in pieces that split {kind} blocks of {st.block} and "
                    f"{fmt} groups of {codecs.codec_traits(fmt).group or '?'}")
        return "the recipe rotates it"

    def refusal(self, p: BoundParameter, fmt: str, where: str, row_start: int = 0) -> ConversionError:
        return ConversionError(f"{p.name}: {p.source.tensor} cannot be transcoded exactly into {fmt}: "
                               f"{self.why_not_exact(p, fmt, row_start)}; recipe {self.recipe.name} ({where}) sets "
                               "when_inexact: refuse, so it is not requantized", file=self.recipe.file,
                               rule="inexact_refused")

    def exact_piece(self, p: BoundParameter) -> tuple[str, Piece]:
        """``format: exact``: the best exact representation of the source tensor (see recipes)."""
        src = p.source
        if (qw := PQ.quantized_weight(self.sources, src)) is not None:  # its first exact target the shape allows
            if src.chain.values:
                return "fp32", PQ.requantized_piece(p, qw, 0)
            fmt = PQ.first_kept(p, qw, widen=True)
            if fmt is None:
                raise ConversionError(f"{p.name}: {src.tensor} ({qw.kind}) has no exact representation for shape "
                                      f"{list(p.shape)} (exact targets: {', '.join(qw.exact_targets()) or 'none'})",
                                      file=self.recipe.file, rule="no_exact_representation")
            return fmt, PQ.kept_piece(p, qw, fmt, 0)
        t = self.sources[src.input].tensor(src.tensor)
        st = storage_of(t)
        kind = st.ggml_type or st.dtype
        chain = src.chain
        rows = _rows(p.shape)
        mode = self.source_mode(p, None)
        if chain.values or mode == INVERSE:
            return "fp32", Piece(p.name, 0, rows, src, kind, "encode", "requantized", source_hadamard=mode)
        try:
            targets = codecs.exact_targets(kind)
        except EncodingError:
            targets = {}
        moves_whole = _columns_move_whole(chain.columns, st.block)
        passthrough = {fmt: codecs.codec_traits(fmt).ggml_passthrough for fmt in targets}
        ranked = sorted(targets.items(), key=lambda kv: (passthrough[kv[0]], kv[1] != "bit_exact", kv[0]))
        for fmt, label in ranked:
            groups = None if moves_whole or passthrough[fmt] else _column_groups(chain.columns, st.block, fmt, kind)
            if not moves_whole and not passthrough[fmt] and groups is None:
                continue
            try:
                codecs.validate_combination(fmt, codecs.FORMATS[fmt].layout, p.shape, 1)
            except EncodingError:
                continue
            if st.row_bytes is None and chain.rows is not None:
                continue
            deferred = None
            if not moves_whole and groups is None:
                if p.input is None:
                    continue
                deferred = np.argsort(chain.columns).astype(np.int32)
            return fmt, Piece(p.name, 0, rows, src, kind, "transcode", label.replace("_", "-"), None, deferred,
                              source_hadamard=mode, column_groups=groups)
        raise ConversionError(f"{p.name}: {src.tensor} ({kind}) has no exact representation for shape "
                              f"{list(p.shape)} (exact targets: {', '.join(targets) or 'none'})",
                              file=self.recipe.file, rule="no_exact_representation")

    # -- bindings, uses, auxiliaries ---------------------------------------------------------------

    def shared_with(self, p: BoundParameter, params: list[BoundParameter]) -> str | None:
        """The parameter whose parts ``p`` binds when its role is ``same_as`` another (container §12.5):
        the one of that role in the same scope, read from the same tensor through the same transforms."""
        spec = self.role(p) if p.source is not None else None
        if spec is None or not spec.same_as:
            return None
        scope = p.name.rsplit("/", 1)[0]
        found = [q for q in params if q.role == spec.same_as and q.name.rsplit("/", 1)[0] == scope]
        if len(found) != 1:
            raise ConversionError(f"{p.name}: recipe role {p.role} is same_as {spec.same_as}, but its scope {scope} "
                                  f"has {len(found)} parameters of that role", file=self.recipe.file,
                                  rule="same_as_target")
        q = found[0]
        if q.source is None or (q.source.input, q.source.tensors, q.source.chain.steps) != (
                p.source.input, p.source.tensors, p.source.chain.steps):
            raise ConversionError(f"{p.name} cannot share {q.name}'s representation: it reads "
                                  f"{p.source.tensor} ({', '.join(p.source.chain.steps) or 'as is'}), not the same "
                                  "trained tensor", file=self.recipe.file, rule="same_as_source")
        return q.tied_to or q.name

    def bind_and_use(self, params: list[BoundParameter]) -> None:
        by_id = {o.id: o for o in self.objects}
        for p in params:
            target = p.tied_to or self.shared_with(p, params) or p.name
            if target not in self.placement:
                raise ConversionError(f"{p.name} ({'tied to ' + target if p.tied_to else 'own object'}) has no "
                                      "object in this plan", rule="binding_missing")
            oid, piece = self.placement[target]
            obj = by_id[oid]
            if len(obj.pieces) == 1 and tuple(obj.shape) == tuple(p.shape):
                self.bindings[p.name] = {"object": oid}
            else:
                width = int(np.prod(obj.shape[1:])) if len(obj.shape) > 1 else 1
                self.bindings[p.name] = {"parts": [{"object": oid, "range": [piece.row_start * width,
                                                                             (piece.row_start + piece.rows) * width]}]}
            if p.input is None:
                continue
            spec = self.role(p)
            use = {"parameter": p.name, "input": p.input, "activation_policy": spec.activation_policy}
            aux = {}
            if piece.hadamard_width is not None:
                aux["hadamard_signs"] = self.signs_binding(piece.hadamard_width)
            if piece.source_hadamard == FORWARD:
                aux["hadamard_signs"] = self.source_signs_binding(p.shape[-1], p.source.tensor if p.source else target)
            if piece.deferred_columns is not None:
                aux["input_columns"] = self.columns_binding(piece.deferred_columns, p.component)
            if spec.activation_input_divisor == SOURCE:
                PQ.bind_input_scale(self, p, use, aux)
            elif spec.activation_input_divisor is not None:
                aux["activation_input_divisor"] = self.divisor_binding(spec.activation_input_divisor, p.component)
            if aux:
                use["auxiliaries"] = aux
            self.uses.append(use)
        if self.without_input_scale:
            self.notes.append(f"{self.without_input_scale} use(s) whose role binds activation_input_divisor: source "
                              "have no static input scale in the source: they keep the recipe's activation policy")
        self.finish_literals()

    def source_signs_binding(self, width: int, tensor: str) -> dict:
        """The slice of the source's sign table for ``width`` (all widths are emitted, in metadata order)."""
        rot = self.source_rotation
        rot.signs_for(width, tensor=tensor)
        off = rot.offset(width)
        return {"parts": [{"object": SIGNS_OBJECT, "range": [off, off + width]}]}

    def signs_binding(self, width: int) -> dict:
        if width not in self.signs:
            self.signs[width] = (sum(w for _, w in self.signs.values()), width)
        off, w = self.signs[width]
        return {"parts": [{"object": "text/hadamard_signs", "range": [off, off + w]}]}

    def columns_binding(self, perm: np.ndarray, component: str) -> dict:
        digest = hashlib.sha256(perm.tobytes()).hexdigest()[:12]
        for lit in self.literals.values():
            if lit.id.startswith(f"{component}/input_columns/") and np.array_equal(lit.values, perm):
                return {"object": lit.id}
        oid = f"{component}/input_columns/{len([k for k in self.literals if 'input_columns' in k])}"
        self.literals[oid] = PlannedLiteral(oid, (len(perm),), "int32", "contiguous_le_v1", perm,
                                            4 * len(perm), component, f"input column permutation {digest}")
        return {"object": oid}

    def divisor_binding(self, value: float, component: str, note: str = "constant activation divisors (recipe)") -> dict:
        oid = f"{component}/activation_input_divisors"
        lit = self.literals.get(oid)
        if lit is not None and lit.note != note:
            note = "activation divisors (recipe constants and the source's static input scales)"
        values = np.append(lit.values if lit else np.zeros(0, np.float32), np.float32(value)).astype(np.float32)
        i = len(values) - 1
        self.literals[oid] = PlannedLiteral(oid, (len(values),), "fp32", "contiguous_le_v1", values,
                                            4 * len(values), component, note)
        return {"parts": [{"object": oid, "range": [i, i + 1]}]}

    def finish_literals(self) -> None:
        if self.source_rotation is not None:
            if self.signs:
                raise ConversionError(f"recipe {self.recipe.name} rotates input widths {sorted(self.signs)} with seed "
                                      f"{self.recipe.hadamard_seed}, but the source carries its own signs "
                                      "(prism.hadamard); one sign table cannot hold both: use a recipe without "
                                      "hadamard", file=self.recipe.file, rule="hadamard_source")
            rot = self.source_rotation
            n = len(rot.signs)
            self.literals[SIGNS_OBJECT] = PlannedLiteral(
                SIGNS_OBJECT, (n,), "bf16", "contiguous_le_v1", rot.signs, 2 * n, "text",
                f"Hadamard signs read from the source's prism.hadamard.sign_values, widths {list(rot.widths)}")
            ws = np.array(rot.widths, dtype=np.int32)
            self.literals[WIDTHS_OBJECT] = PlannedLiteral(
                WIDTHS_OBJECT, (len(ws),), "int32", "contiguous_le_v1", ws, 4 * len(ws), "text",
                "input widths of text/hadamard_signs, in order (prism.hadamard.sign_widths)")
        elif self.signs:
            widths = sorted(self.signs.values())
            seed = self.recipe.hadamard_seed
            signs = np.concatenate([T.hadamard_signs(w, seed) for _, w in widths]).astype(np.float32)
            n = len(signs)
            self.literals["text/hadamard_signs"] = PlannedLiteral(
                "text/hadamard_signs", (n,), "bf16", "contiguous_le_v1", signs, 2 * n, "text",
                f"Hadamard signs, seed {seed}, widths {[w for _, w in widths]}")
            ws = np.array([w for _, w in widths], dtype=np.int32)
            self.literals["text/hadamard_widths"] = PlannedLiteral(
                "text/hadamard_widths", (len(ws),), "int32", "contiguous_le_v1", ws, 4 * len(ws), "text",
                "input widths of text/hadamard_signs, in order")
        self.objects.extend(self.literals.values())


def _rows(shape: tuple[int, ...]) -> int:
    if len(shape) <= 1:
        return shape[0] if shape else 1
    return int(np.prod(shape[:-1]))


def _columns_move_whole(columns: np.ndarray | None, block: int) -> bool:
    """Whether a column permutation moves whole ``block``-element blocks (always true for ``block == 1``)."""
    if columns is None or block == 1:
        return True
    if len(columns) % block:
        return False
    blocks = columns.reshape(-1, block)
    return bool(np.all(blocks[:, 0] % block == 0) and np.all(blocks - blocks[:, :1] == np.arange(block)))


def _column_groups(columns: np.ndarray | None, block: int, fmt: str, kind: str) -> int | None:
    """The target group size ``G`` when ``columns`` split ``block``-element source blocks but move whole
    ``G``-column groups of ``fmt`` and every group lies inside one source block (``block % G == 0``): the
    rows are then transcoded in source column order and the groups — codes and their multiplier — moved
    afterwards, which keeps the transcode exact (a TQ1_0 block of 256 feeds two t2 groups of 128)."""
    if columns is None or (kind, fmt) not in codecs.TRANSCODES:
        return None
    g = getattr(codecs.FORMATS[fmt], "group", None)
    if not g or g >= block or block % g or not _columns_move_whole(columns, g):
        return None
    return g


def block_permutation(columns: np.ndarray, block: int) -> np.ndarray:
    """The block order of a whole-block column permutation (see :func:`_columns_move_whole`)."""
    return columns.reshape(-1, block)[:, 0] // block
