"""``text.proposal`` (container §9.2): an optional proposal output representation of the text model.

Two domains, each bound under the names §9.2 defines:

- ``full`` — ``proposal/head`` binds the text head's existing representation (the same object or parts,
  §5.3 "proposal 引用 Text head 的已有表示"); rows = ``vocab_size``; no token map.
- ``indexed`` with ``rows`` = Ns — ``proposal/head [Ns, H]`` is an object of its own (independently
  selectable, so its private data stays apart from the text head, §5.3) holding the text head's rows
  ``proposal/token_ids`` in that order; ``proposal/token_ids`` is an ``int32 [Ns]`` object. The rows are a
  frequency shortlist read from a token-count file: count descending, then token id ascending (the
  most frequent token is row 0); ids the file does not count have count 0 and come last, by id.

The indexed head is planned like any parameter: its source is the text head's tensor (the embedding's
when the head is tied) with the shortlist as a row selection, so a Q8_0 head is transcoded exactly
and its rows move whole; the recipe's ``output_head`` choice applies. Its use reads
``text/final_hidden``.

Token-count files (bounded, strict): TSV — an optional ``token_id<TAB>count`` header, then one
``id<TAB>count`` line per token — or JSON ``{"counts": {"<id>": count, ...}}`` (an optional
``vocab_size`` must equal the model's). Ids must lie in ``[0, vocab_size)`` and occur once; counts are
non-negative integers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from converters.errors import ConversionError
from converters.mapping.binder import BoundModel, BoundSource
from converters.mapping.chain import Chain
from converters.pipeline.planned import Plan, PlannedLiteral

SECTION = "§9.2"
DOMAINS = ("full", "indexed")
HEAD = "proposal/head"
TOKEN_IDS = "proposal/token_ids"
HEAD_INPUT = "text/final_hidden"
TEXT_HEAD = "text/output_head"
#: largest token-count file read (a count per token of a 1M-token vocabulary is well below this)
MAX_COUNTS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ProposalRequest:
    """What ``--proposal`` asked for: ``domain``, and for ``indexed`` the ``counts`` file and ``rows``."""

    domain: str
    counts: Path | None = None
    rows: int | None = None

    @classmethod
    def parse(cls, domain: str | None, counts: str | Path | None, rows: int | None) -> ProposalRequest | None:
        """Validate the flag combination (before any input is read); ``None`` when no proposal is asked."""
        if domain is None:
            if counts is not None or rows is not None:
                raise ConversionError("--proposal-counts / --proposal-rows need --proposal indexed",
                                      section=SECTION, rule="proposal_flags")
            return None
        if domain not in DOMAINS:
            raise ConversionError(f"--proposal {domain!r}: choose {' or '.join(DOMAINS)}", section=SECTION,
                                  rule="proposal_domain")
        if domain == "full":
            if counts is not None or rows is not None:
                raise ConversionError("--proposal full takes every head row: no --proposal-counts / --proposal-rows",
                                      section=SECTION, rule="proposal_flags")
            return cls("full")
        if counts is None or rows is None:
            raise ConversionError("--proposal indexed needs --proposal-counts FILE and --proposal-rows N",
                                  section=SECTION, rule="proposal_flags")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows <= 0:
            raise ConversionError(f"--proposal-rows {rows!r} must be a positive integer", section=SECTION,
                                  rule="proposal_rows")
        return cls("indexed", Path(counts), rows)


def proposal_parameters(text_config: dict, record: dict | None) -> dict[str, tuple[int, ...]]:
    """The logical parameters a ``text.proposal`` record implies, with their shapes (for coverage checks
    of an artifact without its source): ``full`` → ``proposal/head [vocab_size, H]``; ``indexed`` →
    ``proposal/head [rows, H]`` and ``proposal/token_ids [rows]``; no record → none."""
    if not record:
        return {}
    hidden, vocab = text_config["hidden_size"], text_config["vocab_size"]
    if record.get("domain") == "indexed":
        return {HEAD: (record["rows"], hidden), TOKEN_IDS: (record["rows"],)}
    return {HEAD: (vocab, hidden)}


def read_token_counts(path: Path, vocab_size: int) -> np.ndarray:
    """Counts per token id (int64 ``[vocab_size]``, 0 for ids the file does not list)."""
    from converters.sources.fileio import read_bounded

    path = Path(path)
    data = read_bounded(path, MAX_COUNTS_BYTES, what="token-count file", too_big=lambda size: _bad(
        path, f"{size} bytes exceed the {MAX_COUNTS_BYTES}-byte limit of a token-count file", "counts_size"))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _bad(path, "not UTF-8 text", "counts_format") from None
    pairs = _json_pairs(path, text, vocab_size) if text.lstrip().startswith("{") else _tsv_pairs(path, text)
    counts = np.zeros(vocab_size, dtype=np.int64)
    seen = np.zeros(vocab_size, dtype=bool)
    for where, tid, count in pairs:
        if not 0 <= tid < vocab_size:
            raise _bad(path, f"{where}: token id {tid} is outside the vocabulary [0, {vocab_size})", "counts_id")
        if seen[tid]:
            raise _bad(path, f"{where}: token id {tid} is listed twice", "counts_duplicate")
        if count < 0:
            raise _bad(path, f"{where}: count {count} is negative", "counts_value")
        seen[tid], counts[tid] = True, count
    return counts


def _bad(path: Path, message: str, rule: str) -> ConversionError:
    return ConversionError(f"token-count file: {message}", file=str(path), section=SECTION, rule=rule)


def _int(path: Path, where: str, text) -> int:
    """An integer that fits int64 (ASCII digits in text: a count is at most 19 of them)."""
    value = None
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and (digits := text.strip().removeprefix("-")).isascii() and digits.isdigit():
        value = (-1 if text.strip().startswith("-") else 1) * int(digits) if len(digits) <= 19 else None
    if value is None:
        raise _bad(path, f"{where}: {(text[:40] if isinstance(text, str) else text)!r} is not an integer",
                   "counts_format")
    if not -(2**63) <= value < 2**63:
        raise _bad(path, f"{where}: {value} does not fit a 64-bit count", "counts_value")
    return value


def _tsv_pairs(path: Path, text: str):
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if n == 1 and fields[0].strip() == "token_id":
            continue
        if len(fields) != 2:
            raise _bad(path, f"line {n}: expected token_id<TAB>count, got {len(fields)} field(s)", "counts_format")
        yield f"line {n}", _int(path, f"line {n}", fields[0]), _int(path, f"line {n}", fields[1])


def _json_pairs(path: Path, text: str, vocab_size: int):
    from converters.errors import SourceFormatError
    from converters.sources import strict_json

    try:  # strict: duplicate ids, NaN and nesting over 32 levels are refused too
        doc = strict_json.loads(text.encode("utf-8"), file=path, what="token counts")
    except SourceFormatError as exc:
        raise _bad(path, f"JSON does not parse: {exc.message}", "counts_format") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("counts"), dict):
        raise _bad(path, 'expected {"counts": {"<id>": count, ...}}', "counts_format")
    declared = doc.get("vocab_size")
    if declared is not None and declared != vocab_size:
        raise _bad(path, f"vocab_size {declared!r} is not the model's {vocab_size}", "counts_vocab")
    for key, count in doc["counts"].items():
        yield f"counts[{key!r}]", _int(path, f"counts[{key!r}]", key), _int(path, f"counts[{key!r}]", count)


def shortlist(counts: np.ndarray, rows: int) -> np.ndarray:
    """The ``rows`` most frequent ids (count descending, id ascending) as int32."""
    if not 0 < rows <= len(counts):
        raise ConversionError(f"--proposal-rows {rows} must be between 1 and the vocabulary size {len(counts)}",
                              section=SECTION, rule="proposal_rows")
    order = np.lexsort((np.arange(len(counts)), -counts))  # last key first: count desc, then id asc
    return order[:rows].astype(np.int32)


@dataclass
class PlannedProposal:
    """The proposal's additions to a plan (see :func:`prepare`)."""

    request: ProposalRequest
    token_ids: np.ndarray | None
    counts_file: Path | None
    zero_count_rows: int = 0

    def finish(self, plan: Plan) -> None:
        """Add ``proposal/token_ids`` (indexed) and the ``text.proposal`` record to ``plan``."""
        record = {"domain": self.request.domain}
        if self.token_ids is not None:
            n = len(self.token_ids)
            record["rows"] = n
            note = (f"proposal token ids: {n} most frequent of {self.counts_file.name}"
                    + (f" ({self.zero_count_rows} with count 0, by id)" if self.zero_count_rows else ""))
            plan.objects.append(PlannedLiteral(TOKEN_IDS, (n,), "int32", "contiguous_le_v1", self.token_ids,
                                               4 * n, "text", note))
            plan.bindings[TOKEN_IDS] = {"object": TOKEN_IDS}
        plan.components.setdefault("text", {"config": {}})["proposal"] = record


