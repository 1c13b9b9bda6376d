"""Frontend resources of a conversion (container §9.1): the tokenizer, its config, the chat template and
the generation config — copied byte-for-byte from an HF directory, or rebuilt from a GGUF's tokenizer
metadata when only a GGUF is given — with provenance saying which, per role.

Roles are the upstream file names (§9.1): ``tokenizer.json``, ``tokenizer_config.json``,
``chat_template.jinja``, ``generation_config.json``; for the vision component ``preprocessor_config.json``
and ``video_preprocessor_config.json`` when the HF directory has them (§9.1: processor resources go in
``vision.resources``).

HF directory (:func:`frontend_resources` on an ``hf`` source): every role present is copied verbatim
(``origin: copied`` with its sha256). ``tokenizer.json`` is required. A missing ``chat_template.jinja`` is
extracted from ``tokenizer_config.json``'s ``chat_template`` (then ``chat_template.json``), as
transformers ≤ 4.4x stored it; a missing ``generation_config.json`` is derived from the config's
bos/eos/pad ids, as transformers ``GenerationConfig.from_model_config`` does.

GGUF (``tokenizer.ggml.model`` = ``gpt2``, written by llama.cpp ``_set_vocab_gpt2`` + gguf-py
``SpecialVocab``): the files are rebuilt (``origin: rebuilt``, naming the keys read). The rules — token
types, every ``tokenizer.ggml.pre`` name llama.cpp accepts with its pre-tokenizer type (regexes in order,
``ignore_merges``, ``add_bos``; or why it is refused), special-token keys, sampling keys, limits — are data
in ``mappings/config/frontend_gpt2.yaml`` (docs/gguf-conventions.md §Tokenizer). The ``tokenizer.json``
follows the layout of the released files (``tokenizers`` schema: the name's normalizer (Qwen's: NFC), one
``Split(regex, Isolated)`` per regex + ``ByteLevel(use_regex=false)`` pre-tokenizer, ByteLevel
post-processor (followed by a BOS / EOS template when the tokenizer adds them) and decoder, BPE model with
``vocab``, ``merges`` and ``ignore_merges``):

- NORMAL tokens form ``model.vocab`` (their byte-level spelling, ids kept); CONTROL and USER_DEFINED tokens
  are ``added_tokens`` (``special`` true / false, not normalized); UNUSED ``[PAD{i}]`` fillers are dropped;
- every merge is ``"left right"`` with both parts and their concatenation in the vocabulary (what
  ``tokenizers`` itself checks when it loads a BPE model);
- every vocabulary token is spelled in the 256-character byte-level alphabet.

A GGUF that embeds the original file (``tokenizer.huggingface.json``) gives that file verbatim instead
(``origin: extracted``); the token metadata is still validated.

With ``--tokenizer-dir`` (docs/cli.md §Tokenizer files) ``tokenizer.json``, ``tokenizer_config.json`` and the
chat template come verbatim from the model's original directory (``origin: copied``, with ``tokenizer_dir``)
once their vocabulary and merges equal the GGUF's; an unknown or refused pre-tokenizer name needs it.

The ``tokenizers`` package is not a runtime dependency, so the JSON is written here by hand; the structure
is what ``tokenizers`` serializes for these components (the tests load it with ``tokenizers``). Reads are
bounded: token and merge counts are checked from the GGUF header's array counts before the arrays are
decoded, HF files by size before they are read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from converters.errors import ConverterError, MappingError
from converters.mapping.located import LocatedError, load_located
from converters.model.config_rules import RULES_DIR
from converters.sources.fileio import read_bounded
from converters.sources.gguf_values import NonUTF8String

logger = logging.getLogger(__name__)

SECTION = "§9.1"
TEXT_ROLES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
VISION_ROLES = ("preprocessor_config.json", "video_preprocessor_config.json")
RULES_FILE = RULES_DIR / "frontend_gpt2.yaml"
SCHEMA = "ninfer-frontend-map/1"
#: the conversion flag that takes the tokenizer files from the original repository instead (docs/cli.md)
TOKENIZER_DIR_FLAG = "--tokenizer-dir"


class FrontendError(ConverterError, ValueError):
    """The frontend resources cannot be copied or rebuilt (missing, oversized or inconsistent input)."""

    kind = "frontend"


@dataclass(frozen=True)
class FrontendResources:
    """Resource bytes by role and, per role, where they came from.

    ``provenance[role]`` is ``{"origin": "copied", "file", "sha256", "size"}``,
    ``{"origin": "extracted" | "derived" | "rebuilt", "from", "keys" | "field", "sha256", "size"}`` or
    ``{"origin": "absent"}`` (then the role is not in ``files``).
    """

    files: dict[str, bytes]
    provenance: dict[str, dict] = field(default_factory=dict)

    def for_roles(self, roles) -> dict[str, bytes]:
        """The files of ``roles`` that exist (e.g. :data:`TEXT_ROLES` or :data:`VISION_ROLES`)."""
        return {r: self.files[r] for r in roles if r in self.files}


def _sha(data: bytes) -> dict:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _json_bytes(obj: object, *, sort_keys: bool = False) -> bytes:
    """JSON as transformers / tokenizers save it (2-space indent, UTF-8, trailing newline)."""
    return (json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=sort_keys) + "\n").encode("utf-8")


def load_frontend_rules(path: Path = RULES_FILE) -> dict:
    """The rebuild rules (validated: schema, sections, token types, pre-tokenizers, limits); cached per file
    size and modification time."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise MappingError(f"cannot read rules file: {exc.strerror}", file=str(path), rule="file_readable") from None
    return _load_frontend_rules(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _load_frontend_rules(path: Path, size: int, mtime_ns: int) -> dict:
    try:
        loc = load_located(path)
    except LocatedError as exc:
        raise MappingError(str(exc), file=f"{path}:{exc.line}", rule="yaml_syntax") from None
    data = loc.data
    required = ("schema", "tokenizer_model", "evidence", "limits", "token_types", "pre_tokenizer_source",
                "pre_tokenizer_types", "pre_tokenizers", "special_tokens", "add_special_tokens", "generation",
                "embedded_tokenizer_json", "chat_template", "tokenizer_config")
    if not isinstance(data, dict):
        raise MappingError("expected a mapping", file=loc.where(()), rule="mapping_type")
    for key in required:
        if key not in data:
            raise MappingError(f"missing required key {key!r}", file=loc.where(()), rule="missing_key")
    unknown = sorted(set(data) - set(required))
    if unknown:
        raise MappingError(f"unknown key {unknown[0]!r}", file=loc.where((unknown[0],)), rule="unknown_key")
    if data["schema"] != SCHEMA:
        raise MappingError(f"schema {data['schema']!r} is not {SCHEMA!r}", file=loc.where(("schema",)),
                           rule="schema_version")
    roles = {"vocab", "special", "added", "dropped"}
    token_types = {}
    for tid, spec in data["token_types"].items():
        if not str(tid).isdigit() or not isinstance(spec, dict) or spec.get("role") not in roles:
            raise MappingError(f"token type {tid!r} needs an integer id and a role in {sorted(roles)}",
                               file=loc.where(("token_types", tid)), rule="token_type_role")
        token_types[int(tid)] = spec
    data["token_types"] = token_types
    _check_pre_tokenizers(data, loc)
    for section in ("special_tokens", "add_special_tokens", "generation"):
        for name, spec in data[section].items():
            if not isinstance(spec, dict) or not ({"key"} <= set(spec) or {"keys"} <= set(spec)):
                raise MappingError(f"{section}.{name} needs 'key' or 'keys'", file=loc.where((section, name)),
                                   rule="missing_key")
    for name, value in data["limits"].items():
        if not isinstance(value, int) or value <= 0:
            raise MappingError(f"limit {name} must be a positive integer", file=loc.where(("limits", name)),
                               rule="value_type")
    data["file"] = str(path)
    return data


def _check_pre_tokenizers(data: dict, loc) -> None:
    """Each type has its regexes (strings, in order), ``ignore_merges``, ``add_bos`` and evidence, or says
    why it is ``refused``; each name has a known ``type`` and ``clean_spaces``."""
    for name, spec in data["pre_tokenizer_types"].items():
        where = loc.where(("pre_tokenizer_types", name))
        if not isinstance(spec, dict) or "evidence" not in spec:
            raise MappingError(f"pre-tokenizer type {name!r} needs evidence", file=where, rule="missing_key")
        if "refused" in spec:
            if set(spec) != {"refused", "evidence"} or not isinstance(spec["refused"], str):
                raise MappingError(f"refused pre-tokenizer type {name!r} takes a reason and evidence only",
                                   file=where, rule="value_type")
            continue
        regexes = spec.get("regexes")
        if (not isinstance(regexes, list) or not regexes or not all(isinstance(r, str) and r for r in regexes)
                or not all(isinstance(spec.get(k), bool) for k in ("ignore_merges", "add_bos"))):
            raise MappingError(f"pre-tokenizer type {name!r} needs regexes (non-empty strings), ignore_merges and "
                               "add_bos (booleans)", file=where, rule="value_type")
    for pre, spec in data["pre_tokenizers"].items():
        where = loc.where(("pre_tokenizers", pre))
        if not isinstance(spec, dict) or spec.get("type") not in data["pre_tokenizer_types"]:
            raise MappingError(f"pre-tokenizer {pre!r} needs a type of pre_tokenizer_types", file=where,
                               rule="missing_key")
        if not isinstance(spec.get("clean_spaces"), bool) or spec.get("normalizer", "NFC") != "NFC":
            raise MappingError(f"pre-tokenizer {pre!r}: clean_spaces is a boolean, normalizer absent or NFC",
                               file=where, rule="value_type")


# -- HF directory -------------------------------------------------------------------------------------------

def _read_bounded(path: Path, limit: int) -> bytes:
    """A frontend file: a regular file of at most ``limit`` bytes, read whole and no further."""
    return read_bounded(path, limit, what="frontend file", too_big=lambda size: FrontendError(
        f"{size} bytes exceed the {limit}-byte limit for a frontend file", file=str(path), section=SECTION,
        rule="resource_size"))


def _json_object(data: bytes, path: Path) -> dict:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        raise FrontendError(f"not valid UTF-8 JSON: {exc}", file=str(path), section=SECTION,
                            rule="resource_json") from None
    except RecursionError:
        raise FrontendError("not valid JSON: nested too deep", file=str(path), section=SECTION,
                            rule="resource_json") from None
    if not isinstance(value, dict):
        raise FrontendError("not a JSON object", file=str(path), section=SECTION, rule="resource_json")
    return value


def _template_from(obj: dict, field_name: str) -> str | None:
    """A chat template stored in a JSON field: a string, or transformers' list of named templates."""
    value = obj.get(field_name)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"]
    return None


def _copied(available: Mapping[str, Path], roles: tuple[str, ...], limit: int) -> tuple[dict, dict]:
    """The files of ``roles`` in ``available`` (name → path) byte-for-byte, and a missing
    ``chat_template.jinja`` extracted from ``tokenizer_config.json`` (then ``chat_template.json``)."""
    files: dict[str, bytes] = {}
    prov: dict[str, dict] = {}
    for role in roles:
        if role in available:
            files[role] = _read_bounded(Path(available[role]), limit)
            prov[role] = {"origin": "copied", "file": str(available[role]), **_sha(files[role])}
    if "chat_template.jinja" not in files:
        for name, field_name in (("tokenizer_config.json", "chat_template"), ("chat_template.json", "chat_template")):
            if name not in available:
                continue
            data = files[name] if name in files else _read_bounded(Path(available[name]), limit)
            template = _template_from(_json_object(data, Path(available[name])), field_name)
            if template is not None:
                files["chat_template.jinja"] = template.encode("utf-8")
                prov["chat_template.jinja"] = {"origin": "extracted", "from": str(available[name]),
                                               "field": field_name, **_sha(files["chat_template.jinja"])}
                break
    return files, prov


def _hf_resources(source, rules: dict) -> FrontendResources:
    available: Mapping[str, Path] = getattr(source, "resource_files", {}) or {}
    files, prov = _copied(available, TEXT_ROLES + VISION_ROLES, rules["limits"]["max_hf_file_bytes"])
    if "tokenizer.json" not in files:
        raise FrontendError("tokenizer.json is missing (slow-tokenizer files such as vocab.json/merges.txt are "
                            "not converted)", file=str(Path(source.path) / "tokenizer.json"), section=SECTION,
                            rule="tokenizer_json_required")
    if "generation_config.json" not in files:
        derived = _generation_from_config(getattr(source, "config", None) or {}, Path(source.path) / "config.json")
        if derived:
            files["generation_config.json"] = _json_bytes(derived, sort_keys=True)
            prov["generation_config.json"] = {
                "origin": "derived", "from": str(Path(source.path) / "config.json"), "keys": sorted(derived),
                "evidence": "transformers GenerationConfig.from_model_config (decoder text config's token ids)",
                **_sha(files["generation_config.json"])}
    for role in TEXT_ROLES + VISION_ROLES:
        prov.setdefault(role, {"origin": "absent"})
    return FrontendResources(files=files, provenance=prov)


def _token_ids_ok(value: object) -> bool:
    ids = value if isinstance(value, list) else [value]
    return bool(ids) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)


