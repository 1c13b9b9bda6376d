"""The mapping loader refuses bad rule files with ``file:line``; the shipped mappings agree with gguf-py."""

from __future__ import annotations

import re
import textwrap

import gguf
import pytest
from gguf.constants import MODEL_ARCH, MODEL_TENSORS, TENSOR_NAMES

from converters.errors import MappingError
from converters.mapping import expr, load_mapping, load_mapping_for

VALID = textwrap.dedent("""\
    architecture: qwen3
    component: text
    doc: a test mapping
    symbols:
      q_width: num_attention_heads * head_dim
    rules:
      split: {transforms: [row_slice], evidence: read somewhere}
    parameters:
      text_globals:
        text/token_embedding:
          shape: [vocab_size, hidden_size]
          role: embedding
          gguf: token_embd.weight
          evidence: by name
        text/part:
          shape: [q_width, hidden_size]
          role: attention.query
          gguf: {tensor: x.weight, transforms: [row_slice: {start: 0, stop: q_width}]}
          evidence: by name
    """)


def write(tmp_path, text: str):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    return p


def error_of(tmp_path, text: str) -> MappingError:
    with pytest.raises(MappingError) as ei:
        load_mapping(write(tmp_path, text))
    return ei.value


def test_valid_mapping_loads(tmp_path):
    m = load_mapping(write(tmp_path, VALID))
    assert [p.name for p in m.parameters()] == ["text/token_embedding", "text/part"]
    assert m.parameters()[1].sources["gguf"].transforms[0].args == (("start", 0), ("stop", "q_width"))


@pytest.mark.parametrize(("old", "new", "line", "message"), [
    ("doc: a test mapping\n", "doc: a test mapping\nextra: 1\n", 4, "unknown key 'extra'"),
    ("      role: embedding\n", "", 10, "lacks the required field 'role'"),
    ("      evidence: by name\n    text/part", "    text/part", 10, "lacks the required field 'evidence'"),
    ("[row_slice: {start: 0", "[row_cut: {start: 0", 18, "unknown transform 'row_cut'"),
    ("{start: 0, stop: q_width}", "{start: 0}", 18, "missing ['stop']"),
    ("shape: [q_width, hidden_size]", "shape: [q_width, hidden_sise]", 16, "unknown name(s) hidden_sise"),
    ("shape: [q_width, hidden_size]", "shape: [q_width ** 2, hidden_size]", 16, "Pow is not allowed"),
    ("shape: [q_width, hidden_size]", "shape: [q_width +, hidden_size]", 16, "does not parse"),
    ("  split: {transforms: [row_slice]", "  split: {transforms: [squeeze]", 18, "no rule in 'rules' cites"),
    ("gguf: token_embd.weight", "gguf: 'blk.{l}.x'", 13, "unknown placeholder {l}"),
    ("    text/part:\n", "    text/token_embedding:\n", 15, "duplicate key 'text/token_embedding'"),
    ("architecture: qwen3", "architecture: llama", 1, "unknown architecture 'llama'"),
    ("      role: embedding\n", "      role: Embedding\n", 12, "dotted lower-case"),
])
def test_loader_errors_name_file_and_line(tmp_path, old, new, line, message):
    assert old in VALID
    err = error_of(tmp_path, VALID.replace(old, new, 1))
    assert f"m.yaml:{line}" in str(err), str(err)
    assert message in str(err)


def test_yaml_syntax_error_has_a_line(tmp_path):
    err = error_of(tmp_path, VALID + "  bad: [unclosed\n")
    assert re.search(r"m\.yaml:\d+", str(err)) and err.rule == "yaml"


def test_expressions_are_not_python():
    assert expr.evaluate("a * (b + 2) // 3 - -1", {"a": 6, "b": 1}) == 7
    for bad in ("__import__('os')", "a.b", "a[0]", "f(a)", "a / 2", "1.5", "True", "a if a else b"):
        with pytest.raises(expr.ExprError):
            expr.evaluate(bad, {"a": 1, "b": 2})
    with pytest.raises(expr.ExprError, match="division by zero"):
        expr.evaluate("a // (b - 2)", {"a": 1, "b": 2})
    with pytest.raises(expr.ExprError, match="not an integer"):
        expr.evaluate("a", {"a": True})


