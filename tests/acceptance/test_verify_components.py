"""``convert verify`` and ``convert validate`` on artifacts with components (container §4.2) and a
``text.proposal`` (§9.2): every component the artifact declares is covered by gates 2–6 — vision from the HF
checkpoint and from an mmproj (``--mmproj``), MTP from HF and from GGUF ``blk.{L+i}``, DFlash and DFlash2
drafters (``--drafter``) in the shared and the independent context K/V representation, proposal ``full`` and
``indexed`` — and a seeded defect in each (two rows swapped in one matrix, rewritten with the writer; wrong
proposal token ids) fails the gate meant for it. Without a source, coverage of the components comes from
their mapping files (:mod:`converters.acceptance.gates.required`), checked here to be ``bind``'s list.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.acceptance.gates.contract import expected_from_bound
from converters.acceptance.gates.required import required_parameters
from converters.acceptance.gates.verify import verify
from converters.acceptance.validate_ninfer import validate_ninfer
from converters.cli import main
from converters.model.components import ComponentMissingError
from converters.model.engine import open_model
from converters.pipeline.proposal import ProposalRequest
from ninfer_core import open_artifact
from tests.support.gates import converted, rewrite, swap_blocks
from tinymodels import dflash, qwen35, token_counts, vision

TEXT = qwen35.config(mtp_num_hidden_layers=1)
VCFG = vision.config()
DCFG = {1: dflash.config(1, TEXT), 2: dflash.config(2, TEXT)}
HEAD_DIM = DCFG[2]["head_dim"]


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("component-sources")
    vision.write_hf_dir(d / "vl", TEXT, VCFG)  # text + model.visual.* + mtp.*
    vision.write_mmproj(d / "mmproj.gguf", VCFG, TEXT)
    qwen35.write_gguf(d / "text.gguf", TEXT, matrix_type="Q8_0")  # with blk.8 nextn.* (MTP)
    dflash.write_hf_dir(d / "d1", DCFG[1], version=1)
    dflash.write_hf_dir(d / "d2", DCFG[2], version=2)
    token_counts.write_token_counts(d / "counts.tsv", token_counts.token_counts())
    return d


#: name → (source, conversion options, verify inputs, components)
CASES = {
    "vision_mtp_hf": ("vl", {"recipe": "bf16"}, None, ("text", "vision", "mtp")),
    "vision_mmproj": ("text.gguf", {"recipe": "exact"}, {"mmproj": "mmproj.gguf"}, ("text", "vision")),
    "mtp_gguf": ("text.gguf", {"recipe": "groupwise-int"}, None, ("text", "mtp")),
    "drafters_shared": ("text.gguf", {"recipe": "bf16"}, {"drafter": ["d1", "d2"]}, ("text", "dflash", "dflash2")),
    "drafters_independent": ("text.gguf", {"recipe": "groupwise-int"}, {"drafter": ["d2", "d1"]},
                             ("text", "dflash", "dflash2")),
    "proposal_full": ("text.gguf", {"recipe": "bf16", "proposal": ("full",)}, None, ("text",)),
    "proposal_indexed": ("text.gguf", {"recipe": "groupwise-int", "proposal": ("indexed", "counts.tsv", 64)}, None,
                         ("text",)),
}


def inputs_of(src, case: str) -> dict | None:
    given = CASES[case][2]
    if given is None:
        return None
    return {k: [src / p for p in v] if isinstance(v, list) else src / v for k, v in given.items()}


@pytest.fixture(scope="module")
def arts(src, tmp_path_factory):
    d = tmp_path_factory.mktemp("component-artifacts")
    out = {}
    for name, (source, opts, _, comps) in CASES.items():
        opts = dict(opts)
        if "proposal" in opts:
            domain, *rest = opts.pop("proposal")
            opts["proposal"] = ProposalRequest(domain, src / rest[0], rest[1]) if rest else ProposalRequest(domain)
        out[name] = converted(src / source, d / f"{name}.ninfer", opts.pop("recipe"), components=list(comps),
                              inputs=inputs_of(src, name), **opts)
    return out


def failing(report) -> dict[int, set[str]]:
    return {g.number: {i.code for i in g.issues if i.severity == "ERROR"} for g in report.gates if g.status == "fail"}


@pytest.mark.parametrize("case", list(CASES))
def test_clean_component_artifacts_pass_every_gate_on_a_sweep(src, arts, case):
    r = verify(arts[case], src / CASES[case][0], inputs=inputs_of(src, case), sweep=True)
    assert [g.status for g in r.gates] == ["pass"] * 7, failing(r)
    comps = CASES[case][3]
    g2, g4 = r.gate(2).evidence, r.gate(4).evidence
    with open_artifact(arts[case]) as a:
        assert set(a.components) == set(comps)
        declared = {n.split("/", 1)[0] for n in a.bindings}
    for c in comps[1:]:  # every declared component's parameters are expected, and compared layer by layer
        assert g2["by_component"][c] > 0
        assert g4["components"][c]["parameters"] > 0
        n_layers = {"vision": VCFG["depth"], "mtp": 1, "dflash": DCFG[1]["num_hidden_layers"],
                    "dflash2": DCFG[2]["num_hidden_layers"]}[c]
        assert g4["components"][c]["layers"] == list(range(n_layers))
    checked = {c["name"].split("/", 1)[0] for c in g4["per_parameter"]}
    assert declared - {"proposal"} <= checked
    assert r.gate(7).evidence["covers"].startswith("text")
    if len(comps) > 1 or case.startswith("proposal"):
        assert "text only" in r.gate(7).evidence["covers"]
    if case == "proposal_indexed":
        assert "proposal/head" in {c["name"] for c in g4["per_parameter"]}
        assert g2["by_component"]["proposal"] == 2
    if case == "vision_mmproj":  # the rebuilt processor config compared with the mmproj's own rebuild
        row = next(x for x in r.gate(6).evidence["resources"] if x["component"] == "vision")
        assert row["status"] == "identical" and row["origin"] == "rebuilt"


@pytest.mark.parametrize("case", list(CASES))
def test_without_source_every_component_is_covered_from_its_mapping(arts, case):
    r = verify(arts[case])
    assert r.gate(2).status == "pass" and r.codes(2) == set(), r.gate(2).issues
    sources = r.gate(2).evidence["parameters_from"]
    assert set(CASES[case][3]) <= set(sources)
    v = validate_ninfer(arts[case])
    assert v.verdict in ("pass", "pass_with_warnings")
    assert not v.by_code("NINFER_COVERAGE_UNCHECKED") and not v.by_code("NINFER_BINDING_UNEXPECTED")


@pytest.mark.parametrize("case", ["vision_mtp_hf", "vision_mmproj", "mtp_gguf", "drafters_shared"])
def test_required_parameters_from_the_config_equal_binds_list(src, arts, case):
    source, _, _, comps = CASES[case]
    with open_model(src / source, components=comps, inputs=inputs_of(src, case)) as model:
        bound = expected_from_bound(model.bound)
    with open_artifact(arts[case]) as a:
        text = a.components["text"].config
        for c in comps[1:]:
            got = required_parameters(c, a.components[c].config, text)
            want = {n: e for n, e in bound.items() if e.component == c}
            assert list(got) == list(want) and got == want, c  # names, order, shapes, inputs, layers


@pytest.mark.parametrize("case, oid, path", [
    ("vision_mtp_hf", "vision/layers/1/mlp/up", "vision/layers/1/mlp/up"),
    ("vision_mmproj", "vision/merger/fc1", "vision/merger/fc1"),
    ("vision_mtp_hf", "mtp/fc", "mtp/fc"),
    ("mtp_gguf", "mtp/layers/0/mlp/down", "mtp/layers/0/mlp/down"),
    ("drafters_shared", "dflash2/layers/1/mlp/down", "dflash2/layers/1/mlp/down"),
    ("drafters_independent", "dflash/layers/0/attention/context_key", "dflash/layers/0/attention/context_key"),
])
def test_two_rows_swapped_in_a_component_matrix_fail_values_and_order(src, arts, tmp_path, case, oid, path):
    bad = rewrite(arts[case], tmp_path / "swap.ninfer", edit={oid: lambda x: swap_blocks(x, 2, 5, 1)})
    r = verify(bad, src / CASES[case][0], inputs=inputs_of(src, case), sweep=True)
    fails = failing(r)
    assert set(fails) <= {4, 5, 7} and 5 in fails, fails
    order = [i for i in r.gate(5).issues if i.severity == "ERROR"]
    assert {i.path for i in order} == {path}  # only the edited parameter (the independent context key alone)
    assert {2, 5} <= set(order[0].detail["rows"])
    assert {i.path for i in r.gate(4).issues} <= {path}
    assert r.gate(2).status == "pass" and r.gate(3).status == "pass"  # sizes and codes are all right
    assert verify(bad).gate(2).status == "pass"  # a static check cannot see it


def test_two_heads_swapped_in_a_drafter_key_are_named(src, arts, tmp_path):
    """The drafter's own head geometry (its config's head_dim, KV heads) drives the head probe; the shared
    context key binds the same rows, so it moves with the key."""
    art = arts["drafters_shared"]
    with open_artifact(art) as a:
        key, context = (a.bindings[f"dflash2/layers/2/attention/{k}"].to_json() for k in ("key", "context_key"))
    assert context == key  # §12.5 shared representation
    if "object" in key:
        oid, first = key["object"], 0
    else:
        ((oid, (begin, _)),) = [(p["object"], p["range"]) for p in key["parts"]]
        first = begin // TEXT["hidden_size"] // HEAD_DIM  # the key's first head block in its parent
    bad = rewrite(art, tmp_path / "heads.ninfer", edit={oid: lambda x: swap_blocks(x, first, first + 1, HEAD_DIM)})
    r = verify(bad, src / "text.gguf", inputs=inputs_of(src, "drafters_shared"))  # sampled: layers 0 and 2
    heads = {i.path: i for i in r.gate(5).issues if i.code == "VERIFY_HEAD_ORDER"}
    assert set(heads) == {"dflash2/layers/2/attention/key", "dflash2/layers/2/attention/context_key"}
    assert {(m["head"], m["matches"]) for m in heads["dflash2/layers/2/attention/key"].detail["moved"]} == {(0, 1), (1, 0)}


def test_swapped_proposal_token_ids_fail_the_proposal_head(src, arts, tmp_path):
    bad = rewrite(arts["proposal_indexed"], tmp_path / "ids.ninfer",
                  edit={"proposal/token_ids": lambda x: swap_blocks(x, 3, 7, 1)})
    with open_artifact(bad) as a, open_artifact(arts["proposal_indexed"]) as clean:
        ids, before = (x.binding_array("proposal/token_ids") for x in (a, clean))
        assert ids[3] == before[7] and ids[7] == before[3]
    r = verify(bad, src / "text.gguf")
    assert failing(r).keys() == {4, 5}
    assert [i.path for i in r.gate(4).issues] == ["proposal/head"]
    (order,) = r.gate(5).issues
    assert order.path == "proposal/head" and order.detail["rows"] == [3, 7]
    assert verify(bad).gate(2).status == "pass"  # still a valid token map: only the source can tell


@pytest.mark.parametrize("change, needle", [
    (lambda x: np.concatenate([[512], x[1:]]), "not text vocabulary rows [0, 512): [0] = 512"),
    (lambda x: np.concatenate([x[:5], x[4:5], x[6:]]), "occur more than once"),
])
def test_invalid_token_maps_fail_coverage_statically(src, arts, tmp_path, change, needle):
    bad = rewrite(arts["proposal_indexed"], tmp_path / "map.ninfer", edit={"proposal/token_ids": change})
    for r in (verify(bad), verify(bad, src / "text.gguf")):
        assert failing(r).get(2) == {"NINFER_PROPOSAL_TOKEN_IDS"}
        assert needle in next(i.evidence for i in r.gate(2).issues)
    assert r.gate(4).evidence["components"]["proposal"]["note"] == "proposal/token_ids unusable (gate 2)"
    v = validate_ninfer(bad)
    assert v.verdict == "fail" and v.by_code("NINFER_PROPOSAL_TOKEN_IDS")


def test_missing_component_binding_is_found_without_a_source(arts, tmp_path):
    bad = rewrite(arts["vision_mmproj"], tmp_path / "nobind.ninfer", drop_bindings={"vision/layers/1/attention/qkv"})
    r = verify(bad)
    assert failing(r)[2] >= {"NINFER_BINDING_MISSING"}
    assert "$.bindings.vision/layers/1/attention/qkv" in {i.path for i in r.gate(2).issues}
    v = validate_ninfer(bad)
    assert [f.path for f in v.by_code("NINFER_BINDING_MISSING")] == ["$.bindings.vision/layers/1/attention/qkv"]


def test_a_changed_vision_resource_fails_resources(src, arts, tmp_path):
    rid = "frontend/vision/preprocessor_config.json"
    bad = rewrite(arts["vision_mmproj"], tmp_path / "res.ninfer", resources={rid: b'{"patch_size": 16}\n'})
    r = verify(bad, src / "text.gguf", inputs=inputs_of(src, "vision_mmproj"))
    assert failing(r) == {6: {"VERIFY_RESOURCE_MISMATCH", "NINFER_SUPPLY_RESOURCE_HASH"}}
    assert next(i for i in r.gate(6).issues if i.code == "VERIFY_RESOURCE_MISMATCH").path == rid


def test_component_inputs_are_needed_and_named(src, arts):
    with pytest.raises(ComponentMissingError, match="--mmproj"):
        verify(arts["vision_mmproj"], src / "text.gguf")
    with pytest.raises(ComponentMissingError, match="--drafter"):
        verify(arts["drafters_shared"], src / "text.gguf", inputs={"drafter": [src / "d2"]})


def test_cli_takes_mmproj_and_repeated_drafters(src, arts, capsys):
    argv = ["verify", str(arts["drafters_shared"]), "--source", str(src / "text.gguf"), "--drafter", str(src / "d1"),
            "--drafter", str(src / "d2"), "--sweep", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"] == "pass" and doc["inputs"] == {"drafter": [str(src / "d1"), str(src / "d2")]}
    assert main(["verify", str(arts["vision_mmproj"]), "--source", str(src / "text.gguf"), "--mmproj",
                 str(src / "mmproj.gguf")]) == 0
    out = capsys.readouterr().out
    assert "VERIFY: PASS" in out and "vision: layers [0, 1]" in out
    assert main(["verify", str(arts["vision_mmproj"]), "--source", str(src / "text.gguf")]) == 1
    assert "component vision is not available" in capsys.readouterr().err
    assert main(["verify", str(arts["vision_mmproj"]), "--mmproj", str(src / "mmproj.gguf")]) == 2