def _generation_from_config(config: Mapping, file: Path) -> dict:
    """``GenerationConfig.from_model_config``: the token ids of the (text) config, text_config first."""
    text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else config
    out = {}
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = text.get(key)
        value = config.get(key) if value is None else value
        if value is None:
            continue
        if not _token_ids_ok(value):
            raise FrontendError(f"{key} is {value!r}, not a token id or a list of them", file=str(file),
                                json_path=key, section=SECTION, rule="token_id_type")
        out[key] = value
    return out


# -- GGUF ---------------------------------------------------------------------------------------------------

class _Meta:
    """Bounded access to GGUF tokenizer metadata."""

    def __init__(self, source):
        self.metadata = source.metadata
        self.file = str(source.path)
        self.used: list[str] = []

    def error(self, message: str, key: str, rule: str) -> FrontendError:
        return FrontendError(message, file=self.file, json_path=key, section=SECTION, rule=rule)

    def get(self, key: str, default=None, *, exact: bool = False):
        """The value of ``key``; text values must be UTF-8 unless ``exact`` (then a non-UTF-8 string is a
        ``NonUTF8String`` the caller refuses by name, docs/inspect.md §Non-canonical metadata values)."""
        if key not in self.metadata:
            return default
        self.used.append(key)
        value = self.metadata.exact(key) if exact and hasattr(self.metadata, "exact") else self.metadata[key]
        type_of = getattr(self.metadata, "type_of", None)
        if isinstance(value, float) and type_of is not None and type_of(key) == "FLOAT32":
            value = float(str(np.float32(value)))  # the file holds float32: report its shortest repr
        return value

    def array(self, key: str, limit: int, *, exact: bool = False) -> list:
        """A required metadata array, its element count checked against ``limit`` before it is decoded."""
        if key not in self.metadata:
            raise self.error(f"the GGUF has no {key}", key, "required_field_missing")
        entry = getattr(self.metadata, "entry", None)
        count = getattr(getattr(entry(key), "value", None), "count", None) if entry else None
        if count is not None and count > limit:
            raise self.error(f"{key} has {count} entries, more than the {limit} accepted", key, "array_limit")
        value = self.get(key, exact=exact)
        if not isinstance(value, list) or len(value) > limit:
            raise self.error(f"{key} is not an array of at most {limit} entries", key, "array_limit")
        return value

    def token_id(self, key: str, n_tokens: int) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < n_tokens:
            raise self.error(f"{key} = {value!r} is not a token id below {n_tokens}", key, "token_id_range")
        return value


