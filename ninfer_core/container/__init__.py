"""The NInfer v3 container: framing, JSON directory, reader, writer, splitter and validator.

Container spec sections: §2–§3 framing and files (:mod:`.framing`, :mod:`.payload`), §1/§4–§10 the
directory (:mod:`.jsontext`, :mod:`.schema`, :mod:`.references`, :mod:`.records`), §11 reading
(:mod:`.entry`, :mod:`.reader`, :mod:`.encoding`, :mod:`.validation`) and writing (:mod:`.planner`,
:mod:`.fileset`, :mod:`.tempfiles`, :mod:`.writer`, :mod:`.repacking`).

Rule identifiers (``NinferError.rule`` / ``Finding.rule``), by error kind:

- framing (§3): ``entry_too_short``, ``entry_magic``, ``json_bytes_range``, ``json_too_large``,
  ``entry_length``; ``alignment_zone_nonzero`` (WARNING, validate only).
- schema (§1, §3.3, §4–§10): ``json_utf8``, ``json_syntax``, ``json_duplicate_key``, ``field_type``,
  ``missing_field``, ``unknown_field``, ``empty_collection``, ``u64_range``, ``u64_overflow``, ``id_rule``,
  ``shape_rule``, ``object_kind``, ``divisors_not_allowed``, ``enum_value``, ``binding_form``,
  ``proposal_placement``, ``proposal_rows``, ``metadata_name``, ``entry_path``, ``part_name``,
  ``part_name_duplicate``, ``object_id_duplicate``, ``use_duplicate``.
- reference (§4.2, §7, §8, §9): ``reference_missing``, ``reference_kind``, ``part_range``.
- range (§5.3, §7, §11.2): ``object_order``, ``object_overlap``, ``object_out_of_payload``,
  ``object_alignment``, ``read_range``, ``binding_coverage`` (binder check offered by ``binding_array``).
- read (§3.2, §11.1, §11.2): ``entry_missing``, ``entry_unreadable``, ``part_missing``,
  ``part_unreadable``, ``part_magic``, ``part_index``, ``part_artifact_id``, ``part_length``,
  ``short_read``, ``io_error``.
- encoding (§5.3, §6, on interpretation): ``unknown_encoding`` (resources) and the codec registry's
  rules (``unknown_format``, ``unknown_layout``, ``format_layout_mismatch``, ``shape_rank``, …),
  ``object_encoded_size``; validate adds the codecs' value findings.
- writer (§2.3, §11.4): ``target_exists``, ``target_path``, ``limit_too_small``, ``too_many_parts``,
  ``artifact_id``, ``writer_state``, ``object_unknown``, ``object_written_twice``, ``object_length``,
  ``object_data``, ``coverage_incomplete``, ``io_error``, ``publish_failed``; ``json_reservation`` (a
  replaced provenance outgrew the planned JSON), ``staging_missing``, ``staging_state`` (staged artifacts,
  :mod:`.staging`).
"""

from ninfer_core.container.contentid import content_id_of
from ninfer_core.container.reader import Artifact, open_artifact
from ninfer_core.container.records import (
    Binding,
    Component,
    Directory,
    FileEntry,
    Part,
    Proposal,
    ResourceObject,
    TensorObject,
    Use,
)
from ninfer_core.container.repacking import repack
from ninfer_core.container.staging import StagedArtifact, staging_dir_for
from ninfer_core.container.tempfiles import cleanup_temporaries
from ninfer_core.container.validation import validate
from ninfer_core.container.writer import ArtifactWriter

__all__ = [
    "Artifact",
    "ArtifactWriter",
    "Binding",
    "Component",
    "Directory",
    "FileEntry",
    "Part",
    "Proposal",
    "ResourceObject",
    "StagedArtifact",
    "TensorObject",
    "Use",
    "cleanup_temporaries",
    "content_id_of",
    "open_artifact",
    "repack",
    "staging_dir_for",
    "validate",
]
