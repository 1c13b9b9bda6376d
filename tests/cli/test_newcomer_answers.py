"""A llama.cpp user's first hour (docs/recipes.md §llama.cpp names, §Requantizing a quantized source;
docs/cli.md §Outputs, §Errors, §JSON contract; docs/validation-report.md §Where the report goes): their own
words get the nearest v3 answer, a pattern that matches nothing is an error, requantizing a quantized
source is said once, and no refused command leaves a directory, a bar or a panel behind."""

from __future__ import annotations

import json
import re
import tomllib

import pytest

from converters import ROOT
from converters.mapping.llamacpp_names import FILE_TYPES, TENSOR_TYPES
from tests.support.cli import run
from tinymodels import qwen35

jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("newcomer") / "m.gguf"
    qwen35.write_gguf(path, qwen35.config(), matrix_type="Q8_0")
    return path


def schema(name: str) -> dict:
    return json.loads((ROOT / "docs" / "schemas" / f"{name}.schema.json").read_text())


def test_ninfer_convert_is_the_same_entry_point_as_convert():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["ninfer-convert"] == scripts["convert"] == "converters.cli:main"


def test_the_docs_tables_are_the_code_tables():
    page = (ROOT / "docs" / "recipes.md").read_text().split("## §llama.cpp names", 1)[1].split("\n## ", 1)[0]
    types_table, files_table = page.split("| GGML type |")[1].split("| llama-quantize type |")
    formats = dict(re.findall(r"^\| `(\w+)` \| `([\w-]+)` \|$", types_table, flags=re.M))
    assert formats == TENSOR_TYPES
    recipes = {}
    for names, recipe in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \| `([\w-]+)` \|$", files_table, flags=re.M):
        recipes.update({n: recipe for n in re.findall(r"`(\w+)`", names)})
    assert recipes == FILE_TYPES


def test_every_named_target_exists():
    from converters.mapping.recipes import list_recipes
    from ninfer_core import codecs

    assert set(TENSOR_TYPES.values()) <= set(codecs.FORMATS)
    assert all(f"gguf_{t}" in codecs.FORMATS for t in TENSOR_TYPES)
    assert set(FILE_TYPES.values()) <= set(list_recipes())


@pytest.mark.parametrize(("argv", "nearest", "rule"), [
    (["--recipe", "Q4_K_M"], "the nearest recipe is groupwise-int", "recipe_unknown"),
    (["--recipe", "q8_0"], "the nearest recipe is groupwise-int", "recipe_unknown"),
    (["--output-tensor-type", "q8_0"], "the nearest v3 format is q8_g32_fp16 (gguf_q8_0 keeps", "override_format"),
    (["--token-embedding-type", "Q6_K"], "the nearest v3 format is q6_g64_fp16", "override_format"),
    (["--tensor-type", "ffn_down=iq4_xs"], "the nearest v3 format is q4_g64_fp16", "override_format"),
])
def test_llama_cpp_words_get_the_nearest_answer(gguf, tmp_path, capsys, argv, nearest, rule):
    rc, out, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "out" / "m.ninfer", *argv, "--json")
    assert rc == 1 and nearest in err and len(err.strip().splitlines()) == 1
    assert json.loads(out)["error"]["rule"] == rule
    assert not (tmp_path / "out").exists()


def test_a_pattern_that_matches_nothing_is_refused_with_the_nearest_names(gguf, tmp_path, capsys):
    rc, out, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "out" / "m.ninfer", "--tensor-type",
                       "ffn_dwn=q8_g32_fp16", "--json")
    doc = json.loads(out)["error"]
    assert rc == 1 and doc["rule"] == "override_unmatched" and doc["field"] == "--tensor-type"
    assert r"blk.\d+.ffn_down.weight" in doc["message"].split("nearest names:")[1].split(",")[0]
    assert not (tmp_path / "out").exists()
    # one that matches some layer of the model is fine, with --only-layer on another layer too
    rc, _, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "o.ninfer", "--tensor-type", r"blk\.0\.ffn_down=q8_g32_fp16",
                     "--only-layer", "1", "--dry-run")
    assert rc == 0, err