@functools.lru_cache(maxsize=1)
def byte_level_alphabet() -> frozenset[str]:
    """GPT-2's 256 printable characters standing for the bytes 0..255 (``bytes_to_unicode``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = [chr(b) for b in printable]
    chars += [chr(256 + n) for n in range(256 - len(printable))]
    return frozenset(chars)


def _vocab_and_added(meta: _Meta, rules: dict) -> tuple[dict[str, int], list[dict], list[str]]:
    limits = rules["limits"]
    tokens = meta.array("tokenizer.ggml.tokens", limits["max_tokens"], exact=True)
    types = meta.array("tokenizer.ggml.token_type", limits["max_tokens"])
    if len(types) != len(tokens):
        raise meta.error(f"{len(types)} token types for {len(tokens)} tokens", "tokenizer.ggml.token_type",
                         "token_type_count")
    roles = {tid: spec["role"] for tid, spec in rules["token_types"].items()}
    alphabet = byte_level_alphabet()
    vocab: dict[str, int] = {}
    added: list[dict] = []
    for tid, (token, ttype) in enumerate(zip(tokens, types, strict=True)):
        role = roles.get(ttype) if isinstance(ttype, int) and not isinstance(ttype, bool) else None
        if role is None:
            raise meta.error(f"token {tid} has type {ttype!r}, not one of {sorted(roles)}",
                             "tokenizer.ggml.token_type", "token_type_unknown")
        if isinstance(token, NonUTF8String):
            raise meta.error(f"token {tid} is not valid UTF-8 ({token.reason} at byte {token.error_at} of "
                             f"{token.raw[:32].hex(' ')}): a byte-level BPE token is spelled in the byte-level "
                             "alphabet, so its bytes cannot be a vocabulary entry", "tokenizer.ggml.tokens",
                             "token_not_utf8")
        if not isinstance(token, str) or not token or len(token.encode("utf-8")) > limits["max_token_bytes"]:
            raise meta.error(f"token {tid} is not a non-empty string of at most {limits['max_token_bytes']} bytes",
                             "tokenizer.ggml.tokens", "token_string")
        if role == "vocab":
            if not set(token) <= alphabet:
                raise meta.error(f"token {tid} {token!r} is not spelled in the byte-level alphabet",
                                 "tokenizer.ggml.tokens", "byte_level_token")
            if token in vocab:
                raise meta.error(f"token {token!r} is listed twice (ids {vocab[token]} and {tid})",
                                 "tokenizer.ggml.tokens", "duplicate_token")
            vocab[token] = tid
        elif role in ("special", "added"):
            added.append({"id": tid, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": role == "special"})
    return vocab, added, tokens


def _merges(meta: _Meta, rules: dict, vocab: Mapping[str, int]) -> list[list[str]]:
    merges = meta.array("tokenizer.ggml.merges", rules["limits"]["max_merges"])
    pairs = []
    for i, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else []
        if len(parts) != 2 or not all(parts):
            raise meta.error(f"merge {i} {merge!r} is not 'left right'", "tokenizer.ggml.merges", "merge_form")
        for piece in (*parts, parts[0] + parts[1]):
            if piece not in vocab:
                raise meta.error(f"merge {i} {merge!r}: {piece!r} is not in the vocabulary",
                                 "tokenizer.ggml.merges", "merge_out_of_vocabulary")
        pairs.append(parts)
    return pairs


def _byte_level(step: str) -> dict:
    return {"type": step, "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def pre_tokenizer(name: object, rules: dict, *, file: str) -> dict:
    """The pre-tokenizer of ``tokenizer.ggml.pre`` = ``name``: the name's entry merged with its type's
    (``regexes``, ``ignore_merges``, ``add_bos``). An unknown name, or one whose llama.cpp pre-tokenization is
    not a sequence of regex splits over byte-level text (``refused``), is a typed error naming
    :data:`TOKENIZER_DIR_FLAG`."""
    spec = rules["pre_tokenizers"].get(name) if isinstance(name, str) else None
    hint = (f"give the original repository's tokenizer files with {TOKENIZER_DIR_FLAG} HF_DIR "
            "(docs/cli.md §Tokenizer files)")
    if spec is None:
        what = (f"tokenizer.ggml.pre {name!r} is not a pre-tokenizer llama.cpp defines for a BPE vocabulary "
                f"({len(rules['pre_tokenizers'])} known)" if name is not None else "the GGUF has no "
                "tokenizer.ggml.pre (llama.cpp then applies its 'default' regexes and warns that generation "
                "quality will be degraded)")
        raise FrontendError(f"{what}: {hint}", file=file, json_path="tokenizer.ggml.pre", section=SECTION,
                            rule="pre_tokenizer_known")
    kind = rules["pre_tokenizer_types"][spec["type"]]
    if "refused" in kind:
        raise FrontendError(f"tokenizer.ggml.pre {name!r} (llama.cpp {spec['type']}) cannot be rebuilt as regex "
                            f"splits over byte-level BPE: {kind['refused']}; {hint}", file=file,
                            json_path="tokenizer.ggml.pre", section=SECTION, rule="pre_tokenizer_rebuildable")
    return {"name": name, **kind, **spec}


def _post_processor(bos: tuple[str, int] | None, eos: tuple[str, int] | None) -> dict:
    """ByteLevel; followed by a template adding ``bos`` / ``eos`` ((token, id), when the tokenizer adds them),
    the ``Sequence[ByteLevel, TemplateProcessing]`` that Llama 3's released ``tokenizer.json`` has."""
    if bos is None and eos is None:
        return _byte_level("ByteLevel")

    def marks(type_id: int) -> tuple[list, list]:
        return tuple([{"SpecialToken": {"id": t[0], "type_id": type_id}}] if t else [] for t in (bos, eos))

    (b0, e0), (b1, e1) = marks(0), marks(1)
    single = [*b0, {"Sequence": {"id": "A", "type_id": 0}}, *e0]
    pair = [*single, *b1, {"Sequence": {"id": "B", "type_id": 1}}, *e1]
    special = {t[0]: {"id": t[0], "ids": [t[1]], "tokens": [t[0]]} for t in (bos, eos) if t}
    return {"type": "Sequence", "processors": [
        _byte_level("ByteLevel"),
        {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": special}]}


def _tokenizer_json(vocab, added, merges, pre: dict, post_processor: dict) -> dict:
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": pre["normalizer"]} if "normalizer" in pre else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            *({"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
              for r in pre["regexes"]),
            _byte_level("ByteLevel")]},
        "post_processor": post_processor,
        "decoder": _byte_level("ByteLevel"),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": pre["ignore_merges"], "vocab": vocab, "merges": merges},
    }