def prepare(bound: BoundModel, request: ProposalRequest, vocab_size: int) -> tuple[BoundModel, PlannedProposal]:
    """``bound`` with a ``proposal/head`` parameter added, and what :meth:`PlannedProposal.finish` adds."""
    head = bound.parameter(TEXT_HEAD)
    root = bound.parameter(head.tied_to) if head.tied_to else head
    if request.domain == "full":
        param = dataclasses.replace(head, name=HEAD, input=HEAD_INPUT, source=None, tied_to=root.name)
        return dataclasses.replace(bound, parameters=(*bound.parameters, param)), PlannedProposal(request, None, None)
    counts = read_token_counts(request.counts, vocab_size)
    ids = shortlist(counts, request.rows)
    src = root.source
    chain = src.chain
    rows = ids.astype(np.int64) if chain.rows is None else chain.rows[ids]
    selected = Chain(chain.source_shape, (len(ids), *chain.shape[1:]), rows, chain.columns, chain.values,
                     (*chain.steps, f"select_rows(proposal/token_ids: {len(ids)} rows)"))
    param = dataclasses.replace(head, name=HEAD, shape=(len(ids), *head.shape[1:]), input=HEAD_INPUT, tied_to=None,
                                source=BoundSource(src.input, src.tensor, selected, src.dtype, src.stack))
    zero = int(np.count_nonzero(counts[ids] == 0))
    return (dataclasses.replace(bound, parameters=(*bound.parameters, param)),
            PlannedProposal(request, ids, Path(request.counts), zero))
