"""A planned directory, checked before it is written and revised inside its reservation (§3.1, §10, §11.4).

- :func:`check_written_directory` parses the JSON about to be written with the reader's own checks, so a
  writer never writes a directory the reader rejects (§11.4 step 2);
- :func:`replaced_provenance` swaps the provenance of a plan after planning, padded into the same
  ``json_bytes`` (the offsets and files table are fixed by then).

The in-process writer, the staged writer and the repacker all use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ninfer_core.container import jsontext
from ninfer_core.container.planner import FilePlan
from ninfer_core.container.problems import Problems
from ninfer_core.container.references import check_directory
from ninfer_core.container.schema import DirectoryParser
from ninfer_core.errors import WriterError


def check_written_directory(plan: FilePlan, entry: Path) -> None:
    """Parse the JSON about to be written with the reader's checks; raise the first problem (§11.4 step 2)."""
    problems = Problems(str(entry))
    parser = DirectoryParser(problems, entry_payload_start=plan.entry_payload_start, entry_name=entry.name)
    directory = parser.parse(jsontext.decode(plan.json_text, file=str(entry)))
    if directory is not None:
        check_directory(directory, problems, parser.invalid_object_ids, parser.object_positions)
    problems.raise_first()


def replaced_provenance(plan: FilePlan, provenance: Mapping[str, Any], entry: Path) -> FilePlan:
    """``plan`` with its directory's provenance replaced, padded into the same ``json_bytes``."""
    if "provenance" not in plan.root:
        raise WriterError("the planned directory has no provenance to replace", file=str(entry), section="§10",
                          rule="json_reservation")
    root = dict(plan.root)
    root["provenance"] = dict(provenance)
    text = jsontext.encode(root)
    if len(text) > plan.json_bytes:
        raise WriterError(f"the directory with the new provenance is {len(text)} bytes; {plan.json_bytes} were "
                          "reserved when planning", file=str(entry), section="§3.1", rule="json_reservation")
    new = dataclasses.replace(plan, json_text=jsontext.pad(text, plan.json_bytes), root=root)
    check_written_directory(new, entry)
    return new
