"""Components from the command line: ``--components``, ``--mmproj``, ``--drafter``, ``--proposal*`` on
``convert gguf2ninfer`` / ``st2ninfer``; a missing component is one line on stderr naming it, exit 1,
nothing written. And the template the ternary packer borrows from (docs/ternary.md §3): an HF checkpoint with
vision and MTP converted with ``groupwise-int`` serves as ``--template`` of a text-only conversion,
which borrows the vision and MTP objects with their bindings, uses and component records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from converters.cli import main
from ninfer_core import open_artifact, validate
from tinymodels import dflash, qwen35, token_counts, vision

TEXT = qwen35.config(mtp_num_hidden_layers=1)


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    vision.write_hf_dir(d / "vl", TEXT, vision.config())
    vision.write_mmproj(d / "mmproj.gguf", vision.config(), TEXT)
    qwen35.write_gguf(d / "m.gguf", TEXT, matrix_type="Q8_0")
    qwen35.write_gguf(d / "plain.gguf", qwen35.config(), matrix_type="Q8_0")
    dflash.write_hf_dir(d / "d2", dflash.config(2, TEXT), version=2)
    token_counts.write_token_counts(d / "counts.tsv")
    return d


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_every_component_flag(src, tmp_path, capsys):
    out = tmp_path / "all.ninfer"
    rc, stdout, err = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--components", "text,mtp,vision,dflash2",
                          "--mmproj", src / "mmproj.gguf", "--drafter", src / "d2", "--proposal", "indexed",
                          "--proposal-counts", src / "counts.tsv", "--proposal-rows", "32", "--json")
    assert rc == 0, err
    assert json.loads(stdout)["objects"] > 0 and validate(out) == []
    with open_artifact(out) as a:
        assert set(a.components) == {"text", "mtp", "vision", "dflash2"}
        assert all(a.components[c].target == "text" for c in ("mtp", "vision", "dflash2"))
        assert a.components["text"].to_json()["proposal"] == {"domain": "indexed", "rows": 32}
        assert a.metadata["identity"]["components"] == ["text", "mtp", "vision", "dflash2"]


@pytest.mark.parametrize("argv, needle", [
    (("--components", "text,vision"), "component vision is not available"),
    (("--components", "text,mtp"), "component mtp is not available"),
    (("--components", "text,dflash"), "component dflash is not available"),
    (("--proposal", "indexed", "--proposal-rows", "8"), "--proposal indexed needs --proposal-counts"),
])
def test_refusals_write_nothing(src, tmp_path, capsys, argv, needle):
    out = tmp_path / "r.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", src / "plain.gguf", out, *argv)
    assert rc == 1 and needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_project_made_template_lends_vision_and_mtp(src, tmp_path, capsys):
    tpl = tmp_path / "tpl.ninfer"
    rc, _, err = run(capsys, "st2ninfer", src / "vl", tpl, "--recipe", "groupwise-int",
                     "--components", "text,vision,mtp", "--no-verify")  # the template; the borrowing run accepts
    assert rc == 0, err
    out = tmp_path / "b.ninfer"
    rc, stdout, err = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--template", tpl, "--json")
    assert rc == 0, err
    s = json.loads(stdout)
    assert set(s["borrowed"]["by_prefix"]) == {"vision", "mtp", "frontend"}
    assert s["produced"]["bytes"] + s["borrowed"]["bytes"] == s["total_bytes"]
    assert validate(out) == []
    with open_artifact(tpl) as t, open_artifact(out) as a:
        assert set(a.components) == {"text", "vision", "mtp"}
        assert a.components["vision"].to_json() == t.components["vision"].to_json()
        assert a.bindings["mtp/output_head"].to_json() == {"object": "text/output_head"}  # bound to the new text head
        for name in ("vision/patch_embedding", "mtp/fc", "mtp/layers/0/attention/query"):
            np.testing.assert_array_equal(a.binding_array(name), t.binding_array(name))