def test_requantizing_a_quantized_source_warns_once_and_the_flag_silences_it(gguf, tmp_path, capsys):
    rc, out, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "a.ninfer", "--no-verify")
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert rc == 0 and len(warnings) == 1
    m = re.match(r"warning: (\d+) objects of a quantized source \(Q8_0\) are requantized, worst cosine ([\d.]+) ",
                 warnings[0])
    assert m and int(m.group(1)) > 0 and 0.9 < float(m.group(2)) < 1
    rc, out, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "b.ninfer", "--no-verify", "--json",
                       "--allow-requantize")
    doc = json.loads(out)
    assert rc == 0 and "warning:" not in err
    jsonschema.validate(doc, schema("convert"))
    r = doc["requantized_quantized_source"]
    assert r["objects"] == int(m.group(1)) and r["source_types"] == ["Q8_0"] and r["worst_cosine"] < 1
    rc, out, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "c.ninfer", "--recipe", "exact", "--no-verify",
                       "--json")
    assert rc == 0 and "warning:" not in err and "requantized_quantized_source" not in json.loads(out)


def test_a_text_gguf_as_mmproj_is_named_as_such(gguf, tmp_path, capsys):
    rc, out, err = run(capsys, "gguf2ninfer", gguf, tmp_path / "new" / "m.ninfer", "--components", "text,vision",
                       "--mmproj", gguf, "--json")
    assert rc == 1 and "<object" not in err and "not an mmproj GGUF" in err
    assert json.loads(out)["error"]["rule"] == "mmproj_kind"
    assert not (tmp_path / "new").exists()


def test_repack_makes_its_output_directory_and_a_refused_repack_leaves_none(gguf, tmp_path, capsys):
    art = tmp_path / "m.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, art, "--recipe", "exact", "--no-verify")[0] == 0
    rc, _, err = run(capsys, "repack", art, tmp_path / "a" / "b" / "r.ninfer")
    assert rc == 0, err and (tmp_path / "a" / "b" / "r.ninfer").is_file()
    rc, _, err = run(capsys, "repack", tmp_path / "nope.ninfer", tmp_path / "x" / "r.ninfer")
    assert rc == 1 and not (tmp_path / "x").exists() and "━" not in err


def test_usage_errors_are_one_line_naming_the_help(gguf, capsys):
    rc, out, err = run(capsys, "inspect", gguf, "--view", "{bad")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "╭" not in err
    assert "--view is not JSON" in err and "inspect --help" in err


def test_version_json_at_the_top_level(capsys):
    rc, out, _ = run(capsys, "--version", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["schema"] == "ninfer-version/v1" and doc["version"]
    jsonschema.validate(doc, schema("version"))


def test_retained_evidence_pages_and_imports_have_a_schema(gguf, tmp_path, capsys):
    bundle = tmp_path / "ev.json"
    assert run(capsys, "inspect", gguf, "--detail", "summary", "--evidence-output", bundle, "--json")[0] == 0
    rc, out, _ = run(capsys, "inspect", "--import-bundle", bundle, "--json")
    ids = json.loads(out)
    assert rc == 0 and ids["schema"] == "ninfer-inspect/v1"
    jsonschema.validate(ids, schema("inspect"))
    view = {"collection": "tensors", "names": ["token_embd.weight"], "fields": ["type"]}
    rc, out, _ = run(capsys, "inspect", "--import-bundle", bundle, "--view", json.dumps(view), "--json")
    page = json.loads(out)
    assert rc == 0 and page["rows"][0]["type"] == "Q8_0"
    jsonschema.validate(page, schema("inspect"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**page, "rows": "x"}, schema("inspect"))


def test_validate_always_writes_a_report_and_never_over_another(gguf, tmp_path, capsys, monkeypatch):
    art = tmp_path / "m.ninfer"
    assert run(capsys, "gguf2ninfer", gguf, art, "--recipe", "exact", "--no-verify")[0] == 0
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    rc, out, _ = run(capsys, "validate", art)
    assert rc == 0 and "report: validation.json" in out
    first = json.loads((work / "validation.json").read_text())
    rc, out, _ = run(capsys, "validate", art, "--json")
    assert rc == 0 and json.loads(out) == json.loads((work / "validation-2.json").read_text())
    assert json.loads((work / "validation.json").read_text()) == first  # untouched
    assert first["verdict"] == "pass"
