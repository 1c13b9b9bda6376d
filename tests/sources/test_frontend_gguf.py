"""Frontend resources rebuilt from GGUF tokenizer metadata.

Fixtures: GGUFs written the way llama.cpp ``_set_vocab_gpt2`` does (token list and types as
``get_vocab_base`` builds them, then ``gguf.SpecialVocab(dir, load_merges=True).add_to_gguf``) from a
small HF tokenizer written here, and the tinymodels Qwen3.5 GGUF with its HF directory. The rebuilt files
are compared by content with the source tokenizer (vocabulary, merges, added/special tokens, template,
ids), the JSON structure against the layout of Qwen's released ``tokenizer.json``, and ``--tokenizer-dir``'s
check of a directory's files against the GGUF."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest

from converters.sources import open_gguf, open_hf_dir
from converters.sources.frontend import (
    RULES_FILE,
    FrontendError,
    byte_level_alphabet,
    frontend_resources,
    load_frontend_rules,
)
from tinymodels import qwen35
from tinymodels.tokenizer import bytes_to_unicode

TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
VOCAB_SIZE = 272  # config.vocab_size: ids 263..271 are llama.cpp's [PAD{i}] fillers


def hf_tokenizer(d):
    """A byte-level BPE tokenizer (transformers >= 4.45 pair merges) with special and user-defined tokens."""
    table = bytes_to_unicode()
    byte_chars = [table[b] for b in range(256)]
    vocab = {c: i for i, c in enumerate(byte_chars)}
    merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["Ġ", "a"]]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    added = [("<|endoftext|>", True), ("<|im_end|>", True), ("<think>", False)]
    added_tokens = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                     "normalized": False, "special": s} for i, (c, s) in enumerate(added)]
    tok = {"version": "1.0", "added_tokens": added_tokens, "normalizer": {"type": "NFC"},
           "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    ids = {t["content"]: t["id"] for t in added_tokens}
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(tok))
    (d / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": TEMPLATE,
        "add_bos_token": False}))
    (d / "config.json").write_text(json.dumps({"bos_token_id": ids["<|endoftext|>"], "vocab_size": VOCAB_SIZE}))
    return tok, ids


def token_list(tok: dict) -> tuple[list[str], list[int]]:
    """llama.cpp TextModel.get_vocab_base: ids < vocab_size, fillers UNUSED, added CONTROL/USER_DEFINED."""
    reverse = {i: t for t, i in tok["model"]["vocab"].items()}
    added = {t["id"]: t for t in tok["added_tokens"]}
    tokens, types = [], []
    for i in range(VOCAB_SIZE):
        if i in added:
            tokens.append(added[i]["content"])
            types.append(gguf.TokenType.CONTROL if added[i]["special"] else gguf.TokenType.USER_DEFINED)
        elif i in reverse:
            tokens.append(reverse[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    return tokens, types


def write_gguf(path, tok_dir, tok, *, pre="qwen2", edit=None):
    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_block_count(1)
    tokens, types = token_list(tok)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(tok_dir, load_merges=True).add_to_gguf(w)
    w.add_eot_token_id(tok["added_tokens"][0]["id"])  # an EOT distinct from EOS: <|endoftext|>
    w.add_sampling_temp(0.7)
    w.add_sampling_top_k(20)
    w.add_sampling_top_p(0.8)
    if edit is not None:
        edit(w)
    w.add_tensor("token_embd.weight", np.zeros((VOCAB_SIZE, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("gg")
    tok, ids = hf_tokenizer(d / "hf")
    path = write_gguf(d / "m.gguf", d / "hf", tok)
    with open_gguf(path) as src:
        return tok, ids, path, frontend_resources(src)


def test_rebuilt_tokenizer_content_equals_source(built):
    tok, ids, path, res = built
    rebuilt = json.loads(res.files["tokenizer.json"])
    assert rebuilt["model"]["vocab"] == tok["model"]["vocab"]
    assert rebuilt["model"]["merges"] == tok["model"]["merges"]
    assert [(t["id"], t["content"], t["special"]) for t in rebuilt["added_tokens"]] == \
        [(t["id"], t["content"], t["special"]) for t in tok["added_tokens"]]  # <think> stays non-special
    all_ids = list(rebuilt["model"]["vocab"].values()) + [t["id"] for t in rebuilt["added_tokens"]]
    assert len(all_ids) == len(set(all_ids)) and max(all_ids) < 263  # [PAD{i}] fillers dropped
    assert res.provenance["tokenizer.json"]["origin"] == "rebuilt"
    assert res.provenance["tokenizer.json"]["from"] == str(path)
    assert "tokenizer.ggml.merges" in res.provenance["tokenizer.json"]["keys"]


def test_rebuilt_tokenizer_has_qwen_tokenizer_json_layout(built):
    rebuilt = json.loads(built[3].files["tokenizer.json"])
    regex = load_frontend_rules()["pre_tokenizer_types"]["QWEN2"]["regexes"][0]
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    assert rebuilt["normalizer"] == {"type": "NFC"}
    assert rebuilt["pre_tokenizer"] == {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", **byte_level}]}
    assert rebuilt["decoder"] == {"type": "ByteLevel", **byte_level}
    model = rebuilt["model"]
    assert model["type"] == "BPE" and model["unk_token"] is None and model["byte_fallback"] is False
    assert all(set(t) <= byte_level_alphabet() for t in model["vocab"])
    assert all(a in model["vocab"] and b in model["vocab"] and a + b in model["vocab"] for a, b in model["merges"])
    assert set(added["normalized"] for added in rebuilt["added_tokens"]) == {False}


def test_byte_level_alphabet_is_gpt2s():
    assert byte_level_alphabet() == frozenset(bytes_to_unicode().values()) and len(byte_level_alphabet()) == 256


def test_rebuilt_config_template_and_generation(built):
    tok, ids, _, res = built
    tc = json.loads(res.files["tokenizer_config.json"])
    assert (tc["eos_token"], tc["pad_token"], tc["bos_token"], tc["unk_token"]) == (
        "<|im_end|>", "<|endoftext|>", "<|endoftext|>", None)  # bos from config.json bos_token_id
    assert tc["add_bos_token"] is False and tc["tokenizer_class"] == "Qwen2Tokenizer"
    assert tc["added_tokens_decoder"][str(ids["<think>"])]["special"] is False
    assert res.files["chat_template.jinja"] == TEMPLATE.encode("utf-8")
    assert json.loads(res.files["generation_config.json"]) == {
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"], "temperature": 0.7, "top_k": 20, "top_p": 0.8}


def test_tinymodels_gguf_rebuild_matches_its_hf_directory(tmp_path):
    hf = qwen35.write_hf_dir(tmp_path / "hf")
    with open_gguf(qwen35.write_gguf(tmp_path / "m.gguf")) as src:
        res = frontend_resources(src)
    with open_hf_dir(hf) as src:
        orig = frontend_resources(src)
    a, b = json.loads(res.files["tokenizer.json"]), json.loads(orig.files["tokenizer.json"])
    assert a["model"]["vocab"] == b["model"]["vocab"]
    assert [list(m) for m in a["model"]["merges"]] == [m.split(" ") if isinstance(m, str) else list(m)
                                                       for m in b["model"]["merges"]]
    key = [(t["id"], t["content"], t["special"]) for t in b["added_tokens"]]
    assert [(t["id"], t["content"], t["special"]) for t in a["added_tokens"]] == key
    assert a["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == \
        load_frontend_rules()["pre_tokenizer_types"]["QWEN35"]["regexes"][0]
    tc_a, tc_b = json.loads(res.files["tokenizer_config.json"]), json.loads(orig.files["tokenizer_config.json"])
    for name in ("eos_token", "pad_token", "unk_token", "add_bos_token", "added_tokens_decoder"):
        assert tc_a[name] == tc_b[name], name
    assert tc_a["tokenizer_class"] == "Qwen3_5Tokenizer"
    assert res.files["chat_template.jinja"] == orig.files["chat_template.jinja"]
    gen_a, gen_b = json.loads(res.files["generation_config.json"]), json.loads(orig.files["generation_config.json"])
    assert gen_a["eos_token_id"] == gen_b["eos_token_id"][0] and gen_a["bos_token_id"] == gen_b["bos_token_id"]


def _rebuild_error(tmp_path, *, pre="qwen2", edit=None, tok_edit=None, rules_file=RULES_FILE) -> FrontendError:
    tok, _ = hf_tokenizer(tmp_path / "hf")
    if tok_edit is not None:
        tok_edit(tok)
    path = write_gguf(tmp_path / "bad.gguf", tmp_path / "hf", tok, pre=pre, edit=edit)
    with open_gguf(path) as src, pytest.raises(FrontendError) as info:
        frontend_resources(src, rules_file=rules_file)
    assert info.value.file == str(path)
    return info.value


def _set(key, value, vtype):
    return lambda w: w.kv_data[0].__setitem__(key, gguf.GGUFValue(value, vtype))


@pytest.mark.parametrize("case, rule, key", [
    ("model", "tokenizer_model_supported", "tokenizer.ggml.model"),
    ("pre", "pre_tokenizer_known", "tokenizer.ggml.pre"),
    ("merge", "merge_out_of_vocabulary", "tokenizer.ggml.merges"),
    ("types", "token_type_count", "tokenizer.ggml.token_type"),
    ("type7", "token_type_unknown", "tokenizer.ggml.token_type"),
    ("eos", "token_id_range", "tokenizer.ggml.eos_token_id"),
    ("spelling", "byte_level_token", "tokenizer.ggml.tokens"),
])
def test_inconsistent_tokenizer_metadata_is_a_typed_error(tmp_path, case, rule, key):
    kw = {}
    if case == "model":
        kw["edit"] = _set("tokenizer.ggml.model", "llama", gguf.GGUFValueType.STRING)
    if case == "pre":
        kw["pre"] = "no-such-pre"
    if case == "merge":
        kw["edit"] = _set("tokenizer.ggml.merges", ["Ġ t", "Ġthe x"], gguf.GGUFValueType.ARRAY)
    if case == "types":
        kw["edit"] = _set("tokenizer.ggml.token_type", [1, 1], gguf.GGUFValueType.ARRAY)
    if case == "type7":
        kw["edit"] = _set("tokenizer.ggml.token_type", [7] + [1] * (VOCAB_SIZE - 1), gguf.GGUFValueType.ARRAY)
    if case == "eos":
        kw["edit"] = _set("tokenizer.ggml.eos_token_id", VOCAB_SIZE, gguf.GGUFValueType.UINT32)
    if case == "spelling":
        kw["tok_edit"] = lambda tok: tok["model"]["vocab"].__setitem__("a b", 265)  # a [PAD] slot
    err = _rebuild_error(tmp_path, **kw)
    assert (err.rule, err.json_path) == (rule, key)


def test_token_list_over_the_limit_is_refused(tmp_path):
    rules = tmp_path / "limits.yaml"
    rules.write_text(RULES_FILE.read_text().replace("max_tokens: 4194304", "max_tokens: 100"))
    err = _rebuild_error(tmp_path, rules_file=rules)
    assert (err.rule, err.json_path) == ("array_limit", "tokenizer.ggml.tokens")


def test_non_utf8_token_is_refused_by_its_id_and_bytes(tmp_path):
    """ggml keeps a token's bytes; a byte-level BPE vocabulary cannot (docs/inspect.md §Non-canonical
    metadata values)."""
    tok, _ = hf_tokenizer(tmp_path / "same")  # the tokenizer _rebuild_error writes again
    tokens, _ = token_list(tok)
    tokens[5] = b"\xe2\x82"  # a partial UTF-8 sequence
    err = _rebuild_error(tmp_path, edit=_set("tokenizer.ggml.tokens", tokens, gguf.GGUFValueType.ARRAY))
    assert (err.rule, err.json_path) == ("token_not_utf8", "tokenizer.ggml.tokens")
    assert "token 5 " in str(err) and "e2 82" in str(err)


def test_any_ill_typed_tokenizer_metadata_is_a_frontend_error_not_a_crash(built):
    """Each tokenizer key replaced by values of other types, through the Source surface the rebuild reads:
    a result or a FrontendError, never another exception."""
    from types import SimpleNamespace

    _, _, path, _ = built
    with open_gguf(path) as src:
        real = {k: src.metadata[k] for k in src.metadata if k.startswith(("tokenizer.", "general.sampling"))}
    rules = set()
    for key in real:
        for bad in ("x", "", [], [3], [[1]], ["a b c"], [None], -1, 2.5, True, {"a": 1}):
            fake = SimpleNamespace(kind="gguf", path=path, metadata={**real, key: bad})
            try:
                frontend_resources(fake)
            except FrontendError as exc:
                assert exc.file == str(path)
                rules.add(exc.rule)
    assert {"tokenizer_model_supported", "pre_tokenizer_known", "array_limit", "token_type_count",
            "merge_form", "token_id_range", "field_type"} <= rules


def test_tinymodels_qwen3_gguf_rebuilds_its_tokenizer_json_exactly(tmp_path):
    """Pre-tokenizer "qwen2" is the regex of the released files, so the whole tokenizer.json comes back."""
    from tinymodels import qwen3

    hf = qwen3.write_hf_dir(tmp_path / "hf")
    with open_gguf(qwen3.write_gguf(tmp_path / "m.gguf")) as src:
        res = frontend_resources(src)
    assert json.loads(res.files["tokenizer.json"]) == json.loads((hf / "tokenizer.json").read_bytes())


def test_embedded_hf_tokenizer_json_is_taken_verbatim(tmp_path):
    tok, _ = hf_tokenizer(tmp_path / "hf")
    original = (tmp_path / "hf" / "tokenizer.json").read_text()
    path = write_gguf(tmp_path / "m.gguf", tmp_path / "hf", tok, edit=lambda w: w.add_string(
        gguf.Keys.Tokenizer.HF_JSON, original))
    with open_gguf(path) as src:
        res = frontend_resources(src)
    assert res.files["tokenizer.json"] == original.encode("utf-8")
    assert res.provenance["tokenizer.json"]["origin"] == "extracted"
    assert res.provenance["tokenizer.json"]["field"] == "tokenizer.huggingface.json"
    assert res.provenance["tokenizer_config.json"]["origin"] == "rebuilt"


def test_tokenizer_dir_files_are_taken_verbatim_once_checked(tmp_path):
    tok, ids = hf_tokenizer(tmp_path / "hf")
    path = write_gguf(tmp_path / "m.gguf", tmp_path / "hf", tok, pre="not-a-llama-cpp-name")
    with open_gguf(path) as src:
        res = frontend_resources(src, tokenizer_dir=tmp_path / "hf")
    for role in ("tokenizer.json", "tokenizer_config.json"):
        assert res.files[role] == (tmp_path / "hf" / role).read_bytes()
        assert res.provenance[role]["origin"] == "copied"
        assert res.provenance[role]["tokenizer_dir"] == str(tmp_path / "hf")
        assert res.provenance[role]["checked_against"] == str(path)
    assert res.files["chat_template.jinja"] == TEMPLATE.encode("utf-8")
    assert res.provenance["chat_template.jinja"]["origin"] == "extracted"
    assert res.provenance["generation_config.json"]["origin"] == "rebuilt"


def test_tokenizer_dir_added_tokens_must_match(tmp_path):
    tok, ids = hf_tokenizer(tmp_path / "hf")
    path = write_gguf(tmp_path / "m.gguf", tmp_path / "hf", tok)
    tc = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    tc["added_tokens_decoder"] = {str(ids["<think>"]): {"content": "<thought>", "special": False}}
    (tmp_path / "hf" / "tokenizer_config.json").write_text(json.dumps(tc))
    with open_gguf(path) as src, pytest.raises(FrontendError) as info:
        frontend_resources(src, tokenizer_dir=tmp_path / "hf")
    assert info.value.rule == "tokenizer_dir_vocab"
    assert info.value.file == str(tmp_path / "hf" / "tokenizer_config.json")
    assert info.value.json_path == f"added_tokens_decoder.{ids['<think>']}"
