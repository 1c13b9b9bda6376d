"""gguf2ninfer / verify ``--tokenizer-dir``: a GGUF whose ``tokenizer.ggml.pre`` is not in the frontend map is
refused naming the flag; with the original repository's directory its tokenizer files are stored verbatim
(checked against the GGUF, recorded in provenance, accepted by gate 6); a directory that disagrees is refused
naming the file, the field and the rule, and nothing is published (docs/cli.md §Tokenizer files)."""

from __future__ import annotations

import json

import pytest

from converters.cli import main
from converters.sources.frontend import load_frontend_rules
from ninfer_core import open_artifact
from tinymodels import qwen3

CFG = qwen3.config()
PRE = "my-finetune"  # a name llama.cpp does not define


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("tokdir")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(qwen3, "TOKENIZER_PRE", PRE)
        qwen3.write_gguf(d / "m.gguf", CFG)
    qwen3.write_hf_dir(d / "hf", CFG)
    return d


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_an_unknown_pre_tokenizer_names_the_flag(src, tmp_path, capsys):
    out = tmp_path / "a.ninfer"
    rc, _, err = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--recipe", "bf16")
    assert rc == 1 and len(err.strip().splitlines()) == 1
    assert "tokenizer.ggml.pre" in err and repr(PRE) in err and "--tokenizer-dir" in err
    assert "pre_tokenizer_known" in err and str(src / "m.gguf") in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_the_directory_s_files_are_stored_verbatim_and_accepted(src, tmp_path, capsys):
    out = tmp_path / "b.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--recipe", "bf16", "--tokenizer-dir",
                        src / "hf", "--json")
    assert rc == 0
    assert json.loads(stdout)["acceptance"]["verdict"] == "pass"
    with open_artifact(out) as art:
        table = art.components["text"].resources
        for role in ("tokenizer.json", "tokenizer_config.json"):
            assert art.resource(table[role]) == (src / "hf" / role).read_bytes()
            prov = art.provenance["frontend"][role]
            assert prov["origin"] == "copied" and prov["tokenizer_dir"] == str((src / "hf").resolve())
        assert art.provenance["frontend"]["generation_config.json"]["origin"] == "rebuilt"
    rc, stdout, _ = run(capsys, "verify", out, "--source", src / "m.gguf", "--tokenizer-dir", src / "hf", "--json")
    assert rc == 0 and json.loads(stdout)["result"] == "pass"
    rc, stdout, _ = run(capsys, "verify", out, "--source", src / "m.gguf", "--json")
    assert rc == 1  # without the directory the GGUF's tokenizer cannot be rebuilt: gate 6 fails by name
    assert "--tokenizer-dir" in stdout


@pytest.mark.parametrize("case, field, rule", [
    ("vocab", "model.vocab", "tokenizer_dir_vocab"),
    ("merges", "model.merges", "tokenizer_dir_merges"),
])
def test_a_directory_that_disagrees_is_refused(src, tmp_path, capsys, case, field, rule):
    bad = tmp_path / "hf"
    bad.mkdir()
    tok = json.loads((src / "hf" / "tokenizer.json").read_text(encoding="utf-8"))
    if case == "vocab":
        vocab = tok["model"]["vocab"]
        a, b = list(vocab)[300:302]
        vocab[a], vocab[b] = vocab[b], vocab[a]
    else:
        tok["model"]["merges"] = tok["model"]["merges"][:-1]
    (bad / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    (bad / "tokenizer_config.json").write_bytes((src / "hf" / "tokenizer_config.json").read_bytes())
    out = tmp_path / "c.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", src / "m.gguf", out, "--tokenizer-dir", bad, "--json")
    assert rc == 1
    doc = json.loads(stdout)
    assert doc["schema"] == "ninfer-error/v1"
    assert doc["error"]["rule"] == rule and doc["error"]["field"] == field
    assert doc["error"]["file"] == str((bad / "tokenizer.json").resolve())
    assert not out.exists()


def test_a_directory_without_tokenizer_config_is_refused(src, tmp_path, capsys):
    bad = tmp_path / "hf"
    bad.mkdir()
    (bad / "tokenizer.json").write_bytes((src / "hf" / "tokenizer.json").read_bytes())
    rc, _, err = run(capsys, "gguf2ninfer", src / "m.gguf", tmp_path / "d.ninfer", "--tokenizer-dir", bad)
    assert rc == 1 and "tokenizer_config.json" in err and "tokenizer_dir_file" in err


def test_the_flag_is_for_gguf_sources(src, tmp_path, capsys):
    rc, _, err = run(capsys, "st2ninfer", src / "hf", tmp_path / "e.ninfer", "--tokenizer-dir", src / "hf")
    assert rc == 1 and "tokenizer_dir_source" in err and not (tmp_path / "e.ninfer").exists()


def test_a_deepseek_r1_qwen_gguf_converts_without_the_flag(tmp_path, capsys):
    """The R1-distill Qwen GGUFs llama.cpp writes name their pre-tokenizer ``deepseek-r1-qwen`` (Qwen2's)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(qwen3, "TOKENIZER_PRE", "deepseek-r1-qwen")
        qwen3.write_gguf(tmp_path / "r1.gguf", CFG)
    out = tmp_path / "r1.ninfer"
    rc, stdout, _ = run(capsys, "gguf2ninfer", tmp_path / "r1.gguf", out, "--recipe", "bf16", "--json")
    assert rc == 0 and json.loads(stdout)["acceptance"]["verdict"] == "pass"
    with open_artifact(out) as art:
        tok = json.loads(art.resource(art.components["text"].resources["tokenizer.json"]))
        assert art.provenance["frontend"]["tokenizer.json"]["pre_tokenizer"] == "deepseek-r1-qwen"
    qwen2 = load_frontend_rules()["pre_tokenizer_types"]["QWEN2"]["regexes"]
    assert [p["pattern"]["Regex"] for p in tok["pre_tokenizer"]["pretokenizers"][:-1]] == qwen2
