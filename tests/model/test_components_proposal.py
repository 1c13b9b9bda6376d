"""``text.proposal`` (container §9.2): ``full`` binds the text head's representation; ``indexed`` holds the
``rows`` most frequent tokens of a token-count file (:mod:`tinymodels.token_counts`, whose ``shortlist`` is
the reference order) as ``proposal/token_ids`` (int32) and the head's rows in that order as
``proposal/head``, an object of its own. Count files are parsed strictly."""

from __future__ import annotations

import os

import numpy as np
import pytest

from converters.errors import ConversionError, ConverterError
from converters.model.engine import logical_array
from converters.pipeline.convert import convert
from converters.pipeline.proposal import ProposalRequest, proposal_parameters, read_token_counts, shortlist
from ninfer_core import open_artifact, validate
from tests.support.components import check_separation
from tinymodels import qwen35, token_counts

CFG = qwen35.config()
V, H = CFG["vocab_size"], CFG["hidden_size"]
COUNTS = token_counts.token_counts()


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("proposal")
    qwen35.write_gguf(d / "q8.gguf", CFG, matrix_type="Q8_0")
    qwen35.write_gguf(d / "tied.gguf", qwen35.config(tie_word_embeddings=True), matrix_type="F32")
    token_counts.write_token_counts(d / "counts.tsv", COUNTS)
    token_counts.write_token_counts(d / "counts.json", COUNTS, fmt="json", vocab_size=V)
    return d


@pytest.mark.parametrize("counts, rows", [("counts.tsv", 64), ("counts.json", 200)])
def test_indexed_shortlist_rows_of_the_head(sources, tmp_path, counts, rows):
    out = tmp_path / "p.ninfer"
    convert(sources / "q8.gguf", out, recipe="groupwise-int", workers=1,
            proposal=ProposalRequest("indexed", sources / counts, rows))
    assert validate(out) == []
    with open_artifact(out) as a:
        assert a.components["text"].to_json()["proposal"] == {"domain": "indexed", "rows": rows}
        ids = a.binding_array("proposal/token_ids").astype(np.int64)
        assert a.object("proposal/token_ids").format == "int32"
        assert ids.tolist() == token_counts.shortlist(COUNTS, rows)
        head = logical_array(a, "text/output_head", (V, H))
        got = logical_array(a, "proposal/head", (rows, H))
        np.testing.assert_array_equal(got, head[ids])  # Q8_0 rows transcoded exactly, in shortlist order
        assert a.object("proposal/head").format == a.object("text/output_head").format == "q8_g32_fp16"
        assert a.provenance["objects"]["proposal/head"]["exactness"] == "bit-exact"
        assert ("proposal/head", "text/final_hidden") in {(u.parameter, u.input) for u in a.uses}
        check_separation(a)


def test_proposal_parameters_follow_the_record():
    assert proposal_parameters(CFG, None) == {}
    assert proposal_parameters(CFG, {"domain": "full"}) == {"proposal/head": (V, H)}
    assert proposal_parameters(CFG, {"domain": "indexed", "rows": 7}) == {"proposal/head": (7, H),
                                                                         "proposal/token_ids": (7,)}


def test_full_binds_the_text_head(sources, tmp_path):
    out = tmp_path / "f.ninfer"
    convert(sources / "q8.gguf", out, recipe="bf16", workers=1, proposal=ProposalRequest("full"))
    with open_artifact(out) as a:
        assert a.components["text"].to_json()["proposal"] == {"domain": "full"}
        assert a.bindings["proposal/head"].to_json() == {"object": "text/output_head"}
        assert "proposal/token_ids" not in a.bindings
        assert not [o.id for o in a.objects if o.id.startswith("proposal/")]


def test_tied_head_rows_come_from_the_embedding(sources, tmp_path):
    out = tmp_path / "t.ninfer"
    convert(sources / "tied.gguf", out, recipe="exact", workers=1,
            proposal=ProposalRequest("indexed", sources / "counts.tsv", 16))
    with open_artifact(out) as a:
        ids = a.binding_array("proposal/token_ids").astype(np.int64)
        emb = a.binding_array("text/token_embedding").reshape(V, H)
        np.testing.assert_array_equal(a.binding_array("proposal/head").reshape(16, H), emb[ids])


def test_rows_beyond_the_counted_tokens_follow_by_id():
    counts = np.array([0, 5, 0, 9, 5], dtype=np.int64)
    assert shortlist(counts, 5).tolist() == [3, 1, 4, 0, 2]
    with pytest.raises(ConversionError):
        shortlist(counts, 6)


@pytest.mark.parametrize("text, rule", [
    ("token_id\tcount\n1\t5\n1\t6\n", "counts_duplicate"),
    ("token_id\tcount\n512\t5\n", "counts_id"),
    ("token_id\tcount\n3\t-1\n", "counts_value"),
    ("token_id\tcount\n3 5\n", "counts_format"),
    ("token_id\tcount\nx\t5\n", "counts_format"),
    ('{"vocab_size": 100, "counts": {"1": 2}}', "counts_vocab"),
    ('{"counts": [1, 2]}', "counts_format"),
    ('{"counts": {"1": 2.5}}', "counts_format"),
    ("{not json", "counts_format"),
    ('{"counts": ' * 50000, "counts_format"),
    ('{"counts": {"1": 1, "1": 2}}', "counts_format"),
    ("token_id\tcount\n1\t" + "9" * 5000 + "\n", "counts_format"),
    ("token_id\tcount\n1\t99999999999999999999\n", "counts_format"),
    ('{"counts": {"1": 99999999999999999999}}', "counts_value"),
])
def test_bad_count_files(tmp_path, text, rule):
    path = tmp_path / "c.txt"
    path.write_text(text)
    with pytest.raises(ConversionError) as info:
        read_token_counts(path, V)
    assert info.value.rule == rule and info.value.file == str(path)


def test_count_files_agree(sources):
    tsv, js = (read_token_counts(sources / f, V) for f in ("counts.tsv", "counts.json"))
    np.testing.assert_array_equal(tsv, js)
    assert tsv.tolist() == [COUNTS.get(i, 0) for i in range(V)]


@pytest.mark.parametrize("args, rule", [
    (("indexed", None, 8), "proposal_flags"),
    (("indexed", "c.tsv", None), "proposal_flags"),
    (("full", "c.tsv", None), "proposal_flags"),
    ((None, None, 8), "proposal_flags"),
    (("sparse", None, None), "proposal_domain"),
    (("indexed", "c.tsv", 0), "proposal_rows"),
])
def test_flag_combinations(args, rule):
    with pytest.raises(ConversionError) as info:
        ProposalRequest.parse(*args)
    assert info.value.rule == rule
    assert ProposalRequest.parse(None, None, None) is None


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_count_file_must_be_a_regular_file(tmp_path, special):
    """A FIFO would block and /dev/zero would stream without end: both are refused before any read."""
    path = tmp_path / "c.txt" if special == "fifo" else special
    if special == "fifo":
        os.mkfifo(path)
    with pytest.raises(ConverterError, match="not a regular file") as info:
        read_token_counts(path, V)
    assert info.value.file == str(path)


def test_a_count_padded_with_any_whitespace_is_read(tmp_path):
    """Found by the fuzz: str.strip() removes U+001F, int() does not — the digits themselves are parsed."""
    path = tmp_path / "c.txt"
    path.write_text("token_id\tcount\n1\t\x1f74\n2\t 3\n")
    assert read_token_counts(path, V)[1:3].tolist() == [74, 3]
