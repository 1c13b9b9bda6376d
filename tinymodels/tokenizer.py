"""A tiny, valid byte-level BPE tokenizer in the Qwen format, and its GGUF vocabulary.

HF side: ``tokenizer.json`` (``tokenizers`` 0.2x schema: ByteLevel pre-tokenizer/decoder, BPE model
whose merges are ``[left, right]`` pairs as transformers ≥ 4.45 writes them), ``tokenizer_config.json``
(Qwen2Tokenizer, ``bos_token`` null, ``eos_token`` ``<|im_end|>``, ``pad_token`` ``<|endoftext|>``),
``chat_template.jinja`` (ChatML, as transformers 5 saves it) and ``generation_config.json``.
The BPE merges are learned deterministically from a fixed corpus (most frequent pair first, ties by
the pair's text), so every merge result is in the vocabulary and every byte has a token.

GGUF side (:func:`gguf_token_list`) follows llama.cpp ``TextModel.get_vocab_base``: token strings as the
tokenizer's vocabulary spells them (GPT-2 byte-to-unicode), ids ``>= len(tokenizer)`` padded up to the
config's ``vocab_size`` as ``[PAD{i}]`` with type UNUSED, special added tokens CONTROL, the rest NORMAL.
Merges, special token ids, ``add_bos_token`` and the chat template are not rebuilt here: the writer
runs gguf-py's own ``SpecialVocab`` over these files, exactly as ``_set_vocab_gpt2`` does.

The GPT-2 byte-to-unicode table is written out here because ``transformers`` (which llama.cpp imports
it from) is not a dependency of the generators.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

from gguf import TokenType

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
N_MERGES = 96

CORPUS = (
    "The quick brown fox jumps over the lazy dog. A tiny model is a model that is small, "
    "and a tiny tokenizer is a tokenizer that is small too. Numbers 0123456789 and symbols !?.,;: "
    "appear here, as do the words there, these, those, other, mother, brother, weather. "
    "Qwen converts checkpoints; the converter proves every row and every head is where it belongs. "
)

# Qwen2's pre-tokenizer split pattern (tokenizers regex syntax).
QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}\n"
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable unicode character table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars), strict=True))


@cache
def _train_merges(n_merges: int) -> tuple[tuple[str, str], ...]:
    """The first ``n_merges`` merges learned from :data:`CORPUS` (a constant: learned once per process)."""
    byte_map = bytes_to_unicode()
    words = Counter(
        tuple(byte_map[b] for b in piece.encode("utf-8"))
        for piece in re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", CORPUS)
    )
    merges: list[tuple[str, str]] = []
    for _ in range(n_merges):
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            for pair in zip(word[:-1], word[1:], strict=True):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged: Counter[tuple[str, ...]] = Counter()
        for word, count in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return tuple(merges)


def tokenizer_json(n_merges: int = N_MERGES) -> dict:
    """The ``tokenizer.json`` content: 256 byte tokens, ``n_merges`` merges, then the special tokens."""
    byte_map = bytes_to_unicode()
    vocab = {byte_map[b]: b for b in range(256)}
    merges = _train_merges(n_merges)
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    added = [
        {"id": len(vocab) + i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, tok in enumerate(SPECIAL_TOKENS)
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": QWEN_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
                byte_level,
            ],
        },
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": [list(m) for m in merges],
        },
    }


def special_token_ids(tok: dict) -> dict[str, int]:
    return {t["content"]: t["id"] for t in tok["added_tokens"]}


@cache
def default_special_ids() -> tuple[tuple[str, int], ...]:
    """``(token, id)`` of the special tokens of the default tokenizer (used to fill configs)."""
    return tuple(special_token_ids(tokenizer_json()).items())


@cache
def default_size() -> int:
    """Number of ids of the default tokenizer (a config's ``vocab_size`` must be at least this)."""
    tok = tokenizer_json()
    return len(tok["model"]["vocab"]) + len(tok["added_tokens"])


def tokenizer_config(tok: dict) -> dict:
    decoder = {
        str(t["id"]): {"content": t["content"], "lstrip": False, "normalized": False, "rstrip": False,
                       "single_word": False, "special": True}
        for t in tok["added_tokens"]
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def generation_config(tok: dict) -> dict:
    ids = special_token_ids(tok)
    return {
        "bos_token_id": ids["<|endoftext|>"],
        "do_sample": True,
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.8,
        "transformers_version": "5.0.0",
    }


def resources(n_merges: int = N_MERGES) -> dict[str, dict | str]:
    """The tokenizer resource files of an HF directory, by file name."""
    tok = tokenizer_json(n_merges)
    return {
        "tokenizer.json": tok,
        "tokenizer_config.json": tokenizer_config(tok),
        "chat_template.jinja": CHAT_TEMPLATE,
        "generation_config.json": generation_config(tok),
    }


def gguf_token_list(tok: dict, vocab_size: int) -> tuple[list[str], list[int]]:
    """Token strings and types the way llama.cpp's ``get_vocab_base`` lists them."""
    reverse = {i: t for t, i in tok["model"]["vocab"].items()}
    special = {t["id"]: t for t in tok["added_tokens"]}
    reverse.update({i: t["content"] for i, t in special.items()})
    if max(reverse) >= vocab_size:
        raise ValueError(f"tokenizer has id {max(reverse)} but vocab_size is {vocab_size}")
    tokens: list[str] = []
    types: list[int] = []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append(f"[PAD{i}]")
            types.append(TokenType.UNUSED)
        else:
            tokens.append(reverse[i])
            types.append(TokenType.CONTROL if i in special and special[i]["special"] else TokenType.NORMAL)
    return tokens, [int(t) for t in types]
