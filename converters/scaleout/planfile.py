"""The plan file of a staged conversion (``ninfer-convert-plan/v1``): what to convert and where it is staged.

One JSON document, written once by the plan step and read by every encode task and by the seal::

    {"schema": "ninfer-convert-plan/v1", "converter": "0.1.0",
     "request": {source, output, kind, recipe, template, max_file_bytes, only_layer, components, inputs,
                 proposal, artifact_id, artifact_id_from_content,      # absolute paths
                 overrides: [{format, flag, pattern, role}, ...]},    # --tensor-type & co.
     "staging": "/shared/out/.model.ninfer.staging",
     "fingerprint": "<sha256 of the planned directory text>",
     "objects": [{"id", "bytes", "measure", "origin", "exactness"}, ...], # directory order
     "summary": {...}, "created": <unix seconds>}

The directory itself (offsets, files table) lives in the staging directory (``staged.json``); the plan
file only carries what a task needs to rebuild the same conversion. A task re-plans from ``request``
and compares the directory text it would write with ``fingerprint``: a source that changed on disk (its
identity — size, mtime, header digest — is in the provenance), another converter version or another
recipe file gives another text, and the task refuses (rule ``plan_stale``) instead of writing bytes that
do not belong to the planned directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from converters.errors import ConversionError, SourceFormatError
from converters.mapping.overrides import from_plan, to_plan
from converters.sources import strict_json
from converters.sources.atomic_write import write_new_file
from converters.sources.fileio import lexists, read_bounded
from converters.sources.kind import require_kind

SCHEMA = "ninfer-convert-plan/v1"
MAX_PLAN_BYTES = 256 << 20


def _abs(path) -> str | None:
    return None if path is None else str(Path(path).resolve())


@dataclass(frozen=True)
class Request:
    """The arguments of one conversion (those of :func:`converters.pipeline.convert.convert` that shape its output)."""

    source: str
    output: str
    kind: str | None = None
    recipe: str | None = None
    template: str | None = None
    max_file_bytes: int | None = None
    only_layer: int | None = None
    components: tuple[str, ...] = ("text",)
    inputs: dict = field(default_factory=dict)
    proposal: dict | None = None
    artifact_id: str | None = None
    artifact_id_from_content: bool = False
    overrides: tuple = ()  # format overrides as converters.mapping.overrides.to_plan writes them

    @classmethod
    def make(cls, source, output, *, kind=None, recipe=None, template=None, max_file_bytes=None, only_layer=None,
             components=("text",), inputs=None, proposal=None, artifact_id=None,
             artifact_id_from_content=False, format_overrides=()) -> Request:
        """A request with absolute paths (tasks run elsewhere), inputs and proposal as JSON values."""
        rec = str(recipe) if recipe is not None else None
        if rec is not None and ("/" in rec or rec.endswith((".yaml", ".yml"))):  # as recipes.recipe_path
            rec = _abs(rec)
        ins = {}
        for name, value in (inputs or {}).items():
            if value is None:
                continue
            ins[name] = [_abs(v) for v in value] if isinstance(value, list | tuple) else _abs(value)
        prop = None
        if proposal is not None:
            prop = {"domain": proposal.domain, "counts": _abs(proposal.counts), "rows": proposal.rows}
        aid = artifact_id.hex() if isinstance(artifact_id, bytes | bytearray) else artifact_id
        return cls(_abs(source), _abs(output), kind, rec, _abs(template), max_file_bytes, only_layer,
                   tuple(components), ins, prop, aid, bool(artifact_id_from_content),
                   tuple(to_plan(format_overrides)))

    def conversion_args(self) -> dict:
        """Keyword arguments of :func:`converters.pipeline.convert.open_conversion`."""
        from converters.pipeline.proposal import ProposalRequest

        proposal = None
        if self.proposal is not None:
            counts = self.proposal.get("counts")
            proposal = ProposalRequest(self.proposal["domain"], Path(counts) if counts else None,
                                       self.proposal.get("rows"))
        inputs = {k: [Path(p) for p in v] if isinstance(v, list) else Path(v) for k, v in self.inputs.items()}
        return {"recipe": self.recipe, "template": self.template, "only_layer": self.only_layer,
                "components": self.components, "inputs": inputs or None, "expect_kind": self.kind,
                "proposal": proposal, "format_overrides": from_plan(list(self.overrides), file="plan request")}

    def to_json(self) -> dict:
        out = asdict(self)
        out["components"] = list(self.components)
        out["overrides"] = list(self.overrides)
        return out

    @classmethod
    def from_json(cls, value: dict, file: str) -> Request:
        try:
            value = dict(value)
            value["components"] = tuple(value["components"])
            value["overrides"] = tuple(to_plan(from_plan(value.get("overrides", []), file=file)))
            return cls(**value)
        except (TypeError, KeyError) as exc:
            raise ConversionError(f"plan request is malformed: {exc}", file=file, json_path="$.request",
                                  rule="plan_schema") from None


@dataclass
class PlanFile:
    """A loaded plan file (see the module docstring)."""

    request: Request
    staging: str
    fingerprint: str
    objects: list[dict]
    summary: dict
    created: float
    converter: str

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "converter": self.converter, "request": self.request.to_json(),
                "staging": self.staging, "fingerprint": self.fingerprint, "objects": self.objects,
                "summary": self.summary, "created": self.created}

    def save(self, path: Path) -> None:
        """Write the plan file; it must not exist (never overwritten)."""
        text = json.dumps(self.to_json(), indent=1).encode() + b"\n"
        # published whole or not at all; a write failure is a typed OutputWriteError (rule output_write)
        write_new_file(path, text, exists=lambda: ConversionError(
            "plan file already exists; it is never overwritten", file=str(path), rule="target_exists"))

    @classmethod
    def load(cls, path: str | os.PathLike) -> PlanFile:
        """Read and check a plan file (typed errors naming the file and field)."""
        path = Path(path)
        if not lexists(path):
            raise ConversionError("plan file does not exist", file=str(path), rule="plan_missing")
        # a model file or directory given for the plan: say what it is
        require_kind(path, ("json",), command="encode / convert seal", rule="plan_schema", pass_unrecognised=True)
        data = read_bounded(path, MAX_PLAN_BYTES, what="plan file", too_big=lambda size: ConversionError(
            f"plan file of {size} bytes exceeds {MAX_PLAN_BYTES}", file=str(path), rule="plan_schema"))
        try:
            value = strict_json.loads(data, file=path, what="plan file")
        except SourceFormatError as exc:
            raise ConversionError(f"plan file is not readable JSON: {exc.message}", file=str(path),
                                  rule="plan_schema") from None
        if not isinstance(value, dict) or value.get("schema") != SCHEMA:
            raise ConversionError(f"not a {SCHEMA} plan file", file=str(path), json_path="$.schema",
                                  rule="plan_schema")
        for key, kind in (("request", dict), ("staging", str), ("fingerprint", str), ("objects", list),
                          ("summary", dict), ("created", float | int), ("converter", str)):
            if not isinstance(value.get(key), kind):
                raise ConversionError(f"plan field {key!r} is missing or has the wrong type", file=str(path),
                                      json_path=f"$.{key}", rule="plan_schema")
        for i, o in enumerate(value["objects"]):
            if not (isinstance(o, dict) and isinstance(o.get("id"), str) and isinstance(o.get("bytes"), int)
                    and isinstance(o.get("measure"), bool)):
                raise ConversionError("plan object needs id, bytes and measure", file=str(path),
                                      json_path=f"$.objects[{i}]", rule="plan_schema")
        return cls(Request.from_json(value["request"], str(path)), value["staging"], value["fingerprint"],
                   value["objects"], value["summary"], float(value["created"]), value["converter"])
