"""HF checkpoint directory: ``config.json``, safetensors shards (through ``model.safetensors.index.json``
when sharded) and the frontend resource files beside them.

Rules (docs/inspect.md §Sharded directories; transformers ``save_pretrained`` layout):

- ``config.json`` and the index are strict JSON (:mod:`strict_json`), at most the header cap in size;
- the index is ``{"metadata": {...}, "weight_map": {tensor: shard file}}``; shard names are plain file
  names in the directory (no ``/``, ``\\``, NUL, ``.`` or ``..``);
- every shard is parsed by the strict safetensors parser; the index and the shards agree exactly: each
  mapped tensor is in its shard, each shard tensor is mapped to that shard, and no tensor name occurs in
  two shards (no silent ``dict.update`` merge, unlike mlx-lm's loader);
- without an index the directory holds ``model.safetensors`` or exactly one ``*.safetensors`` file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from converters.errors import SourceError, SourceFormatError
from converters.sources import strict_json
from converters.sources.base import ShardedSource
from converters.sources.fileio import OpenFile, lexists
from converters.sources.limits import HEADER_CAP
from converters.sources.safetensors import SafetensorsSource

INDEX_NAME = "model.safetensors.index.json"
CONFIG_NAME = "config.json"
#: ModelOpt's quantization side file: with ``config.json``'s ``quantization_config``, what makes a checkpoint
#: prequantized (docs/prequantized.md §Detection)
QUANT_CONFIG_NAME = "hf_quant_config.json"
RESOURCE_NAMES = (
    "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
    "generation_config.json", "preprocessor_config.json", "video_preprocessor_config.json",
    "processor_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
    "tokenizer.model",
)
SECTION = "docs/inspect.md §Sharded directories"


def read_json_file(path: Path, what: str):
    """Read a small JSON side file strictly (typed errors; size bounded by the header cap).

    Returns ``(value, sha256_hex, size)``; ``FileIdentity`` of what was read is ``value_identity``.
    """
    value, sha, size, _ = read_json_file_with_identity(path, what)
    return value, sha, size


def read_json_file_with_identity(path: Path, what: str):
    """:func:`read_json_file` plus the :class:`FileIdentity` of the descriptor it read."""
    with OpenFile(path) as f:
        if f.size > HEADER_CAP:
            raise SourceFormatError(f"{what}: {f.size} bytes exceed the {HEADER_CAP}-byte cap",
                                    file=str(path), rule="header_cap", category="limit_exceeded")
        data = f.pread(f.size, 0) if f.size else b""
    value = strict_json.loads(data, file=path, what=what)
    return value, hashlib.sha256(data).hexdigest(), len(data), f.identity


def _plain_name(name) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..")
            and not any(c in name for c in ("/", "\\", "\x00")))


class HFCheckpoint(ShardedSource):
    kind = "hf"

    def __init__(self, path, *, require_config: bool = True) -> None:
        super().__init__(path)
        if not self.path.is_dir():
            raise SourceError("not a directory", file=str(self.path), code="target_unavailable",
                              category="not_directory", rule="target_usable")
        self.config: dict | None = None
        self.side_files: dict[str, dict] = {}  # name -> {sha256, size}
        self.side_identity: dict = {}  # name -> FileIdentity when read
        self.index: dict | None = None
        self.shards: dict[str, SafetensorsSource] = {}
        self.index_total_size: int | None = None
        self.resource_files: dict[str, Path] = {}
        try:
            self._open()
            if self.declares_quantization():  # the prequantized readers are imported only for such a source
                from converters.sources.prequantized import attach

                self.quantization = attach(self)  # docs/prequantized.md §Detection
        except BaseException:
            self.close()
            raise
        if require_config and self.config is None:
            self.close()
            raise SourceError(f"{CONFIG_NAME} is missing", file=str(self.path / CONFIG_NAME),
                              code="target_unavailable", category="missing", rule="hf_config_present")

    def declares_quantization(self) -> bool:
        """Whether the checkpoint declares a quantization (``quantization_config`` or ModelOpt's side file):
        only then can :func:`converters.sources.prequantized.attach` find one."""
        return (self.config or {}).get("quantization_config") is not None or (self.path / QUANT_CONFIG_NAME).is_file()

    def read_side_json(self, name: str):
        """Read the JSON side file ``name`` strictly, recording its digest, size and identity."""
        value, sha, size, ident = read_json_file_with_identity(self.path / name, name)
        self.side_files[name] = {"sha256": sha, "size": size}
        self.side_identity[name] = ident
        return value

    def _open(self) -> None:
        cfg = self.path / CONFIG_NAME
        if cfg.exists():
            self.config = self.read_side_json(CONFIG_NAME)
            if not isinstance(self.config, dict):
                raise SourceFormatError(f"{CONFIG_NAME} is not a JSON object", file=str(cfg), rule="hf_config_object")
        idx = self.path / INDEX_NAME
        if idx.exists():
            self._open_index(idx)
        else:
            self._open_single()
        # anything by these names, not only regular files: a FIFO or device named tokenizer_config.json is
        # refused when read (docs/robustness.md §Promises), not skipped as if absent
        self.resource_files = {n: self.path / n for n in RESOURCE_NAMES if lexists(self.path / n)}

    def _open_index(self, idx: Path) -> None:
        index = self.read_side_json(INDEX_NAME)
        wm = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(wm, dict) or not wm:
            raise SourceFormatError("weight_map is missing or empty", file=str(idx), json_path="$.weight_map",
                                    rule="hf_index_weight_map", section=SECTION)
        for name, shard in wm.items():
            if not _plain_name(shard):
                raise SourceFormatError(f"shard name {shard!r} of {name!r} is not a plain file name",
                                        file=str(idx), json_path=f"$.weight_map.{name}", rule="hf_index_shard_name",
                                        section=SECTION)
        meta = index.get("metadata")
        if isinstance(meta, dict) and type(meta.get("total_size")) is int:
            self.index_total_size = meta["total_size"]
        self.index = index
        for shard in sorted(set(wm.values())):
            self.shards[shard] = SafetensorsSource(self.path / shard)
        owner: dict[str, str] = {}
        for shard, src in self.shards.items():
            for name in src.tensors:
                if name in owner:
                    raise SourceFormatError(f"tensor {name!r} is in both {owner[name]} and {shard}",
                                            file=str(self.path / shard), json_path=name,
                                            rule="hf_duplicate_tensor", section=SECTION)
                owner[name] = shard
                if wm.get(name) != shard:
                    where = "not in the index" if name not in wm else f"indexed in {wm[name]}"
                    raise SourceFormatError(f"tensor {name!r} of {shard} is {where}", file=str(idx),
                                            json_path=f"$.weight_map.{name}", rule="hf_index_mismatch",
                                            section=SECTION)
        for name, shard in wm.items():
            if owner.get(name) != shard:
                raise SourceFormatError(f"indexed tensor {name!r} is not in {shard}", file=str(idx),
                                        json_path=f"$.weight_map.{name}", rule="hf_index_mismatch",
                                        section=SECTION)
        self._merge()

    def _open_single(self) -> None:
        files = sorted(p.name for p in self.path.glob("*.safetensors") if p.is_file())
        if "model.safetensors" in files:
            files = ["model.safetensors"]
        if len(files) != 1:
            raise SourceError(f"expected {INDEX_NAME}, model.safetensors or exactly one *.safetensors file; "
                              f"found {len(files)} safetensors files", file=str(self.path),
                              code="target_unavailable", category="unusable", rule="hf_weights_present",
                              section=SECTION)
        self.shards[files[0]] = SafetensorsSource(self.path / files[0])
        self._merge()

    def _merge(self) -> None:
        for src in self.shards.values():
            self.tensors.update(src.tensors)

    @property
    def metadata(self) -> dict[str, str]:
        first = next(iter(self.shards.values()), None)
        return dict(first.metadata) if first is not None else {}

    @property
    def tensor_bytes(self) -> int:
        return sum(t.byte_length for s in self.shards.values() for t in s.tensors.values())



def open_hf_dir(path, *, require_config: bool = True) -> HFCheckpoint:
    """Open an HF checkpoint directory (raises :class:`~converters.errors.SourceError`)."""
    return HFCheckpoint(path, require_config=require_config)
