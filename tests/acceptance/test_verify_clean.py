"""``convert verify`` on clean artifacts of every kind the tinymodels make, without a source, on minimal
artifacts, and through the CLI; the gates' building blocks against independent references."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.acceptance.gates.decode import ArtifactRows, hadamard_unrotate
from converters.acceptance.gates.verify import sample_layers, verify
from converters.cli import main
from converters.mapping import transforms as T
from ninfer_core import open_artifact
from tests.support.gates import CFG35, converted, write_sources
from tinymodels import qwen3, qwen35


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return write_sources(tmp_path_factory.mktemp("sources"))


@pytest.fixture(scope="module")
def arts(src, tmp_path_factory):
    d = tmp_path_factory.mktemp("arts")
    return {
        "q35_gguf": converted(src["q35_gguf"], d / "q35g.ninfer", "groupwise-int"),
        "q35_hf": converted(src["q35_hf"], d / "q35h.ninfer", "groupwise-int"),
        "q3_gguf": converted(src["q3_gguf"], d / "q3g.ninfer", "groupwise-int"),
        "q3_hf": converted(src["q3_hf"], d / "q3h.ninfer", "bf16"),
        "layer3": converted(src["q35_gguf"], d / "layer3.ninfer", "groupwise-int", only_layer=3),
    }


@pytest.mark.parametrize("name", ["q35_hf", "q3_gguf", "q3_hf"])
def test_clean_artifacts_from_gguf_and_hf_pass_every_gate_on_every_layer(src, arts, name):
    r = verify(arts[name], src[name], sweep=True)
    assert [(g.number, g.status) for g in r.gates] == [(n, "pass") for n in range(1, 8)]
    cfg = CFG35 if name.startswith("q35") else qwen3.config()
    assert r.layers == list(range(cfg["num_hidden_layers"]))
    assert r.gate(4).evidence["layers_bound"] == f"{cfg['num_hidden_layers']} of {cfg['num_hidden_layers']}"


def test_decoded_values_equal_the_generator_reference(arts):
    """The artifact side of the gates decodes to tinymodels' float reference (independent of the engine)."""
    ref = qwen35.logical_parameters(CFG35)
    with open_artifact(arts["q35_hf"]) as art:
        for name in ("text/layers/0/gdn/value", "text/layers/3/attention/gate", "text/layers/0/gdn/a_log"):
            got = ArtifactRows(art, name, ref[name].shape).array()
            want = ref[name].astype(np.float32)
            cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
            assert cos > 0.99, name


def test_without_source_the_source_gates_are_skipped_not_passed(arts):
    r = verify(arts["q35_gguf"])
    assert r.result == "incomplete"
    for n in (4, 5, 7):
        g = r.gate(n)
        assert g.status == "skipped" and g.skipped == "no source"
        assert g.to_dict()["reason"] == "skipped: no source"
        assert [i.code for i in g.issues] == ["VERIFY_SKIPPED_NO_SOURCE"]
    assert r.gate(6).status == "skipped" and "4 resource(s) match" in r.gate(6).skipped
    assert [r.gate(n).status for n in (1, 2, 3)] == ["pass"] * 3


def test_minimal_layer3_artifact_is_judged_on_its_layer_and_fails_a_sweep(src, arts):
    # docs/acceptance.md §Minimal artifacts: layer 3's parameters required and compared, no forward pass
    r = verify(arts["layer3"], src["q35_gguf"])
    assert r.result == "incomplete" and r.layers == [3]
    assert [r.gate(n).status for n in range(1, 7)] == ["pass"] * 6
    assert "NINFER_BINDING_MISSING" not in r.codes(2)
    assert r.gate(4).evidence["layers_bound"] == "1 of 8" and r.gate(4).evidence["parameters"] > 0
    assert r.gate(7).status == "skipped" and "minimal artifact of layer 3" in r.gate(7).skipped
    swept = verify(arts["layer3"], src["q35_gguf"], sweep=True)  # a sweep asks for every layer
    assert swept.result == "fail" and swept.layers == [3] and swept.codes(4) == {"VERIFY_SWEEP_PARTIAL"}


