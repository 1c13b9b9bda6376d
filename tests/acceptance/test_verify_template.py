"""``convert verify`` of an artifact built with ``--template`` (docs/ternary.md §3): text produced from the source,
vision / MTP / frontend borrowed byte-for-byte from a template the project made from an HF checkpoint. The
borrowed objects are compared with the template (explicit ``--template``, else the path provenance records),
not with the source (a GGUF has no vision tower); a borrowed object changed afterwards — rewritten with the
writer, or one byte flipped in place — fails with ``VERIFY_BORROWED_MISMATCH``."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from converters.acceptance.gates.verify import verify
from converters.cli import main
from converters.pipeline.convert import convert
from ninfer_core import open_artifact
from tests.support.gates import rewrite
from tinymodels import bonsai, vision

IDENTICAL = "borrowed, identical to template"
# The smallest rotated text model: every matmul input is one 1024 Hadamard block (4 heads of 256, 8 value heads
# of 128, intermediate 1024). What these tests check is the borrowed objects, which do not depend on the widths.
SMALL = {"intermediate_size": 1024, "num_attention_heads": 4, "linear_num_value_heads": 8}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("vt")
    cfg = bonsai.rotated_config(**SMALL)
    bonsai.write_gguf(d / "rot.gguf", cfg, rotated=True)
    text = bonsai.rotated_config(mtp_num_hidden_layers=1, **SMALL)
    vision.write_hf_dir(d / "hf", text, vision.config(out_hidden_size=text["hidden_size"]))
    convert(d / "hf", d / "tpl.ninfer", recipe="groupwise-int", components=["text", "vision", "mtp"], workers=1)
    convert(d / "rot.gguf", d / "out.ninfer", recipe="ternary", template=d / "tpl.ninfer", workers=1)
    return d


def borrowed_rows(report, gate: int) -> dict[str, str]:
    ev = report.gate(gate).evidence.get("borrowed", {})
    return {r["object"]: r["status"] for r in ev.get("per_object", [])}


@pytest.mark.parametrize("explicit", [False, True])
def test_template_build_passes_sweep(built, explicit):
    d = built
    r = verify(d / "out.ninfer", d / "rot.gguf", sweep=True, template=d / "tpl.ninfer" if explicit else None)
    assert r.result == "pass", json.dumps(r.to_json()["gates"], default=str)[:3000]
    with open_artifact(d / "out.ninfer") as art:
        lent = {oid for oid, e in art.provenance["objects"].items() if "borrowed_from" in e}
        kinds = {o.id: o.kind for o in art.objects}
    assert {o.split("/", 1)[0] for o in lent} == {"vision", "mtp", "frontend"}
    g4, g6 = borrowed_rows(r, 4), borrowed_rows(r, 6)
    assert set(g4) == {o for o in lent if kinds[o] == "tensor"} and set(g4.values()) == {IDENTICAL}
    assert set(g6) == {o for o in lent if kinds[o] == "resource"} and set(g6.values()) == {IDENTICAL}
    assert set(r.gate(4).evidence["borrowed"]["components"]) == {"vision", "mtp"}
    checked = {c["name"] for c in r.gate(4).evidence["per_parameter"]}
    assert checked and all(n.startswith("text/") for n in checked)  # the source is asked for text only
    assert r.gate(2).evidence["by_component"].keys() >= {"text", "vision", "mtp"}  # borrowed bindings covered


def test_cli_with_template(built, capsys):
    d = built
    rc = main(["verify", str(d / "out.ninfer"), "--source", str(d / "rot.gguf"), "--template", str(d / "tpl.ninfer"),
               "--sweep", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["result"] == "pass"
    assert out["gates"][3]["evidence"]["borrowed"]["identical"] == out["gates"][3]["evidence"]["borrowed"]["objects"] > 0


def test_rewritten_borrowed_tensor_fails(built, tmp_path):
    d = built
    bad = rewrite(d / "out.ninfer", tmp_path / "bad.ninfer", edit={"vision/patch_embedding": lambda x: x[::-1] * 1.0})
    for template in (None, d / "tpl.ninfer"):
        r = verify(bad, d / "rot.gguf", template=template)
        assert r.result == "fail"
        assert "VERIFY_BORROWED_MISMATCH" in r.codes(4)
        assert borrowed_rows(r, 4)["vision/patch_embedding"] == "differs"
        others = {k: v for k, v in borrowed_rows(r, 4).items() if k != "vision/patch_embedding"}
        assert set(others.values()) == {IDENTICAL}


def test_flipped_byte_in_place_fails(built, tmp_path):
    d = built
    out = tmp_path / "flip.ninfer"
    shutil.copy(d / "out.ninfer", out)
    with open_artifact(out) as art:
        oid = next(o.id for o in art.objects if o.id.startswith("mtp/") and o.kind == "tensor"
                   and "borrowed_from" in art.provenance["objects"][o.id])
        rec = art.object(oid)
        pos = art.files[0].payload_start + rec.offset + 1
    with open(out, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0x10]))
    r = verify(out, d / "rot.gguf", template=d / "tpl.ninfer")
    assert r.result == "fail" and borrowed_rows(r, 4)[oid] == "differs"
    issue = next(i for i in r.gate(4).issues if i.code == "VERIFY_BORROWED_MISMATCH")
    assert issue.path == oid and issue.detail["first_difference"] == 1


def test_changed_borrowed_resource_fails_gate_6(built, tmp_path):
    d = built
    with open_artifact(d / "out.ninfer") as art:
        oid = next(o.id for o in art.objects if o.kind == "resource" and o.id.startswith("frontend/"))
        data = bytearray(art.resource(oid))
    data[0] ^= 0x01
    bad = rewrite(d / "out.ninfer", tmp_path / "res.ninfer", resources={oid: bytes(data)})
    r = verify(bad, d / "rot.gguf")  # against the template path provenance records
    assert "VERIFY_BORROWED_MISMATCH" in r.codes(6) and borrowed_rows(r, 6)[oid] == "differs"


def test_missing_template_is_unchecked_not_passed(built, tmp_path):
    d = built
    tpl = tmp_path / "tpl.ninfer"
    out = tmp_path / "out.ninfer"
    shutil.copy(d / "tpl.ninfer", tpl)
    convert(d / "rot.gguf", out, recipe="ternary", template=tpl, workers=1)
    tpl.unlink()
    r = verify(out, d / "rot.gguf")
    assert r.result == "fail" and "VERIFY_BORROWED_UNCHECKED" in r.codes(4)
    assert verify(out, d / "rot.gguf", template=d / "tpl.ninfer").result == "pass"  # the same bytes elsewhere


def test_sample_bytes_really_differ(built):
    """The fixture's borrowed objects are not trivially equal to anything: the template's patch embedding
    is not constant, so the reversed rewrite above changes bytes."""
    with open_artifact(built / "tpl.ninfer") as t:
        x = t.binding_array("vision/patch_embedding")
        assert not np.array_equal(x.ravel(), x.ravel()[::-1])
