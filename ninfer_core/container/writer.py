"""The artifact writer (container spec §2.1, §2.3, §3, §5.3, §11.4).

Declare, plan, write, commit::

    from ninfer_core import ArtifactWriter, Binding, Component, Use

    with ArtifactWriter("out/model.ninfer", components={"text": Component(config)},
                        max_file_bytes=None) as w:
        w.add_tensor("w.embed", (1024, 256), "bf16", "contiguous_le_v1")
        w.add_resource("r.tokenizer", len(tokenizer_bytes))
        w.add_binding("text/token_embedding", Binding.whole("w.embed"))
        w.add_use(Use("text/output_head", "text/final_hidden", "A16Only"))
        w.plan()                                   # offsets, files, JSON fixed; temporaries created
        w.write_object("r.tokenizer", tokenizer_bytes)
        w.write_object("w.embed", lambda: encode(...))   # any order, from any thread
    # leaving the block publishes the artifact; an exception (Ctrl-C included) removes everything

1. Declaration order is payload order (§5.3): tensors 256-aligned, resources 1-aligned; tensor sizes
   come from the codec registry, so the layout is known before any tensor is computed.
2. :meth:`ArtifactWriter.plan` serialises the directory, fixes the JSON reservation and the split
   (§2.3), parses its own JSON back with the reader's checks (so it never writes a directory the
   reader rejects), refuses existing targets and creates the temporaries.
3. :meth:`ArtifactWriter.write_object` writes one object at its planned offset. ``data`` is a bytes-like
   object or numpy array, an iterable of such chunks (so a large object streams in bounded memory), or
   a callable returning either (so encoding can run in the calling worker thread). A chunk may also be a
   :class:`~ninfer_core.container.filecopy.FileRange`: bytes stored exactly as a source file holds them,
   copied file to file in the kernel (docs/io-speed.md §Unchanged bytes). Objects may be
   written in any order and from several threads at once; one object may be written in ``parts`` shares
   of placed chunks at once (docs/io-speed.md §Write path).
4. :meth:`ArtifactWriter.commit` checks that every object was written completely and publishes (see
   :mod:`ninfer_core.container.fileset`). Same inputs and ``artifact_id`` give byte-identical files.

Reproducible builds and scale-out (additions):

- ``artifact_id_from_content=True``: the ID is derived from the content
  (:mod:`ninfer_core.container.contentid`): each object's SHA-256 is taken as it is written, and the
  ID is computed and written into every header at commit.
- :meth:`ArtifactWriter.replace_provenance` swaps the provenance after :meth:`plan` (e.g. errors
  measured while writing) provided the new JSON fits the planned ``json_bytes``: plan with a
  provenance at least as long (placeholders), write, then replace.
- :meth:`ArtifactWriter.stage` plans exactly like :meth:`plan` but hands the files to a
  :class:`~ninfer_core.container.staging.StagedArtifact` that other processes or machines write into.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ninfer_core.container.contentid import content_artifact_id
from ninfer_core.container.direct import DirectRun
from ninfer_core.container.filecopy import FileRange
from ninfer_core.container.fileset import FileSetWriter, check_targets_free
from ninfer_core.container.object_data import ObjectData, Placed, byte_view, object_chunks
from ninfer_core.container.planned_directory import check_written_directory, replaced_provenance
from ninfer_core.container.planner import FilePlan, place, plan_files
from ninfer_core.container.records import RAW_BYTES, Binding, Component, ResourceObject, TensorObject, Use
from ninfer_core.container.schema import is_valid_id
from ninfer_core.container.tempfiles import cleanup_temporaries
from ninfer_core.errors import SchemaError, WriterError

log = logging.getLogger(__name__)


class _Shares:
    """An object written in ``parts`` shares (:meth:`ArtifactWriter.write_object`): how many have started and
    finished, and the placed chunks of the finished ones."""

    def __init__(self, parts: int) -> None:
        self.parts, self.started, self.finished = parts, 0, 0
        self.placed: list[tuple[int, int]] = []


def artifact_id_bytes(value: bytes | str | uuid.UUID | None) -> bytes:
    """16 raw bytes from bytes, 32 hex characters or a UUID; a new UUID4 when None (§2.1)."""
    if value is None:
        return uuid.uuid4().bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, str):
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = b""
    else:
        raw = bytes(value)
    if len(raw) != 16:
        raise WriterError(f"artifact_id must be 16 bytes (32 hex characters), got {value!r}", section="§3.1",
                          rule="artifact_id")
    return raw


def _json_of(value: Any) -> Any:
    return value.to_json() if hasattr(value, "to_json") else value


class ArtifactWriter:
    """Writes one artifact at ``path`` (the entry file); see the module docstring for the protocol.

    Args:
        path: entry file to create; it and its part names must not exist (never overwritten).
        components: component ID → :class:`Component` (or its JSON dict), §4.2.
        bindings: binding name → :class:`Binding` (or JSON dict), §7; more via :meth:`add_binding`.
        uses: :class:`Use` records (or JSON dicts), §8; more via :meth:`add_use`.
        metadata, provenance: open JSON objects (§10); omitted when None.
        max_file_bytes: split limit (§2.3); None writes one file whatever the size.
        artifact_id: 16 bytes / 32 hex / UUID; default a new UUID4.
        artifact_id_from_content: derive the ID from the content at commit (excludes ``artifact_id``).
        reserve_json_bytes: minimum ``json_bytes`` (the JSON is padded with spaces to the reservation).
        durable: ``fsync`` files and directory before/after publishing (default True).
    """

    def __init__(self, path: str | os.PathLike, *, components: Mapping[str, Component | dict],
                 bindings: Mapping[str, Binding | dict] | None = None, uses: Iterable[Use | dict] | None = None,
                 metadata: Mapping[str, Any] | None = None, provenance: Mapping[str, Any] | None = None,
                 max_file_bytes: int | None = None, artifact_id: bytes | str | uuid.UUID | None = None,
                 reserve_json_bytes: int | None = None, durable: bool = True,
                 artifact_id_from_content: bool = False) -> None:
        self.path = Path(path)
        if not self.path.name or self.path.name in (".", ".."):
            raise WriterError("the artifact path needs a file name", file=str(self.path), section="§2.1",
                              rule="target_path")
        if not self.path.parent.is_dir():
            raise WriterError("the artifact's directory does not exist", file=str(self.path), section="§11.4",
                              rule="target_path")
        check_targets_free(self.path, [None])
        if max_file_bytes is not None and (isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int)):
            raise WriterError(f"max_file_bytes must be an integer, got {max_file_bytes!r}", section="§2.3",
                              rule="limit_too_small")
        cleanup_temporaries(self.path)
        if artifact_id_from_content and artifact_id is not None:
            raise WriterError("give artifact_id or artifact_id_from_content, not both", file=str(self.path),
                              section="§3.1", rule="artifact_id")
        self.from_content = bool(artifact_id_from_content)
        # from content: zeros in the headers until commit computes the ID
        self.artifact_id_bytes = bytes(16) if self.from_content else artifact_id_bytes(artifact_id)
        self._digests: dict[str, bytes] = {}
        self.max_file_bytes = max_file_bytes
        self.reserve_json_bytes = reserve_json_bytes
        self.durable = durable
        self._components = {k: _json_of(v) for k, v in components.items()}
        self._bindings = {k: _json_of(v) for k, v in (bindings or {}).items()}
        self._uses = [_json_of(u) for u in (uses or [])]
        self._metadata = None if metadata is None else dict(metadata)
        self._provenance = None if provenance is None else dict(provenance)
        self._declared: list[TensorObject | ResourceObject] = []
        self._ids: set[str] = set()
        self._lock = threading.Lock()
        self._status: dict[str, str] = {}
        self._shares: dict[str, _Shares] = {}
        self._records: dict[str, TensorObject | ResourceObject] = {}
        self._plan: FilePlan | None = None
        self._files: FileSetWriter | None = None
        self._state = "declaring"

    @property
    def artifact_id(self) -> str:
        return self.artifact_id_bytes.hex()

    # ---- declaring -----------------------------------------------------------------------------

    def _declare(self, record: TensorObject | ResourceObject) -> None:
        if self._state != "declaring":
            raise WriterError(f"cannot add object {record.id!r} after plan()", file=str(self.path),
                              section="§11.4", rule="writer_state")
        if not is_valid_id(record.id):
            raise SchemaError(f"object ID {record.id!r} breaks the ID rule", file=str(self.path),
                              json_path="$.objects", section="§1", rule="id_rule")
        if record.id in self._ids:
            raise SchemaError(f"object ID {record.id!r} declared twice", file=str(self.path), json_path="$.objects",
                              section="§5.3", rule="object_id_duplicate")
        self._ids.add(record.id)
        self._declared.append(record)

    def add_tensor(self, object_id: str, shape: tuple[int, ...] | list[int], format: str, layout: str, *,
                   divisors: int = 1) -> int:
        """Declare a tensor object; returns its encoded size from the codec registry (§5.1, §6)."""
        from ninfer_core import codecs

        shape = tuple(int(d) for d in shape)
        nbytes = codecs.encoded_size(format, layout, shape, divisors)
        self._declare(TensorObject(object_id, shape, format, layout, 0, nbytes, divisors))
        return nbytes

    def add_resource(self, object_id: str, nbytes: int, *, encoding: str = RAW_BYTES) -> int:
        """Declare a resource object of ``nbytes`` raw bytes (§5.2)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            raise SchemaError(f"resource {object_id!r} needs a positive byte count, got {nbytes!r}",
                              file=str(self.path), json_path="$.objects", section="§5.2", rule="u64_range")
        self._declare(ResourceObject(object_id, 0, nbytes, encoding))
        return nbytes

    def add_binding(self, name: str, binding: Binding | dict) -> None:
        if self._state != "declaring":
            raise WriterError("cannot add a binding after plan()", section="§11.4", rule="writer_state")
        if name in self._bindings:
            raise SchemaError(f"binding {name!r} declared twice", json_path="$.bindings", section="§7.1",
                              rule="json_duplicate_key")
        self._bindings[name] = _json_of(binding)

    def add_use(self, use: Use | dict) -> None:
        if self._state != "declaring":
            raise WriterError("cannot add a use after plan()", section="§11.4", rule="writer_state")
        self._uses.append(_json_of(use))

    # ---- planning ----------------------------------------------------------------------------------

    def layout(self) -> tuple[FilePlan, list[TensorObject | ResourceObject]]:
        """The plan :meth:`plan` makes — placed objects, JSON, files table, checked — creating nothing."""
        if not self._declared:
            raise SchemaError("an artifact needs at least one object", json_path="$.objects", section="§4.1",
                              rule="empty_collection")
        placed, pos = [], 0
        for rec in self._declared:
            offset = place(pos, rec.kind)
            rec = TensorObject(rec.id, rec.shape, rec.format, rec.layout, offset, rec.bytes, rec.divisors) \
                if isinstance(rec, TensorObject) else ResourceObject(rec.id, offset, rec.bytes, rec.encoding)
            placed.append(rec)
            pos = rec.end
        root: dict[str, Any] = {"components": self._components, "objects": [r.to_json() for r in placed],
                                "bindings": self._bindings, "uses": self._uses, "files": []}
        if self._metadata is not None:
            root["metadata"] = self._metadata
        if self._provenance is not None:
            root["provenance"] = self._provenance
        plan = plan_files(root, pos, self.path.name, max_file_bytes=self.max_file_bytes,
                          reserve_json_bytes=self.reserve_json_bytes)
        check_written_directory(plan, self.path)
        return plan, placed

    def plan(self) -> FilePlan:
        """Place the objects, fix the JSON and files table, check the directory, create temporaries."""
        if self._plan is not None:
            return self._plan
        if self._state != "declaring":
            raise WriterError(f"cannot plan in state {self._state}", section="§11.4", rule="writer_state")
        plan, placed = self.layout()
        self._files = FileSetWriter(self.path, plan, self.artifact_id_bytes, durable=self.durable,
                                    objects=[(r.offset, r.end) for r in placed])
        self._plan = plan
        self._records = {r.id: r for r in placed}
        self._status = dict.fromkeys(self._records, "pending")
        self._state = "writing"
        return plan

    def stage(self, staging_dir: str | os.PathLike):
        """Plan exactly as :meth:`plan` does, but into a :class:`~ninfer_core.container.staging.StagedArtifact`
        in ``staging_dir`` (pre-allocated files that survive this process; written by independent tasks,
        published by :meth:`StagedArtifact.seal`). This writer is done afterwards."""
        from ninfer_core.container.staging import StagedArtifact

        if self._state != "declaring":
            raise WriterError(f"cannot stage in state {self._state}", section="§11.4", rule="writer_state")
        plan, _ = self.layout()
        staged = StagedArtifact.create(self.path, staging_dir, plan,
                                       artifact_id=None if self.from_content else self.artifact_id_bytes,
                                       durable=self.durable)
        self._state = "staged"
        return staged

    def replace_provenance(self, provenance: Mapping[str, Any]) -> None:
        """Replace the planned provenance (§10) before commit; the JSON must still fit ``json_bytes``.

        The offsets and files table are fixed by :meth:`plan`, so the new directory text only replaces
        the old inside the same reservation (padded with spaces, §3.1). A provenance must have been given
        at construction (its member position is kept)."""
        plan = self.plan()
        if self._state != "writing":
            raise WriterError(f"cannot replace the provenance in state {self._state}", section="§11.4",
                              rule="writer_state")
        self._plan = replaced_provenance(plan, provenance, self.path)
        self._files.replace_plan(self._plan)
    @property
    def objects(self) -> list[TensorObject | ResourceObject]:
        """The placed object records (after :meth:`plan`)."""
        return list(self._records.values())

    # ---- writing -----------------------------------------------------------------------------------

    def write_object(self, object_id: str, data: ObjectData, *, parts: int = 1) -> None:
        """Write all bytes of one object at its planned offset (any order, any thread).

        ``parts`` > 1: this call writes one of ``parts`` shares of the object, as :class:`Placed` chunks only;
        the shares may be written at once from several threads (an expert bank split across workers,
        docs/io-speed.md §Write path). The object is written when the last share returns, and every byte
        of it must have been written exactly once across them. A share that fails leaves the object failed:
        the artifact can only be aborted."""
        if self._plan is None:
            with self._lock:  # threads that all write first plan once: one set of temporaries, never several
                self.plan()
        rec = self._records.get(object_id)
        if rec is None:
            raise WriterError(f"object {object_id!r} was not declared", file=str(self.path), section="§11.4",
                              rule="object_unknown")
        if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
            raise WriterError(f"object {object_id!r}: parts must be a positive integer, got {parts!r}",
                              file=str(self.path), section="§11.4", rule="object_data")
        if parts > 1 and self.from_content:
            raise WriterError(f"object {object_id!r}: shares written at once cannot be hashed in order for a "
                              "content-derived ID", file=str(self.path), section="§11.4", rule="object_data")
        with self._lock:
            if self._state != "writing":
                raise WriterError(f"cannot write in state {self._state}", file=str(self.path), section="§11.4",
                                  rule="writer_state")
            share = self._start(object_id, parts)
        digest = hashlib.sha256() if self.from_content else None
        run = self._files.direct_run()  # in-order bytes past the page cache (docs/io-speed.md §Direct writes)
        try:
            written, placed = 0, []
            for chunk in object_chunks(data, object_id):
                if isinstance(chunk, Placed):  # bytes at a position of their own (docs/io-speed.md §Write path)
                    if digest is not None:
                        raise WriterError(f"object {object_id!r}: placed chunks cannot be hashed in order for a "
                                          "content-derived ID", file=str(self.path), section="§11.4",
                                          rule="object_data")
                    placed.append((chunk.offset, self._put(object_id, rec, chunk.offset, chunk.data, None, run)))
                elif share is not None:
                    raise WriterError(f"object {object_id!r}: a share of an object written in {parts} parts takes "
                                      "placed chunks only", file=str(self.path), section="§11.4", rule="object_data")
                else:
                    written += self._put(object_id, rec, written, chunk, digest, run)
            if run is not None:
                run.close()
            if share is None:
                self._check_coverage(object_id, rec, written, placed)
            else:
                with self._lock:
                    share.placed.extend(placed)
                    share.finished += 1
                    last = share.finished == share.parts
                if last:
                    self._check_coverage(object_id, rec, 0, share.placed)
                else:
                    return
        except BaseException:
            with self._lock:
                self._status[object_id] = "pending" if share is None else "failed"
            raise
        finally:
            if run is not None:
                run.release()
        with self._lock:
            self._status[object_id] = "written"
            if digest is not None:
                self._digests[object_id] = digest.digest()

    def _start(self, object_id: str, parts: int) -> _Shares | None:
        """Mark the object (or one more of its ``parts`` shares) as being written; under the lock."""
        status = self._status[object_id]
        if parts == 1:
            if status != "pending":
                raise WriterError(f"object {object_id!r} is already {status}", file=str(self.path),
                                  section="§11.4", rule="object_written_twice")
            self._status[object_id] = "writing"
            return None
        share = self._shares.get(object_id) if status == "writing" else None
        if status == "pending":
            share = self._shares[object_id] = _Shares(parts)
            self._status[object_id] = "writing"
        elif share is None or share.parts != parts or share.started == parts:
            raise WriterError(f"object {object_id!r} is already {status}" + (
                              f" in {share.parts} parts" if share is not None else ""), file=str(self.path),
                              section="§11.4", rule="object_written_twice")
        share.started += 1
        return share

    def _put(self, object_id: str, rec: TensorObject | ResourceObject, at: int, chunk, digest,
             run: DirectRun | None = None) -> int:
        """Write one chunk at byte ``at`` of the object (bytes through ``run``); returns its length. A
        :class:`FileRange` is copied in the kernel unless its bytes must be hashed."""
        if isinstance(chunk, FileRange) and digest is None:  # unchanged bytes: copied in the kernel
            self._check_room(object_id, rec, at, chunk.length)
            if run is not None:
                run.close()  # the run's bytes before the copy's
            self._files.copy_at(rec.offset + at, chunk)
            return chunk.length
        n = 0
        for view in chunk.chunks() if isinstance(chunk, FileRange) else (byte_view(chunk, object_id),):
            self._check_room(object_id, rec, at + n, len(view))
            self._files.write_at(rec.offset + at + n, memoryview(view), run)
            if digest is not None:
                digest.update(view)
            n += len(view)
        return n

    def _check_room(self, object_id: str, rec: TensorObject | ResourceObject, written: int, more: int) -> None:
        if written < 0 or written + more > rec.bytes:
            raise WriterError(f"object {object_id!r} got more than its {rec.bytes} declared bytes",
                              file=str(self.path), section="§11.4", rule="object_length")

    def _check_coverage(self, object_id: str, rec: TensorObject | ResourceObject, written: int,
                        placed: list[tuple[int, int]]) -> None:
        """Every byte of the object written exactly once: the in-order chunks from 0, placed chunks anywhere."""
        end = written
        for start, n in sorted(placed):
            if start != end:
                what = "overlap" if start < end else "leave a gap"
                raise WriterError(f"object {object_id!r}: its chunks {what} at byte {min(start, end)}",
                                  file=str(self.path), section="§11.4", rule="object_length")
            end = start + n
        if end != rec.bytes:
            raise WriterError(f"object {object_id!r} got {end} of its {rec.bytes} declared bytes",
                              file=str(self.path), section="§11.4", rule="object_length")

    # ---- finishing ---------------------------------------------------------------------------------

    def commit(self) -> Path:
        """Check every object was written, then publish parts and entry (§11.4 step 7)."""
        if self._plan is None:
            self.plan()
        with self._lock:
            missing = [k for k, s in self._status.items() if s != "written"]
            if missing:
                shown = ", ".join(repr(m) for m in missing[:5]) + (" …" if len(missing) > 5 else "")
                raise WriterError(f"{len(missing)} object(s) not completely written: {shown}", file=str(self.path),
                                  section="§11.4", rule="coverage_incomplete")
            self._state = "committing"
        try:
            if self.from_content:
                self.artifact_id_bytes = content_artifact_id(self._plan.json_text,
                                                             (self._digests[k] for k in self._records))
                self._files.replace_artifact_id(self.artifact_id_bytes)
            path = self._files.commit()
        except BaseException:
            self._state = "aborted"
            raise
        self._state = "committed"
        log.info("wrote %s (%d files, %d payload bytes)", path, len(self._plan.sizes), self._plan.payload_bytes)
        return path

    def abort(self) -> None:
        """Discard everything written so far (idempotent)."""
        if self._state in ("committed", "aborted"):
            return
        self._state = "aborted"
        if self._files is not None:
            self._files.abort()

    def __enter__(self) -> ArtifactWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if self._state != "committed":
                try:
                    self.commit()
                except BaseException:
                    self.abort()
                    raise
        else:
            self.abort()