def test_layers_are_sampled_by_kind_unless_asked(src, arts):
    kinds = ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"]
    assert sample_layers(kinds) == [0, 3, 7]
    assert verify(arts["q35_gguf"], src["q35_gguf"]).layers == [0, 3, 7]
    r = verify(arts["q35_gguf"], src["q35_gguf"], layers=[1])
    assert r.layers == [1]
    checked = {c["name"] for c in r.gate(4).evidence["per_parameter"]}
    assert "text/layers/1/gdn/value" in checked and not any("/layers/0/" in n for n in checked)


def test_a_different_source_is_named_and_its_values_fail(src, arts):
    r = verify(arts["q35_gguf"], src["q35_hf"])  # same model, other checkpoint: bf16 values, not Q8_0
    assert "VERIFY_SOURCE_MISMATCH" in r.codes(4)
    assert r.result == "fail"


def test_fast_hadamard_unrotation_agrees_with_the_transform(rng=np.random.default_rng(5)):
    w = rng.standard_normal((7, 2048)).astype(np.float32)
    s = T.hadamard_signs(2048, 11)
    stored = T.hadamard_rotate(w, s).astype(np.float32)
    assert np.allclose(hadamard_unrotate(stored, s), T.hadamard_unrotate(stored, s), atol=1e-6)
    assert np.allclose(hadamard_unrotate(stored, s), w, atol=1e-5)


def test_cli_exit_codes_and_json(src, arts, capsys):
    assert main(["verify", str(arts["q35_gguf"]), "--source", str(src["q35_gguf"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"] == "pass" and [g["status"] for g in doc["gates"]] == ["pass"] * 7
    assert main(["verify", str(arts["q35_gguf"])]) == 0
    out = capsys.readouterr().out
    assert "skipped: no source" in out and "VERIFY: INCOMPLETE" in out
    assert main(["verify", str(arts["layer3"]), "--source", str(src["q35_gguf"])]) == 0
    assert "VERIFY: INCOMPLETE" in capsys.readouterr().out
    assert main(["verify", str(arts["layer3"]), "--source", str(src["q35_gguf"]), "--sweep"]) == 1
    assert "VERIFY: FAIL (--sweep: 1/8 text layers bound)" in capsys.readouterr().out
    assert main(["verify", str(arts["q35_gguf"]), "--sweep", "--layers", "0"]) == 2
    assert main(["verify", str(arts["q35_gguf"]), "--layers", "0,x"]) == 2
    assert main(["verify", str(arts["q35_gguf"]) + ".missing"]) == 1


def _moe(d):
    from tinymodels import qwen35_moe

    path = d / "moe.gguf"
    qwen35_moe.write_gguf(path, qwen35_moe.config(), matrix_type="Q8_0")
    return path, "groupwise-int", ("text",)


@pytest.mark.parametrize("make", [_moe])
def test_other_architectures_and_components(tmp_path, make):
    """MoE expert banks: coverage from the source's mapping, values and order by parts of banks; the golden
    forward routes tokens through the experts (tests/test_golden_moe*.py)."""
    from converters.acceptance.validate_ninfer import validate_ninfer

    source, recipe, components = make(tmp_path)
    art = converted(source, tmp_path / "a.ninfer", recipe, components=components)
    r = verify(art, source, sweep=True)
    assert [g.status for g in r.gates] == ["pass"] * 7 and r.result == "pass"
    assert r.gate(7).evidence["precision_class"] == "4-bit"
    v = validate_ninfer(art)
    assert v.verdict == "pass"
    if len(components) > 1:  # without the mapping, a component's parameter list is not judged statically
        assert v.by_code("NINFER_COVERAGE_UNCHECKED")


def test_a_file_that_is_no_artifact_fails_structure_and_skips_the_rest(src, tmp_path):
    junk = tmp_path / "junk.ninfer"
    junk.write_bytes(bytes(range(256)) * 20)
    r = verify(junk, src["q35_gguf"])
    assert r.gate(1).status == "fail" and r.codes(1) == {"NINFER_FRAMING"}
    assert all(r.gate(n).status == "skipped" and "cannot be opened" in r.gate(n).skipped for n in range(2, 8))
    assert r.result == "fail"