ARCHES = {"qwen3": MODEL_ARCH.QWEN3, "qwen35": MODEL_ARCH.QWEN35}


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_gguf_names_are_gguf_py_names(arch):
    """Every GGUF tensor a mapping reads is in gguf-py's tensor list for that architecture."""
    known = {TENSOR_NAMES[t] for t in MODEL_TENSORS[ARCHES[arch]]}
    m = load_mapping_for(arch)
    for p in m.parameters():
        name = p.sources["gguf"].tensor.replace("{l}", "{bid}")
        base = re.sub(r"\.(weight|bias)$", "", name)
        assert base in known, f"{p.name}: {name} is not a gguf-py {arch} tensor"


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_hf_and_gguf_names_pair_like_gguf_py(arch):
    """gguf-py's TensorNameMap maps each mapping's HF name to the same rule's GGUF name."""
    tmap = gguf.get_tensor_name_map(ARCHES[arch], 8)
    m = load_mapping_for(arch)
    for p in m.parameters():
        for layer in (0, 3):
            hf = p.sources["hf"].tensor.replace("{text}", "model.").replace("{l}", str(layer))
            want = p.sources["gguf"].tensor.replace("{l}", str(layer))
            hf = hf.replace(".dt_bias", ".dt_proj.bias")  # llama.cpp renames it before mapping (see evidence)
            got = tmap.get_name(hf, try_suffixes=(".weight", ".bias"))
            if got is None and hf.endswith(".A_log"):
                got = tmap.get_name(hf)
            assert got == want, f"{p.name}: {hf} maps to {got}, the mapping says {want}"


def test_shipped_mappings_cover_the_contract_names():
    names35 = {p.name for p in load_mapping_for("qwen35").parameters()}
    for n in ("text/token_embedding", "text/output_head", "text/final_norm", "text/layers/{l}/attention/gate",
              "text/layers/{l}/gdn/a_log", "text/layers/{l}/gdn/conv1d", "text/layers/{l}/gdn/output"):
        assert n in names35
    names3 = {p.name for p in load_mapping_for("qwen3").parameters()}
    assert "text/layers/{l}/attention/gate" not in names3 and "text/layers/{l}/attention/query_norm" in names3
    inferred = {r.name for r in load_mapping_for("qwen35").rules.values() if r.inferred}
    assert {"norm_shift", "a_log", "v_heads_tiled", "gated_query_deinterleave"} <= inferred


def test_generated_tables_are_current():
    """docs/mappings/*.md are generated from the YAML; a stale table fails here."""
    from converters.mapping import doc

    assert doc.main(["--check"]) == 0, "run: python -m converters.mapping.doc"


@pytest.mark.parametrize("char", ["\x01", "\x00", "\x1b", "\x7f", "\ufffe"])
def test_a_character_yaml_refuses_is_a_located_error(tmp_path, char):
    """PyYAML's ReaderError (a control character) is not a MarkedYAMLError: it is one typed error with the
    line, in mappings and recipes alike."""
    from converters.errors import RecipeError
    from converters.mapping.recipes import load_recipe

    for name, error, load in (("m.yaml", MappingError, load_mapping), ("r.yaml", RecipeError, load_recipe)):
        path = tmp_path / name
        path.write_text(f"name: x\ndescription: a{char}b\n", encoding="utf-8")
        with pytest.raises(error, match="does not allow the character") as info:
            load(path)
        assert info.value.file == f"{path}:2" and info.value.rule == "yaml"


@pytest.mark.parametrize("value", ["!foo x", "2001-02-30", "!!binary xyz", "!!float abc", "[" * 100000])
def test_a_value_yaml_cannot_construct_is_a_located_error(tmp_path, value):
    """An unknown tag, an impossible date, bad base64 or a float tag on a word (ConstructorError, ValueError:
    found by the recipe and mapping fuzz targets) are a MappingError with the rule ``yaml``."""
    path = tmp_path / "m.yaml"
    path.write_text(f"name: x\ndescription: {value}\n", encoding="utf-8")
    with pytest.raises(MappingError, match="YAML") as info:
        load_mapping(path)
    assert info.value.rule == "yaml"
