"""Seeded defects, each caught by the ``convert verify`` gate meant for it, with its code.

Every defect is written by rewriting a clean artifact of the tiny Qwen3.5 (``test_gates_support.rewrite``) or by
editing its bytes in place; sizes stay right, so only a gate that compares values and order can see it (seed
003 §5). Gate numbers: 1 structure, 2 coverage, 3 codec validity, 4 values, 5 order probes, 6 resources,
7 golden numerics.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from ninfer_core import open_artifact
from tests.support.gates import CFG35, HEAD_DIM, converted, rewrite, swap_blocks, write_sources

NH = CFG35["num_attention_heads"]
QROWS = NH * HEAD_DIM  # query rows in text/layers/3/attention/query_key (groupwise-int)
VROWS = CFG35["linear_num_value_heads"] * CFG35["linear_value_head_dim"]


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return write_sources(tmp_path_factory.mktemp("sources"))


@pytest.fixture(scope="module")
def clean(src, tmp_path_factory):
    d = tmp_path_factory.mktemp("clean")
    return {
        "gi": converted(src["q35_gguf"], d / "gi.ninfer", "groupwise-int"),
        "bf16": converted(src["q35_gguf"], d / "bf16.ninfer", "bf16"),
        "exact": converted(src["q35_gguf"], d / "exact.ninfer", "exact"),
        "had": converted(src["had_hf"], d / "had.ninfer", src["had_recipe"]),
        "split": converted(src["q35_gguf"], d / "split.ninfer", "groupwise-int", max_file_bytes=400_000),
    }


def failing(report) -> dict[int, set[str]]:
    """Gate number → codes of its ERROR findings, for the gates that fail."""
    return {g.number: {i.code for i in g.issues if i.severity == "ERROR"} for g in report.gates if g.status == "fail"}


def test_clean_artifacts_pass_every_gate(src, clean):
    for name, source in (("gi", "q35_gguf"), ("bf16", "q35_gguf"), ("exact", "q35_gguf"), ("had", "had_hf"),
                         ("split", "q35_gguf")):
        r = verify(clean[name], src[source])
        assert [g.status for g in r.gates] == ["pass"] * 7, (name, failing(r))
        assert r.result == "pass"
        # golden's structure question (docs/acceptance.md §Golden: two questions): every value reads back bit for
        # bit through the stated conventions (GGUF: norms +1, tiled value heads and ssm_out columns, ssm_a, the
        # fused [query | gate]), so the source's forward is the artifact's own and is not run again
        s = r.gate(7).evidence["structure"]
        assert s["second_forward"] is False and s["max_read_back_difference"] == 0.0 and s["cosine"] == 1.0
        assert s["storage"] == ("gguf:qwen35" if source == "q35_gguf" else "hf:qwen35")
        with open_artifact(clean[name]) as a:
            text = {n for n in a.bindings if n.startswith("text/") and n != "text/hadamard_signs"}
        assert s["parameters_read_back"] == len(text)


def test_byte_level_swaps_are_the_order_gates_and_the_costs(src, clean, tmp_path):
    """Heads swapped in the artifact's bytes are the same function on both sides of the structure question (both
    read the same values); gates 4 and 5 locate them and the cost question measures them, from their layer on."""
    bad = rewrite(clean["bf16"], tmp_path / "swap.ninfer",
                  edit={"text/layers/3/attention/query": lambda x: swap_blocks(x, 0, 1, HEAD_DIM)})
    r = verify(bad, src["q35_gguf"])
    assert r.gate(7).evidence["structure"]["cosine"] == 1.0
    assert {4, 5} <= set(failing(r))
    per_layer = {row["layer"]: row["cosine"] for row in r.gate(7).evidence["per_layer"]}
    clean_layers = {row["layer"]: row["cosine"]
                    for row in verify(clean["bf16"], src["q35_gguf"]).gate(7).evidence["per_layer"]}
    assert per_layer[2] == clean_layers[2] and per_layer[3] < clean_layers[3]


def test_two_heads_swapped_in_one_layer_is_an_order_failure(src, clean, tmp_path):
    bad = rewrite(clean["gi"], tmp_path / "swap.ninfer",
                  edit={"text/layers/3/attention/query_key": lambda x: swap_blocks(x, 0, 1, HEAD_DIM)})
    r = verify(bad, src["q35_gguf"])
    assert "VERIFY_HEAD_ORDER" in failing(r)[5]
    moved = next(i for i in r.gate(5).issues if i.code == "VERIFY_HEAD_ORDER")
    assert moved.path == "text/layers/3/attention/query"
    assert {(m["head"], m["matches"]) for m in moved.detail["moved"]} == {(0, 1), (1, 0)}
    assert "VERIFY_VALUE_TOLERANCE" in failing(r)[4]
    assert set(failing(r)) <= {4, 5, 7}  # structure, coverage, codecs and resources are all right


def test_query_and_gate_left_interleaved_is_an_order_failure(src, clean, tmp_path):
    with open_artifact(clean["gi"]) as art:
        qk = art.object_array("text/layers/3/attention/query_key")
        gv = art.object_array("text/layers/3/attention/gate_value")
    heads = [blk for h in range(NH) for blk in (qk[h * HEAD_DIM:(h + 1) * HEAD_DIM], gv[h * HEAD_DIM:(h + 1) * HEAD_DIM])]
    raw = np.concatenate(heads)  # llama.cpp's attn_q: per head [query | gate]
    bad = rewrite(clean["gi"], tmp_path / "interleaved.ninfer", edit={
        "text/layers/3/attention/query_key": lambda x: np.concatenate([raw[:QROWS], x[QROWS:]]),
        "text/layers/3/attention/gate_value": lambda x: np.concatenate([raw[QROWS:], x[QROWS:]]),
    })
    r = verify(bad, src["q35_gguf"])
    order = {i.path for i in r.gate(5).issues if i.code == "VERIFY_HEAD_ORDER"}
    assert order == {"text/layers/3/attention/query", "text/layers/3/attention/gate"}
    query = next(i for i in r.gate(5).issues if i.path == "text/layers/3/attention/query")
    assert {"head": 2, "matches": 1} in query.detail["moved"]  # raw head 2 is query head 1


@pytest.mark.parametrize("oid, change", [
    ("text/layers/0/input_norm", lambda x: x + 1),  # llama.cpp's +1 left in
    ("text/layers/0/gdn/norm", lambda x: x - 1),    # the shift wrongly applied to ssm_norm
])
def test_norm_shift_missing_or_misapplied_is_a_value_failure(src, clean, tmp_path, oid, change):
    bad = rewrite(clean["gi"], tmp_path / "norm.ninfer", edit={oid: change})
    r = verify(bad, src["q35_gguf"])
    assert failing(r)[4] == {"VERIFY_VALUE_NOT_EXACT"}
    assert [i.path for i in r.gate(4).issues] == [oid]
    assert 5 not in failing(r)  # order is right: only the values moved


def test_v_heads_left_tiled_is_an_order_failure(src, clean, tmp_path):
    # 2 key heads x 2 value heads each: grouped (k, r) = [0, 1, 2, 3] -> tiled (r, k) = [0, 2, 1, 3]
    bad = rewrite(clean["gi"], tmp_path / "tiled.ninfer",
                  edit={"text/layers/0/gdn/value_z": lambda x: swap_blocks(x, 1, 2, HEAD_DIM)})
    r = verify(bad, src["q35_gguf"])
    issue = next(i for i in r.gate(5).issues if i.code == "VERIFY_HEAD_ORDER")
    assert issue.path == "text/layers/0/gdn/value"
    assert {(m["head"], m["matches"]) for m in issue.detail["moved"]} == {(1, 2), (2, 1)}


def test_wrong_hadamard_signs_fail_the_values_of_the_rotated_matrices(src, clean, tmp_path):
    bad = rewrite(clean["had"], tmp_path / "signs.ninfer",
                  edit={"text/hadamard_signs": lambda s: np.concatenate([-s[:8], s[8:]])})
    r = verify(bad, src["had_hf"])
    assert "VERIFY_VALUE_TOLERANCE" in failing(r)[4]
    assert all(i.path.endswith("/mlp/down") for i in r.gate(4).issues)
    assert 3 not in failing(r)  # still +-1: statically fine, wrong against the source


def test_hadamard_signs_that_are_not_plus_minus_one_fail_codec_validity(src, clean, tmp_path):
    bad = rewrite(clean["had"], tmp_path / "half.ninfer",
                  edit={"text/hadamard_signs": lambda s: np.concatenate([s[:5], [0.5], s[6:]])})
    r = verify(bad, src["had_hf"])
    assert "NINFER_AUX_HADAMARD" in failing(r)[3]


def test_truncated_part_is_a_structure_failure(src, clean, tmp_path):
    d = tmp_path / "t"
    shutil.copytree(clean["split"].parent, d, ignore=shutil.ignore_patterns("[!s]*"))
    part = d / "split.ninfer.part-0001"
    with open(part, "r+b") as fh:
        fh.truncate(part.stat().st_size - 100)
    r = verify(d / "split.ninfer", src["q35_gguf"])
    assert "NINFER_PART_SIZE" in failing(r)[1]
    assert r.result == "fail"


def test_foreign_artifact_id_in_a_part_is_a_structure_failure(src, clean, tmp_path):
    d = tmp_path / "f"
    shutil.copytree(clean["split"].parent, d, ignore=shutil.ignore_patterns("[!s]*"))
    with open(d / "split.ninfer.part-0002", "r+b") as fh:
        fh.seek(16)  # part header: magic (8), index (8), artifact_id (16) — container §3.2
        fh.write(bytes(range(16)))
    r = verify(d / "split.ninfer", src["q35_gguf"])
    assert "NINFER_PART_FOREIGN" in failing(r)[1]


def test_missing_binding_is_a_coverage_failure(src, clean, tmp_path):
    bad = rewrite(clean["gi"], tmp_path / "nobind.ninfer", drop_bindings={"text/layers/3/attention/key"})
    r = verify(bad, src["q35_gguf"])
    assert failing(r)[2] == {"NINFER_BINDING_MISSING"}
    assert [i.path for i in r.gate(2).issues] == ["$.bindings.text/layers/3/attention/key"]
    assert r.gate(7).status == "skipped"  # the forward pass needs every parameter


def test_extra_unconsumed_object_is_a_coverage_failure(src, clean, tmp_path):
    bad = rewrite(clean["gi"], tmp_path / "extra.ninfer", extra={"text/layers/3/attention/extra": np.ones(4)})
    r = verify(bad, src["q35_gguf"])
    assert failing(r) == {2: {"NINFER_OBJECT_UNCONSUMED"}}
    assert "text/layers/3/attention/extra" in r.gate(2).issues[0].evidence


def test_changed_resource_is_a_resources_failure(src, clean, tmp_path):
    bad = rewrite(clean["gi"], tmp_path / "res.ninfer",
                  resources={"frontend/chat_template.jinja": b"{{ messages }}\n"})
    r = verify(bad, src["q35_gguf"])
    assert failing(r) == {6: {"VERIFY_RESOURCE_MISMATCH", "NINFER_SUPPLY_RESOURCE_HASH"}}
    no_source = verify(bad)  # the recorded sha256 still catches it without the source
    assert no_source.gate(6).status == "fail" and no_source.codes(6) == {"NINFER_SUPPLY_RESOURCE_HASH"}


@pytest.mark.parametrize("recipe, oid", [("exact", "text/layers/3/attention/query"),
                                         ("bf16", "text/layers/3/attention/query")])
def test_golden_numerics_catch_a_swapped_head(src, clean, tmp_path, recipe, oid):
    bad = rewrite(clean[recipe], tmp_path / "golden.ninfer", edit={oid: lambda x: swap_blocks(x, 0, 1, HEAD_DIM)})
    r = verify(bad, src["q35_gguf"])
    assert failing(r)[7] == {"VERIFY_GOLDEN_LOGITS"}
    ev = r.gate(7).evidence
    assert ev["precision_class"] == ("exact" if recipe == "exact" else "16-bit")
    assert ev["cosine"] < ev["thresholds"]["cosine"]
    clean_ev = verify(clean[recipe], src["q35_gguf"]).gate(7).evidence
    assert clean_ev["cosine"] >= ev["thresholds"]["cosine"] and clean_ev["top1_agreement"] == 1.0
