"""The rebuilt ``tokenizer.json`` of every llama.cpp pre-tokenizer, loaded by the ``tokenizers`` library,
gives the token ids llama.cpp gives (docs/gguf-conventions.md §Tokenizer).

Fixtures (tests/fixtures/llama_vocab/, README.md there; made by its make_fixtures.py): ``real.json`` holds
the byte-level BPE vocabularies llama.cpp ships (``models/ggml-vocab-*.gguf``), reduced to the merges its
test inputs use, with the ids llama.cpp's own tests expect (``.out``); ``synthetic.json`` a small vocabulary
and, per pre-tokenizer type, the ids ``llama-tokenize`` printed for it. GGUFs are written here with
``gguf.GGUFWriter``; every other name of the map is loaded by ``tokenizers`` (its regexes compile) or is
refused with the typed error naming ``--tokenizer-dir``."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import gguf
import pytest
from tokenizers import Tokenizer

from converters.sources import open_gguf
from converters.sources.frontend import FrontendError, frontend_resources, load_frontend_rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "llama_vocab"
REAL = json.loads((FIXTURES / "real.json").read_text(encoding="utf-8"))
SYNTHETIC = json.loads((FIXTURES / "synthetic.json").read_text(encoding="utf-8"))
RULES = load_frontend_rules()
#: types whose tokenizer.json regex (the map's) keeps combining marks (\p{M}) in words where llama.cpp's
#: adapted regex has \p{L} lookaheads: the inputs with marks differ from llama-tokenize (the map's evidence)
MARKS_DIFFER = {"TEKKEN"}


def marks_on_letters(text: str) -> bool:
    """A combining mark following a letter (Khmer vowel signs; not an emoji's variation selector)."""
    cats = [unicodedata.category(ch)[0] for ch in text]
    return any(c == "M" and p == "L" for p, c in zip(cats, cats[1:], strict=False))


def write_vocab(path: Path, pre: str, tokens: list[str], merges: list[str], types: list[int] | None = None,
                bos: int | None = None) -> Path:
    """A vocab-only GGUF as llama.cpp's ggml-vocab files are (tokens, types, merges, pre name, BOS id)."""
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_block_count(1)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types or [gguf.TokenType.NORMAL] * len(tokens))
    w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(bos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def rebuilt(path: Path) -> Tokenizer:
    with open_gguf(path) as src:
        data = frontend_resources(src).files["tokenizer.json"]
    return Tokenizer.from_str(data.decode("utf-8"))


@pytest.mark.parametrize("vocab", REAL["vocabularies"], ids=lambda v: v["pre"])
def test_llama_cpp_vocabularies_give_llama_cpp_ids(tmp_path, vocab):
    tok = rebuilt(write_vocab(tmp_path / "v.gguf", vocab["pre"], vocab["tokens"], vocab["merges"], vocab["types"]))
    original = vocab["ids"]  # the fixture's ids are dense; llama.cpp's are the full vocabulary's
    for case in vocab["cases"]:
        got = [original[i] for i in tok.encode(case["text"], add_special_tokens=False).ids]
        assert got == case["ids"], case["text"]


@pytest.mark.parametrize("pre", sorted(SYNTHETIC["names"]))
def test_llama_tokenize_ids_on_a_small_vocabulary(tmp_path, pre):
    tok = rebuilt(write_vocab(tmp_path / "v.gguf", pre, SYNTHETIC["tokens"], SYNTHETIC["merges"]))
    entry = SYNTHETIC["names"][pre]
    cases = SYNTHETIC["names"][entry.get("same_ids_as", pre)]["cases"]  # llama.cpp gave this name the same ids
    wrong = [c["text"] for c in cases if tok.encode(c["text"], add_special_tokens=False).ids != c["ids"]]
    marked = [c["text"] for c in cases if marks_on_letters(c["text"])]
    expected = marked if RULES["pre_tokenizers"][pre]["type"] in MARKS_DIFFER else []
    assert wrong == expected, f"{len(wrong)} of {len(cases)} inputs differ from llama-tokenize: {wrong[:3]}"


def test_the_fixtures_cover_pre_tokenizer_families():
    types = {RULES["pre_tokenizers"][v["pre"]]["type"] for v in REAL["vocabularies"]}
    types |= {RULES["pre_tokenizers"][p]["type"] for p in SYNTHETIC["names"]}
    assert {"QWEN2", "LLAMA3", "DEEPSEEK_LLM", "DEEPSEEK3_LLM", "GPT2", "FALCON", "STARCODER", "TEKKEN"} <= types
    assert len(types) >= 25


@pytest.mark.parametrize("pre", sorted(RULES["pre_tokenizers"]))
def test_every_name_is_rebuilt_or_refused_by_name(tmp_path, pre):
    spec = RULES["pre_tokenizers"][pre]
    path = write_vocab(tmp_path / "v.gguf", pre, SYNTHETIC["tokens"], SYNTHETIC["merges"])
    if "refused" in RULES["pre_tokenizer_types"][spec["type"]]:
        with open_gguf(path) as src, pytest.raises(FrontendError) as info:
            frontend_resources(src)
        assert info.value.rule == "pre_tokenizer_rebuildable" and "--tokenizer-dir" in str(info.value)
        assert info.value.json_path == "tokenizer.ggml.pre"
        return
    data = json.loads(rebuilt(path).to_str())  # tokenizers compiled every regex
    splits = [p["pattern"]["Regex"] for p in data["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split"]
    assert splits == RULES["pre_tokenizer_types"][spec["type"]]["regexes"]
    assert data["model"]["ignore_merges"] is RULES["pre_tokenizer_types"][spec["type"]]["ignore_merges"]


def test_deepseek_r1_qwen_is_qwen2s_pre_tokenizer():
    assert RULES["pre_tokenizers"]["deepseek-r1-qwen"]["type"] == RULES["pre_tokenizers"]["qwen2"]["type"]
    assert SYNTHETIC["names"]["deepseek-r1-qwen"] == {"llama_cpp_type": "QWEN2", "same_ids_as": "qwen2"}


def test_an_unknown_name_is_refused_naming_the_flag(tmp_path):
    path = write_vocab(tmp_path / "v.gguf", "no-such-pre", SYNTHETIC["tokens"], SYNTHETIC["merges"])
    with open_gguf(path) as src, pytest.raises(FrontendError) as info:
        frontend_resources(src)
    assert info.value.rule == "pre_tokenizer_known" and "--tokenizer-dir" in str(info.value)
    assert info.value.file == str(path)


def test_a_template_adds_bos_where_llama_cpp_does(tmp_path):
    tokens = SYNTHETIC["tokens"] + ["<|begin_of_text|>"]
    types = [gguf.TokenType.NORMAL] * (len(tokens) - 1) + [gguf.TokenType.CONTROL]
    tok = rebuilt(write_vocab(tmp_path / "l3.gguf", "llama-bpe", tokens, SYNTHETIC["merges"], types, len(tokens) - 1))
    assert tok.encode("Hello", add_special_tokens=True).ids[0] == len(tokens) - 1  # llama3: add_bos by default
    assert tok.encode("Hello", add_special_tokens=False).ids[0] != len(tokens) - 1
