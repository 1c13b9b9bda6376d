"""``text.proposal`` (container §9.2) in the gates: its token map statically, its head against the source.

Coverage (validate Gate C, verify gate 2) expects ``proposal/head`` — ``[vocab_size, H]`` for ``full``,
``[rows, H]`` for ``indexed`` — with a use reading ``text/final_hidden``, and for ``indexed``
``proposal/token_ids [rows]`` (:func:`converters.acceptance.gates.contract.expected_proposal`). On top of the shapes,
:func:`check_token_ids` reads the token map: an integer tensor whose every id is a row of the text head
(``0 <= id < vocab_size``), each id once (a repeated id proposes one token twice and leaves a row of the
shortlist unused). Those are ``NINFER_PROPOSAL_TOKEN_IDS``.

Against the source (verify gates 4 and 5), :func:`proposal_targets`: the expected values of
``proposal/head`` are the text head's source values after the mapped transforms — all of them for ``full``,
the rows at the artifact's own ``proposal/token_ids`` in that order for ``indexed`` — so a head whose rows do
not follow its ids, or ids that do not name its rows, fail row by row (``VERIFY_ROW_ORDER``) and by value. A
``full`` head bound to exactly the text head's representation (§5.3: "proposal 引用 Text head 的已有表示") is
compared once, as ``text/output_head``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from converters.acceptance.gates.codes import finding
from converters.acceptance.gates.decode import SourceRows
from converters.acceptance.gates.values import Target
from converters.acceptance.report import Finding
from converters.pipeline.proposal import HEAD, TEXT_HEAD, TOKEN_IDS
from ninfer_core import TensorObject, codecs
from ninfer_core.errors import NinferError

#: formats that hold integers (codec trait ``integer_word``, docs/format/codec-traits.md), and their
#: little-endian element type (read as integers: the codecs decode to float32, which rounds ids above 2^24)
INTEGER_FORMATS = {f: t.integer_word for f, t in codecs.all_traits().items() if t.integer_word is not None}
SHOWN = 5


def proposal_record(art) -> dict | None:
    """``components.text.proposal`` as JSON, or None."""
    text = art.components.get("text")
    proposal = getattr(text, "proposal", None)
    return proposal.to_json() if proposal is not None else None


def check_token_ids(art, config) -> tuple[list[Finding], np.ndarray | None]:
    """Issues of an indexed proposal's token map, and the ids when they are usable (see the module docstring)."""
    record = proposal_record(art)
    if not record or record.get("domain") != "indexed" or TOKEN_IDS not in art.bindings:
        return [], None  # no token map to read; a missing binding is coverage's finding
    where = f"$.bindings.{TOKEN_IDS}"
    b = art.bindings[TOKEN_IDS]
    objects = [art.object(o) for o in b.object_ids if _has(art, o)]
    not_int = [o for o in objects if not isinstance(o, TensorObject) or o.format not in INTEGER_FORMATS]
    if not_int or not objects:
        fmt = getattr(not_int[0], "format", "a resource") if not_int else "nothing readable"
        return [finding("NINFER_PROPOSAL_TOKEN_IDS", f"{TOKEN_IDS} is {fmt}: token ids are integers "
                      f"({', '.join(INTEGER_FORMATS)})", path=where)], None
    try:
        ids = integer_values(art, b)
    except NinferError as exc:
        return [finding("NINFER_PROPOSAL_TOKEN_IDS", f"{TOKEN_IDS} cannot be read: {exc.message}", path=where)], None
    issues = []
    vocab = config.get("vocab_size")
    if isinstance(vocab, int):
        outside = np.flatnonzero((ids < 0) | (ids >= vocab))
        if outside.size:
            issues.append(finding("NINFER_PROPOSAL_TOKEN_IDS", f"{TOKEN_IDS}: {outside.size} of {ids.size} ids are not "
                                f"text vocabulary rows [0, {vocab}): {_listed(ids, outside)}", path=where,
                                detail={"positions": outside[:50].tolist()}))
    values, first, counts = np.unique(ids, return_index=True, return_counts=True)
    repeated = np.sort(first[counts > 1])
    if repeated.size:
        issues.append(finding("NINFER_PROPOSAL_TOKEN_IDS", f"{TOKEN_IDS}: {repeated.size} ids occur more than once "
                            f"(each token is proposed once): {_listed(ids, repeated)}", path=where,
                            detail={"ids": ids[repeated][:50].tolist()}))
    return issues, (None if issues else ids)


def integer_values(art, binding) -> np.ndarray:
    """The elements of a binding of integer objects, exactly, as int64 (whole object or ordered parts)."""
    segments = ([(binding.object, 0, None)] if binding.object is not None
                else [(p.object, p.begin, p.end) for p in binding.parts or ()])
    out = []
    for oid, begin, end in segments:
        obj = art.object(oid)
        data = art.object_bytes(oid)
        try:
            view = np.frombuffer(data, dtype=INTEGER_FORMATS[obj.format], count=obj.elements)
            out.append(view[begin:end].astype(np.int64))  # a copy: the view goes before the buffer is released
            del view
        finally:
            data.release()
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _has(art, object_id: str) -> bool:
    try:
        art.object(object_id)
    except NinferError:
        return False  # a missing reference is the reader's finding
    return True


def _listed(ids: np.ndarray, positions: np.ndarray) -> str:
    shown = ", ".join(f"[{int(i)}] = {int(ids[i])}" for i in positions[:SHOWN])
    return shown + (" …" if positions.size > SHOWN else "")


def proposal_targets(art, model, ids: np.ndarray | None) -> tuple[list[Target], str | None]:
    """Gate 4/5 targets for ``proposal/head`` (see the module docstring), and a note when none is compared."""
    record = proposal_record(art)
    if not record or HEAD not in art.bindings:
        return [], None
    try:
        head = model.bound.parameter(TEXT_HEAD)
    except KeyError:
        return [], f"the source's mapping binds no {TEXT_HEAD}"
    hidden = head.shape[-1]
    if record.get("domain") == "indexed":
        if ids is None:
            return [], f"{TOKEN_IDS} unusable (gate 2)"
        return [Target(HEAD, (len(ids), hidden), "text", partial(SourceRows, model.sources, head, model.bound, ids))], None
    shared = art.bindings.get(TEXT_HEAD)
    if shared is not None and shared.to_json() == art.bindings[HEAD].to_json():
        return [], f"bound to the text head's representation: compared as {TEXT_HEAD}"
    return [Target(HEAD, tuple(head.shape), "text", partial(SourceRows, model.sources, head, model.bound))], None
