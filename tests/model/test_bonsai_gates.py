"""``convert verify --source --sweep`` on Ternary Bonsai artifacts : every
ternary/binary GGML type and the Hadamard-rotated variant (``prism.hadamard.*``) converted with recipe
``ternary`` pass all seven gates; the source side of the gates un-rotates a rotated source to the
generator's own float reference; wrong Hadamard signs on one input width (rewritten with the writer) fail
gates 4 and 5 on exactly the matrices of that width."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.acceptance.gates.decode import ArtifactRows, SourceRows
from converters.acceptance.gates.verify import verify
from converters.cli import main
from converters.model.engine import open_model
from converters.pipeline.convert import convert
from ninfer_core import codecs, open_artifact
from tests.support.gates import rewrite
from tinymodels import bonsai

# value heads of 128: the tiled ssm_out columns move in whole t2 groups (as in test_bonsai_types)
CFG = bonsai.config(linear_value_head_dim=128)
CFG_ROT = bonsai.rotated_config(intermediate_size=1024)  # input widths 1024 and 2048
TYPES = ("PTQ1_0", "PQ2_0", "Q2_0_LEGACY", "Q1_0", "TQ1_0", "TQ2_0")
ALL_GATES = [(n, "pass") for n in range(1, 8)]


def write_bonsai(d, name: str) -> tuple:
    """(gguf, artifact) of one fixture: a ternary type, or ``rotated`` (PTQ1_0 with ``prism.hadamard.*``)."""
    gguf = d / f"{name}.gguf"
    if name == "rotated":
        bonsai.write_gguf(gguf, CFG_ROT, rotated=True)
    else:
        bonsai.write_gguf(gguf, CFG, ternary_type=name)
    out = d / f"{name}.ninfer"
    convert(gguf, out, recipe="ternary", workers=1)
    return gguf, out


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("bonsai-gates")
    return {name: write_bonsai(d, name) for name in (*TYPES, "rotated")}


def failing_paths(report, gate: int) -> set[str]:
    return {i.path for i in report.gate(gate).issues if i.severity == "ERROR"}


@pytest.mark.parametrize("t", TYPES)
def test_every_ternary_type_passes_every_gate_on_every_layer(made, t):
    gguf, out = made[t]
    r = verify(out, gguf, sweep=True)
    assert [(g.number, g.status) for g in r.gates] == ALL_GATES, r.to_json()
    assert r.layers == list(range(CFG["num_hidden_layers"]))
    rows = {c["name"]: c for c in r.gate(4).evidence["per_parameter"]}
    # the ternary matrices are compared element for element (provenance: exact), not within a tolerance
    for name in ("text/output_head", "text/layers/0/gdn/value", "text/layers/3/attention/output",
                 "text/layers/2/mlp/down"):
        assert rows[name]["exactness"] in ("bit-exact", "value-exact") and rows[name]["max_abs"] == 0, rows[name]
    golden = r.gate(7).evidence  # every text object exact: the logits must agree to 1e-9
    assert golden["precision_class"] == "exact" and golden["top1_agreement"] == 1.0


def test_rotated_source_passes_every_gate_through_the_cli(made, capsys):
    gguf, out = made["rotated"]
    assert main(["verify", str(out), "--source", str(gguf), "--sweep", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["result"] == "pass" and [(g["gate"], g["status"]) for g in r["gates"]] == ALL_GATES
    rows = {c["name"]: c for c in r["gates"][3]["evidence"]["per_parameter"]}
    rotated = [n for n, c in rows.items() if n.endswith(("/query", "/mlp/down", "/gdn/output", "output_head"))]
    assert len(rotated) == 1 + 2 * CFG_ROT["num_hidden_layers"] + 1  # head; per layer down, query; one gdn/output
    for name in rotated:  # exact after both sides are un-rotated, not merely close
        assert rows[name]["exactness"] in ("bit-exact", "value-exact") and rows[name]["max_abs"] == 0, rows[name]
    golden = r["gates"][6]["evidence"]
    assert golden["top1_agreement"] == 1.0 and golden["cosine"] > 0.9999


def test_source_side_of_a_rotated_source_is_the_generators_unrotated_reference(made):
    """``SourceRows`` gives the HF values — the generator's ``s ⊙ H(w')`` in float64, rounded once — and the
    artifact side decodes to the same values, row block by row block."""
    gguf, out = made["rotated"]
    ref = bonsai.logical_parameters(CFG_ROT, rotated=True)
    stored = bonsai.stored_parameters(CFG_ROT, rotated=True)
    names = ("text/output_head", "text/token_embedding", "text/layers/0/gdn/value", "text/layers/0/gdn/output",
             "text/layers/1/attention/query", "text/layers/1/mlp/down", "text/layers/0/mlp/gate")
    with open_model(gguf) as model, open_artifact(out) as art:
        for name in names:
            p = model.bound.parameter(name)
            src = SourceRows(model.sources, p, model.bound)
            got = np.concatenate([src.rows(a, min(a + 300, src.n_rows)) for a in range(0, src.n_rows, 300)])
            assert np.array_equal(got.reshape(ref[name].shape), ref[name]), name
            assert not np.allclose(ref[name], stored[name]), name  # the rotation is really undone
            if name != "text/token_embedding":  # stored un-rotated in q8: measured, not exact
                assert np.array_equal(ArtifactRows(art, name, p.shape).array(), ref[name]), name


def test_wrong_signs_on_one_width_fail_values_and_order_of_that_width(made, tmp_path):
    gguf, out = made["rotated"]
    widths = [int(w) for w in bonsai.rotation_metadata(CFG_ROT)["prism.hadamard.sign_widths"][0]]
    assert widths == [1024, 2048]
    lo, hi = widths[0], widths[0] + widths[1]  # the 2048-wide vector
    wrong = bonsai.hadamard_signs(CFG_ROT, seed=1)[2048]  # another file's signs for that width

    def swap_in(s: np.ndarray) -> np.ndarray:
        s = s.copy()
        s[lo:hi] = wrong
        return s

    bad = rewrite(out, tmp_path / "signs.ninfer", edit={"text/hadamard_signs": swap_in})
    r = verify(bad, gguf, sweep=True)
    assert r.result == "fail"
    assert r.gate(3).status == "pass"  # still ±1: statically fine, wrong against the source
    with open_model(gguf) as model:
        rot = set(bonsai.rotation_metadata(CFG_ROT)["prism.hadamard.weight_names"][0])
        of_width = {p.name for p in model.bound.parameters
                    if p.source is not None and p.source.tensor in rot and p.shape[-1] == hi - lo}
    assert of_width == {"text/layers/0/gdn/output", "text/layers/1/attention/output"}
    assert failing_paths(r, 4) == of_width
    assert {i.code for i in r.gate(4).issues} == {"VERIFY_VALUE_NOT_EXACT"}
    assert failing_paths(r, 5) == of_width  # rows/heads of those matrices no longer match the source's
    assert {i.code for i in r.gate(7).issues} == {"VERIFY_GOLDEN_LOGITS"}


@pytest.mark.parametrize("t", ("PTQ1_0", "PQ2_0", "Q1_0"))
def test_source_side_reads_prismml_blocks_itself(made, t, monkeypatch):
    """The source reader decodes PrismML types by transcoding into t2 — the path that wrote the artifact. The
    gates read code × d from the blocks instead: with the transcoder disabled they still give the generator's
    values exactly."""
    gguf, _ = made[t]
    ref = bonsai.logical_parameters(CFG, ternary_type=t)

    def no_transcoder(*a, **kw):
        raise AssertionError("the gates' source side must not go through the transcoder")

    monkeypatch.setattr(codecs, "transcode_ggml", no_transcoder)
    with open_model(gguf) as model:
        for name in ("text/output_head", "text/layers/0/gdn/value", "text/layers/3/attention/gate"):
            p = model.bound.parameter(name)
            got = SourceRows(model.sources, p, model.bound).array(p.shape)
            assert np.array_equal(got, ref[name]), name


def test_one_changed_ternary_code_fails_the_exact_values(made, tmp_path):
    gguf, out = made["PTQ1_0"]

    def flip_one(x: np.ndarray) -> np.ndarray:
        x = x.copy()
        nz = np.flatnonzero(x[7])
        x[7, nz[3]] = -x[7, nz[3]]  # one code of row 7 negated: same group multiplier, same byte count
        return x

    bad = rewrite(out, tmp_path / "code.ninfer", edit={"text/layers/2/mlp/down": flip_one})
    r = verify(bad, gguf, layers=[2])
    assert failing_paths(r, 4) == {"text/layers/2/mlp/down"}
    issue = next(i for i in r.gate(4).issues if i.code == "VERIFY_VALUE_NOT_EXACT")
    assert issue.detail["differing"] == 1
    assert failing_paths(r, 5) == {"text/layers/2/mlp/down"}  # row 7 no longer equals source row 7