#: the tokenizer files ``--tokenizer-dir`` gives (the chat template may also come from tokenizer_config.json)
DIR_ROLES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def _from_tokenizer_dir(meta: _Meta, rules: dict, directory: Path, tokens: list, vocab: Mapping[str, int],
                        added: list[dict], merges: list[list[str]]) -> tuple[dict, dict]:
    """``tokenizer.json``, ``tokenizer_config.json`` and the chat template of ``directory``, verbatim, after
    checking that their vocabulary (``model.vocab`` and ``added_tokens``; ``added_tokens_decoder``) and
    ``model.merges`` equal the GGUF's token list and merges (llama.cpp's ``[PAD{i}]`` fillers aside)."""
    names = DIR_ROLES + ("chat_template.json",)
    files, prov = _copied({n: directory / n for n in names if (directory / n).exists() or (directory / n).is_symlink()},
                          DIR_ROLES, rules["limits"]["max_hf_file_bytes"])
    for role in DIR_ROLES[:2]:
        if role not in files:
            raise FrontendError(f"{TOKENIZER_DIR_FLAG} {directory} has no {role}", file=str(directory / role),
                                section=SECTION, rule="tokenizer_dir_file")
    tj_file, tc_file = directory / "tokenizer.json", directory / "tokenizer_config.json"
    tj, tc = _json_object(files["tokenizer.json"], tj_file), _json_object(files["tokenizer_config.json"], tc_file)
    model = tj.get("model") if isinstance(tj.get("model"), dict) else {}

    def differs(file: Path, path: str, what: str, rule: str) -> FrontendError:
        return FrontendError(f"{what}, so this tokenizer does not belong to {meta.file}", file=str(file),
                             json_path=path, section=SECTION, rule=rule)

    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise differs(tj_file, "model", f"model is {model.get('type')!r}, not a BPE model with a vocab",
                      "tokenizer_dir_vocab")
    want = {i: t for t, i in vocab.items()} | {a["id"]: a["content"] for a in added}
    got = {i: t for t, i in model["vocab"].items()}
    for a in tj.get("added_tokens") or []:
        if isinstance(a, dict):
            got[a.get("id")] = a.get("content")
    for tid in sorted(set(want) | set(got), key=lambda i: (not isinstance(i, int), i if isinstance(i, int) else 0)):
        if want.get(tid) != got.get(tid):
            raise differs(tj_file, "model.vocab", f"token id {tid} is {got.get(tid)!r} here and "
                          f"{want.get(tid)!r} in tokenizer.ggml.tokens", "tokenizer_dir_vocab")
    theirs = [m.split(" ") if isinstance(m, str) else m for m in model.get("merges") or []]
    if theirs != merges:
        i = next((i for i, (a, b) in enumerate(zip(theirs, merges, strict=False)) if a != b),
                 min(len(theirs), len(merges)))
        raise differs(tj_file, "model.merges", f"{len(theirs)} merges here, {len(merges)} in tokenizer.ggml.merges, "
                      f"first difference at merge {i}", "tokenizer_dir_merges")
    decoder = tc.get("added_tokens_decoder") if isinstance(tc.get("added_tokens_decoder"), dict) else {}
    for key, entry in decoder.items():
        tid = int(key) if str(key).isdigit() else -1
        content = entry.get("content") if isinstance(entry, dict) else None
        if not 0 <= tid < len(tokens) or tokens[tid] != content:
            raise differs(tc_file, f"added_tokens_decoder.{key}", f"added token {key} is {content!r} here and "
                          f"{tokens[tid] if 0 <= tid < len(tokens) else None!r} in tokenizer.ggml.tokens",
                          "tokenizer_dir_vocab")
    checked = {"tokenizer_dir": str(directory), "checked_against": meta.file,
               "checked_keys": ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"]}
    return files, {role: {**entry, **checked} for role, entry in prov.items()}


def _gguf_resources(source, rules: dict, tokenizer_dir: Path | None = None) -> FrontendResources:
    meta = _Meta(source)
    model = meta.get("tokenizer.ggml.model")
    if model != rules["tokenizer_model"]:
        raise meta.error(f"tokenizer.ggml.model is {model!r}; only {rules['tokenizer_model']!r} (byte-level BPE) "
                         "can be rebuilt or checked against tokenizer files", "tokenizer.ggml.model",
                         "tokenizer_model_supported")
    pre_name = meta.get("tokenizer.ggml.pre")
    pre = pre_tokenizer(pre_name, rules, file=meta.file) if tokenizer_dir is None else None
    vocab, added, tokens = _vocab_and_added(meta, rules)
    merges = _merges(meta, rules, vocab)
    tokenizer_keys = list(meta.used)

    files: dict[str, bytes] = {}
    prov: dict[str, dict] = {}

    def put(role: str, data: bytes, keys: list[str], **extra) -> None:
        files[role] = data
        prov[role] = {"origin": "rebuilt", "from": meta.file, "keys": keys, **extra, **_sha(data)}

    embedded_key = rules["embedded_tokenizer_json"]["key"]
    embedded = meta.get(embedded_key) if tokenizer_dir is None else None
    if tokenizer_dir is not None:
        files, prov = _from_tokenizer_dir(meta, rules, Path(tokenizer_dir), tokens, vocab, added, merges)
    elif embedded is None:
        bos, eos, keys = _added_by_template(meta, pre, tokens)
        put("tokenizer.json", _json_bytes(_tokenizer_json(vocab, added, merges, pre, _post_processor(bos, eos))),
            tokenizer_keys + keys, pre_tokenizer=pre_name)
    else:
        data = embedded.encode("utf-8") if isinstance(embedded, str) else b""
        if not data or len(data) > rules["limits"]["max_hf_file_bytes"]:
            raise meta.error(f"{embedded_key} is not a string within the file limit", embedded_key, "resource_size")
        try:
            _json_object(data, Path(meta.file))
        except FrontendError:
            raise meta.error(f"{embedded_key} is not a JSON object", embedded_key, "resource_json") from None
        files["tokenizer.json"] = data
        prov["tokenizer.json"] = {"origin": "extracted", "from": meta.file, "field": embedded_key, **_sha(data)}

    meta.used = []
    if tokenizer_dir is None:
        put("tokenizer_config.json", _json_bytes(_tokenizer_config(meta, rules, pre, added, tokens), sort_keys=True),
            ["tokenizer.ggml.token_type", *meta.used])

    meta.used = []
    template = meta.get(rules["chat_template"]["key"]) if "chat_template.jinja" not in files else None
    if template is not None:
        if not isinstance(template, str) or len(template.encode("utf-8")) > rules["limits"]["max_template_bytes"]:
            raise meta.error("tokenizer.chat_template is not a string within the template limit",
                             rules["chat_template"]["key"], "chat_template")
        others = sorted(k for k in meta.metadata if k.startswith(rules["chat_template"]["key"] + "."))
        put("chat_template.jinja", template.encode("utf-8"), list(meta.used),
            **({"not_carried": others} if others else {}))

    meta.used = []
    generation = _generation_from_gguf(meta, rules, len(tokens))
    if generation:
        put("generation_config.json", _json_bytes(generation, sort_keys=True), list(meta.used))
    for role in TEXT_ROLES + VISION_ROLES:
        prov.setdefault(role, {"origin": "absent"})
    return FrontendResources(files=files, provenance=prov)


def _added_by_template(meta: _Meta, pre: dict, tokens: list) -> tuple:
    """``(bos, eos, keys)``: the (token, id) of BOS / EOS when the tokenizer adds it — per
    ``tokenizer.ggml.add_bos_token`` / ``add_eos_token``, else llama.cpp's default for the pre-tokenizer
    (``add_bos``) — and the keys that decided it."""
    out, keys = [], []
    for flag, key, default in (("tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", pre["add_bos"]),
                               ("tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", False)):
        value = meta.metadata[flag] if flag in meta.metadata else None
        tid = meta.metadata[key] if key in meta.metadata else None
        if (value is True or (value is None and default)) and isinstance(tid, int) and 0 <= tid < len(tokens):
            out.append((tokens[tid], tid))
            keys += [k for k in (flag, key) if k in meta.metadata]
        else:
            out.append(None)
    return out[0], out[1], keys


def _tokenizer_config(meta: _Meta, rules: dict, pre: dict, added: list[dict], tokens: list) -> dict:
    """``tokenizer_config.json``: add_bos/eos_token (the GGUF's, else llama.cpp's default), the constants,
    ``clean_up_tokenization_spaces`` (llama.cpp's clean_spaces), the added tokens, special tokens, class."""
    tc: dict[str, object] = {}
    for name, spec in rules["add_special_tokens"].items():
        value = meta.get(spec["key"])
        if value is not None and not isinstance(value, bool):
            raise meta.error(f"{spec['key']} = {value!r} is not a bool", spec["key"], "field_type")
        if value is not None:
            tc[name] = value
    if pre["add_bos"]:
        tc.setdefault("add_bos_token", True)
    tc.update(rules["tokenizer_config"]["constants"])
    tc["clean_up_tokenization_spaces"] = pre["clean_spaces"]
    tc["added_tokens_decoder"] = {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                    "single_word", "special")} for t in added}
    for name, spec in rules["special_tokens"].items():
        tid = meta.token_id(spec["key"], len(tokens))
        tc[name] = None if tid is None else tokens[tid]
    tc["tokenizer_class"] = pre.get("tokenizer_class", rules["tokenizer_config"]["default_tokenizer_class"])
    return tc


