"""The model side of a conversion: open a source, normalise its config, find its architecture, bind its
mappings — and the two value oracles the gates build on.

- :func:`open_model` — source(s) → :class:`Model` (config, architecture module and ``Args``, the
  :class:`~converters.mapping.BoundModel` with every tensor accounted for);
- :func:`expected_parameters` — the logical parameters a source should produce after the mapped
  transforms, float32, in HF values and order (what ``convert verify`` compares against);
- :func:`logical_array` — a converted artifact's binding decoded back into the same logical values:
  the binding decoded (``Artifact.binding_array``), then the use-level auxiliaries a consumer applies
  undone (``input_columns`` column order, ``hadamard_signs`` rotation, container §8, storage-layouts §7).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from converters.mapping import BoundModel, BoundParameter, bind, load_mapping_for
from converters.mapping import transforms as T
from converters.model import architectures
from converters.model.architectures._args import bound_counts
from converters.model.components import Context, open_inputs, parse_components, resolve_components
from converters.model.config_normalize import explain_text_config
from converters.sources import open_source
from converters.sources.hadamard import logical_values
from converters.sources.rows import open_rows


@dataclass
class Model:
    """An opened checkpoint ready to plan: its inputs, normalised text config and bound mappings."""

    sources: dict
    config: dict
    config_evidence: dict
    config_rules: str
    architecture: ModuleType
    args: object
    bound: BoundModel
    components: tuple[str, ...]
    component_records: dict = field(default_factory=dict)  # component id → converters.model.components.Component
    tokenizer_dir: Path | None = None  # --tokenizer-dir: the tokenizer files of a GGUF's original repository

    @property
    def source(self):
        return self.sources["main"]

    def frontend(self):
        """The text frontend resources (:func:`converters.sources.frontend.frontend_resources`): the source's,
        or those of :attr:`tokenizer_dir` checked against the GGUF's tokenizer."""
        from converters.sources.frontend import frontend_resources

        return frontend_resources(self.source, tokenizer_dir=self.tokenizer_dir)

    def close(self) -> None:
        for s in self.sources.values():
            s.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_model(path_or_source, *, components: Iterable[str] = ("text",), inputs: dict | None = None) -> Model:
    """Open ``path_or_source`` (GGUF file, HF directory, or an open Source) and bind its mappings.

    ``components``: ``text`` plus any of ``mtp``, ``vision``, ``dflash``, ``dflash2`` (:mod:`converters.model.components`;
    one the inputs do not provide is an error naming it). ``inputs``: further inputs component mappings
    read — ``{"mmproj": path, "drafter": path or [paths]}`` — and ``"tokenizer_dir"``, the directory whose
    tokenizer files replace the ones a GGUF's are rebuilt into (:meth:`Model.frontend`)."""
    owned = not hasattr(path_or_source, "tensors")
    source = open_source(path_or_source) if owned else path_or_source
    sources = {"main": source}
    opened: list = []
    inputs = dict(inputs or {})
    tokenizer_dir = inputs.pop("tokenizer_dir", None)
    try:
        sources.update(open_inputs(inputs, opened))
        normalized = explain_text_config(source)
        config = normalized.config
        gguf_arch = source.metadata.get("general.architecture") if source.kind == "gguf" else None
        arch = architectures.for_config(config, gguf_architecture=gguf_arch, file=str(source.path), source=source)
        args = arch.Args.from_config(config, file=str(source.path))
        bound_counts(args, [source], file=str(source.path))
        components = parse_components(components)
        records = resolve_components(Context(arch, config, sources), components)
        for c in records:
            bound_counts(c.args, sources.values(), file=str(source.path))
        mappings = [load_mapping_for(arch.NAME, "text")] + [c.mapping for c in records]
        bound = bind(mappings, args, sources, components=components,
                     component_args={c.id: c.args for c in records})
    except BaseException:
        for s in opened + ([source] if owned else []):
            s.close()
        raise
    return Model(sources, config, dict(normalized.evidence), normalized.rules_file, arch, args, bound, components,
                 {c.id: c for c in records}, Path(tokenizer_dir) if tokenizer_dir is not None else None)


def parameter_values(sources: dict, p: BoundParameter, bound: BoundModel | None = None) -> np.ndarray:
    """One bound parameter's float32 values after its transform chain (tied: the target's values)."""
    if p.source is None:
        if bound is None:
            raise ValueError(f"{p.name} is tied to {p.tied_to}; pass the BoundModel")
        return parameter_values(sources, bound.parameter(p.tied_to), bound)
    chain = p.source.chain
    source = sources[p.source.input]
    rows = open_rows(sources, p.source)
    values = chain.apply(rows.floats(chain.row_ids(0, chain.n_rows)))
    return logical_values(source, p.source.tensor, values).reshape(p.shape)  # a rotated source: un-rotated


def expected_parameters(source, *, names: Iterable[str] | None = None, components: Iterable[str] = ("text",),
                        inputs: dict | None = None) -> Iterator[tuple[str, np.ndarray]]:
    """``(logical name, float32 values)`` of a source after the mapped transforms, in mapping order.

    ``source``: a path or an open :class:`~converters.sources.Source`; ``names``: restrict to these;
    ``components`` / ``inputs`` as for :func:`open_model` (``mtp/...``, ``vision/...`` names; a tied
    parameter such as ``mtp/output_head`` yields its target's values).
    Values are the HF parameters (norms un-shifted, ``A_log``, grouped V heads, query and gate split, a
    Hadamard-rotated source un-rotated: :mod:`converters.sources.hadamard`), computed in float64 and rounded once
    to float32. One parameter is decoded at a time."""
    model = open_model(source, components=components, inputs=inputs)
    wanted = None if names is None else set(names)
    try:
        for p in model.bound.parameters:
            if wanted is None or p.name in wanted:
                yield p.name, parameter_values(model.sources, p, model.bound)
    finally:
        if not hasattr(source, "tensors"):
            model.close()


def logical_array(artifact, name: str, shape: Iterable[int] | None = None) -> np.ndarray:
    """A binding of ``artifact`` decoded to the logical values (HF order, un-rotated), in ``shape``
    (default: the object's shape for a whole-object binding, flat for parts).

    The stored matrix of a use with ``input_columns`` has its columns in that order, and one with
    ``hadamard_signs`` stores ``W·D·H``; both are undone here (storage-layouts §7, container §8)."""
    values = artifact.binding_array(name)
    b = artifact.bindings[name]
    out_shape = tuple(shape) if shape is not None else (
        tuple(artifact.object(b.object).shape) if b.object is not None else values.shape)
    for use in artifact.uses:
        if use.parameter != name:
            continue
        aux = use.auxiliaries
        if "input_columns" in aux:
            cols = artifact.binding_array(aux["input_columns"]).astype(np.int64)
            stored = values.reshape(-1, len(cols))
            restored = np.empty_like(stored)
            restored[:, cols] = stored
            values = restored
        if "hadamard_signs" in aux:
            signs = artifact.binding_array(aux["hadamard_signs"])
            values = T.hadamard_unrotate(values.reshape(-1, len(signs)), signs).astype(np.float32)
        break
    return values.reshape(out_shape)