def _generation_from_gguf(meta: _Meta, rules: dict, n_tokens: int) -> dict:
    out: dict[str, object] = {}
    for name, spec in rules["generation"].items():
        if name.endswith("_token_id"):
            ids = [meta.token_id(k, n_tokens) for k in spec.get("keys", [spec.get("key")])]
            ids = list(dict.fromkeys(i for i in ids if i is not None))
            if ids:
                out[name] = ids[0] if len(ids) == 1 else ids
            continue
        value = meta.get(spec["key"])
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise meta.error(f"{spec['key']} = {value!r} is not a number", spec["key"], "field_type")
            out[name] = value
    return out


def frontend_resources(source, *, rules_file: Path = RULES_FILE,
                       tokenizer_dir: Path | None = None) -> FrontendResources:
    """The frontend resources of a GGUF or HF source (see the module docstring); for a GGUF with
    ``tokenizer_dir`` (``--tokenizer-dir``), that directory's tokenizer files, checked against the GGUF's."""
    rules = load_frontend_rules(rules_file)
    if tokenizer_dir is not None and source.kind != "gguf":
        raise FrontendError(f"{TOKENIZER_DIR_FLAG} applies to a GGUF source; a {source.kind} source's own "
                            "tokenizer files are used", file=str(tokenizer_dir), section=SECTION,
                            rule="tokenizer_dir_source")
    if source.kind == "hf":
        return _hf_resources(source, rules)
    if source.kind == "gguf":
        return _gguf_resources(source, rules, tokenizer_dir)
    raise FrontendError(f"a {source.kind} source carries no tokenizer; convert from the HF directory or a GGUF",
                        file=str(source.path), section=SECTION, rule="frontend_available")


__all__ = ["FrontendError", "FrontendResources", "TEXT_ROLES", "TOKENIZER_DIR_FLAG", "VISION_ROLES",
           "byte_level_alphabet", "frontend_resources", "load_frontend_rules", "pre_tokenizer"]
