"""One seeded defect per rule: each is caught with the right code, severity, gate, location and verdict.

The first block follows docs/calbin.md §10 row by row; the rest covers the other cross-checks of §3–§9. Each
defect edits a clean generated package; the expected set is the exact set of codes above INFO, so a
defect that also trips an unrelated rule (a false positive) fails the test too.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest
import yaml

from converters.acceptance.calbin import validate_calbin
from converters.acceptance.calbin.codes import CODES
from tinymodels.calbin import CalbinFixture

PRE, DEC = "prefill", "decode"


def _sub(fx: CalbinFixture, kind: str) -> Path:
    return fx.submodel_dir(kind)


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, count))


def _edit_re(path: Path, pattern: str, new: str) -> None:
    text, n = re.subn(pattern, new, path.read_text(), count=1, flags=re.M)
    assert n == 1, (path, pattern)
    path.write_text(text)


def _manifest(fx: CalbinFixture) -> Path:
    return fx.root / f"{fx.spec.model_name}.yaml"


def _edit_manifest(fx: CalbinFixture, fn) -> None:
    doc = yaml.safe_load(_manifest(fx).read_text())
    fn(doc)
    _manifest(fx).write_text(yaml.safe_dump(doc, sort_keys=False))


def _cfg(doc: dict, fx: CalbinFixture, kind: str) -> dict:
    return doc["one_model_cfg"][_sub(fx, kind).name]


def _json_edit(path: Path, fn) -> None:
    import json

    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _meta(fx: CalbinFixture, kind: str | None = None) -> Path:
    if kind is None:
        return fx.root / "model_memory_reserved_info.txt"
    return _sub(fx, kind) / "submodel_memory_reserved_info.txt"


def _ops_yaml(fx: CalbinFixture, kind: str) -> Path:
    return _sub(fx, kind) / f"{_sub(fx, kind).name}_op_io_buf_ptr.yaml"


def _profparts(fx: CalbinFixture, kind: str, chip: int) -> Path:
    return _sub(fx, kind) / f"{_sub(fx, kind).name}.chip{chip}.profparts"


def _rm(path: Path) -> None:
    path.unlink()


# (id, mutation, expected codes above INFO, where: {code: (file-suffix, line)} checks)
SECTION_10 = [
    ("required_file_missing", lambda fx: _rm(_meta(fx, DEC)), {"FS_REQUIRED_MISSING"}),
    ("op_yaml_missing", lambda fx: _rm(_ops_yaml(fx, PRE)), {"FS_REQUIRED_MISSING"}),
    ("required_file_empty", lambda fx: _ops_yaml(fx, DEC).write_bytes(b""), {"FS_REQUIRED_EMPTY"}),
    ("param_block_empty", lambda fx: (fx.root / "param_blk1.bin").write_bytes(b""),
     {"FS_REQUIRED_EMPTY", "PARAM_MAP_RANGE"}),
    ("yaml_parse_failure", lambda fx: _edit(_manifest(fx), "seq_len: 64", "seq_len: [64"), {"YAML_PARSE"}),
    ("yaml_duplicate_key", lambda fx: _edit(_manifest(fx), "seq_len: 64\n", "seq_len: 64\nseq_len: 65\n"),
     {"YAML_DUPLICATE_KEY"}),
    ("param_map_out_of_range",
     lambda fx: _edit(_meta(fx), "param_blk1.bin offset 0x4000 vaddr 0x420001000 size 0x1000",
                      "param_blk1.bin offset 0x4000 vaddr 0x420001000 size 0x1001"),
     {"PARAM_MAP_RANGE"}),
    ("param_map_offset_past_end",
     lambda fx: _edit(_meta(fx), "param_blk0.bin offset 0x5000", "param_blk0.bin offset 0x7000"),
     {"PARAM_MAP_RANGE"}),
    ("io_size_formula", lambda fx: _edit(_meta(fx, PRE), "type int32 vaddr", "type int16 vaddr"),
     {"IO_SIZE_MISMATCH"}),
    ("batch_inconsistent", lambda fx: _edit(_meta(fx, DEC), "n_batch 1", "n_batch 2"), {"XREF_BATCH"}),
    ("context_inconsistent", lambda fx: _edit(_manifest(fx), "seq_len: 64", "seq_len: 128"), {"XREF_CONTEXT"}),
    ("decode_past_length",
     lambda fx: _edit_manifest(fx, lambda d: _cfg(d, fx, DEC)["input_shape"].update(past_key_1=[1, 2, 62, 16])),
     {"XREF_CONTEXT", "XREF_GRAPH_INPUTS"}),
    ("model_name_inconsistent", lambda fx: _edit(_meta(fx), "model_arch tiny", "model_arch other"),
     {"XREF_MODEL_NAME"}),
    ("two_prefills",
     lambda fx: _edit_manifest(fx, lambda d: _cfg(d, fx, DEC)["model_info"].update(is_prefill=True)),
     {"SUBMODEL_ROLES"}),
    ("op_yaml_unknown_dtype", lambda fx: _edit(_ops_yaml(fx, PRE), "- F32\n", "- F33\n"), {"OP_DTYPE_UNKNOWN"}),
    ("profparts_unknown_op", lambda fx: _profparts(fx, DEC, 1).write_text(
        _profparts(fx, DEC, 1).read_text() + "ghost_op_7\n"), {"PROFPART_UNKNOWN_OP"}),
    ("onnx_missing", lambda fx: _rm(fx.root / "onnx" / "model.onnx"), {"SUPPLY_ONNX_MISSING"}),
    ("compiler_commit_missing", lambda fx: _edit_manifest(fx, lambda d: d["git_commit_id"].pop("calcc")),
     {"SUPPLY_COMPILER_COMMIT_MISSING"}),
    ("container_missing", lambda fx: _edit_manifest(fx, lambda d: d.pop("compiler_oci_digest")),
     {"SUPPLY_CONTAINER_MISSING"}),
    ("prefill_smodel_type_llm_decode", lambda fx: _edit(_meta(fx, PRE), "llm_prefill", "llm_decode"),
     {"META_SMODEL_TYPE"}),
    ("memory_unit_implausible",
     lambda fx: _edit(_meta(fx), "device_memory_required: 1 MB", "device_memory_required: 546432 MB"),
     {"META_MEMORY_UNIT"}),
    ("tokenizer_context_above_calbin",
     lambda fx: _json_edit(fx.root / "__Tokenizer" / "tokenizer_config.json",
                           lambda d: d.update(model_max_length=131072)), {"TOKENIZER_CONTEXT"}),
]


def _symlink_out(fx):
    outside = fx.root.parent / "outside.py"
    outside.write_text("x = 1\n")
    (fx.root / "version.py").unlink()
    (fx.root / "version.py").symlink_to(outside)


def _drop_pong(fx):
    d = _sub(fx, DEC)
    _edit(_meta(fx, DEC), "cpu_chip1_pong.bin chip 00000000 00000000 00000002\n", "")
    for ext in ("bin", "txt"):
        (d / f"cpu_chip1_pong.{ext}").unlink()


def _swap_so(fx):
    d = _sub(fx, PRE)
    a, b = d / "cpu_helper_riscv64.so", d / "cpu_helper_x86_64.so"
    ab, bb = a.read_bytes(), b.read_bytes()
    a.write_bytes(bb)
    b.write_bytes(ab)


def _so_without_dynamic(fx):
    p = _sub(fx, PRE) / "cpu_helper_x86_64.so"
    raw = bytearray(p.read_bytes())
    struct.pack_into("<I", raw, 64 + 56, 4)  # second program header: PT_DYNAMIC -> PT_NOTE
    p.write_bytes(bytes(raw))


OTHER_RULES = [
    ("symlink_escape", _symlink_out, {"FS_SYMLINK_ESCAPE", "FS_EXPECTED_MISSING"}),
    ("declared_path_escape", lambda fx: _edit(_meta(fx, PRE), "pld_chip0_ping.bin chip", "../pld_chip0_ping.bin chip"),
     {"FS_PATH_ESCAPE", "CMD_PINGPONG_INCOMPLETE", "XREF_FILE_UNDECLARED"}),
    ("fifo_in_package", lambda fx: os.mkfifo(fx.root / "pipe.bin"), {"FS_NOT_REGULAR"}),
    ("declared_file_missing", lambda fx: _rm(_sub(fx, PRE) / "pld_chip0_ping.bin"), {"XREF_FILE_MISSING",
                                                                                   "CMD_PINGPONG_INCOMPLETE"}),
    ("undeclared_elf", lambda fx: (_sub(fx, DEC) / "ccu2_chip0.elf").write_bytes(
        (_sub(fx, DEC) / "ccu0_chip0.elf").read_bytes()), {"XREF_FILE_UNDECLARED"}),
    ("kv_pairing", lambda fx: _edit_manifest(fx, lambda d: _cfg(d, fx, DEC)["input_shape"].pop("past_value_2")),
     {"XREF_KV_PAIRING", "XREF_GRAPH_INPUTS"}),
    ("layer_count_vs_config", lambda fx: _json_edit(fx.root / "__Tokenizer" / "config.json",
                                                    lambda d: d.update(num_hidden_layers=5)), {"XREF_LAYERS"}),
    ("kv_heads_vs_config", lambda fx: _json_edit(fx.root / "__Tokenizer" / "config.json",
                                                 lambda d: d.update(num_key_value_heads=4)), {"XREF_HEADS"}),
    ("rope_theta_vs_config", lambda fx: _json_edit(fx.root / "__Tokenizer" / "config.json",
                                                   lambda d: d.update(rope_theta=10000.0)), {"XREF_ROPE_THETA"}),
    ("encoder_flag", lambda fx: _edit_manifest(fx, lambda d: _cfg(d, fx, PRE)["model_info"].update(is_encoder=True)),
     {"XREF_ARCH"}),
    ("rope_theta_vs_config_transformers_5", lambda fx: _json_edit(
        fx.root / "__Tokenizer" / "config.json",
        lambda d: d.update(rope_parameters={"rope_type": "default", "rope_theta": 10000.0}) or d.pop("rope_theta")),
     {"XREF_ROPE_THETA"}),
    ("layer_count_vs_text_config", lambda fx: _json_edit(
        fx.root / "__Tokenizer" / "config.json",
        lambda d: d.update(text_config={**{k: d.pop(k) for k in ("vocab_size", "num_hidden_layers",
                                                                  "num_attention_heads", "num_key_value_heads",
                                                                  "head_dim")}, "num_hidden_layers": 5})),
     {"XREF_LAYERS"}),
    ("vocab_vs_logits", lambda fx: _json_edit(fx.root / "__Tokenizer" / "config.json",
                                              lambda d: d.update(vocab_size=300)), {"XREF_VOCAB"}),
    ("elf_chip_mask", lambda fx: _edit(_meta(fx, DEC), "ccu1_chip1.elf location dram chip 00000000 00000000 00000002",
                                       "ccu1_chip1.elf location dram chip 00000000 00000000 00000001"),
     {"CHIP_MASK_INVALID"}),
    ("param_chip_mask_beyond_chips", lambda fx: _edit_re(_meta(fx), r"(param_blk1\.bin offset 0x0 .* chip) \S+ \S+ \S+$",
                                                         r"\1 00000000 00000000 00000006"),
     {"CHIP_MASK_INVALID"}),
    ("ping_pong_incomplete", _drop_pong, {"CMD_PINGPONG_INCOMPLETE"}),
    ("metadata_grammar", lambda fx: _edit(_meta(fx), "n_batch 1\n", "n_batch 1\ndram_rsvd vaddr zz size 4\n"),
     {"META_GRAMMAR"}),
    ("metadata_wrong_separator", lambda fx: _edit(_meta(fx), "model_type llm", "model_type: llm"),
     {"META_GRAMMAR", "META_REQUIRED"}),
    ("metadata_unknown_field", lambda fx: _edit(_meta(fx, DEC), "calc_mchip mchip\n", "calc_mchip mchip\nfoo_bar 3\n"),
     {"META_UNKNOWN_FIELD"}),
    ("metadata_model_type", lambda fx: _edit(_meta(fx), "model_type llm", "model_type vlm"), {"META_MODEL_TYPE"}),
    ("manifest_type", lambda fx: _edit_manifest(fx, lambda d: _cfg(d, fx, PRE)["model_info"].update(batch_num="one")),
     {"MANIFEST_SCHEMA"}),
    ("op_yaml_not_a_tuple", lambda fx: _edit(_ops_yaml(fx, DEC), "  - input_0\n", "  - input_0\n  - extra\n"),
     {"OP_YAML_SCHEMA", "XREF_GRAPH_INPUTS"}),
    ("graph_input_unknown", lambda fx: _edit(_ops_yaml(fx, DEC), "- input_5\n", "- input_99\n"),
     {"XREF_GRAPH_INPUTS"}),
    ("profparts_duplicate", lambda fx: _profparts(fx, PRE, 0).write_text(
        _profparts(fx, PRE, 0).read_text() + "rope_1\n"), {"PROFPART_DUPLICATE"}),
    ("io_same_ping_pong", lambda fx: _edit_re(_meta(fx, DEC), r"(obuf logits .* vaddr) (\S+) \S+", r"\1 \2 \2"),
     {"IO_PINGPONG_SAME_VADDR"}),
    ("io_shape_vs_manifest", lambda fx: _edit(_meta(fx, PRE), "ibuf position_ids shape [1,64] type int32",
                                              "ibuf position_ids shape [1,32] type int32"),
     {"XREF_IO_SHAPE", "IO_SIZE_MISMATCH"}),
    ("command_text_grammar", lambda fx: _edit(_sub(fx, DEC) / "pld_chip0_ping.txt", "cmdId=1 ", "cmdId:1 "),
     {"CMD_TEXT_GRAMMAR"}),
    ("command_text_chip_mask", lambda fx: _edit(_sub(fx, DEC) / "cpu_chip1_ping.txt", "chipMask0=0x00000002",
                                                "chipMask0=0x00000001"), {"CMD_CHIP_MASK"}),
    ("hparam_missing", lambda fx: _rm(fx.root / "hparam.yaml"), {"FS_EXPECTED_MISSING"}),
    ("tokenizer_file_missing", lambda fx: _rm(fx.root / "__Tokenizer" / "merges.txt"), {"TOKENIZER_FILE_MISSING"}),
    ("tokenizer_json_invalid", lambda fx: (fx.root / "__Tokenizer" / "generation_config.json").write_text("{"),
     {"TOKENIZER_FILE_INVALID"}),
    ("special_tokens", lambda fx: _json_edit(fx.root / "__Tokenizer" / "generation_config.json",
                                             lambda d: d.update(eos_token_id=[7])), {"TOKENIZER_SPECIAL_TOKENS"}),
    ("onnx_hash_mismatch", lambda fx: (fx.root / "onnx" / "model.onnx").write_bytes(b"other graph"),
     {"SUPPLY_ONNX_HASH_MISMATCH"}),
    ("onnx_hash_malformed", lambda fx: _edit_manifest(fx, lambda d: d.update(onnx_hash=["abc"])),
     {"SUPPLY_ONNX_HASH_MISSING"}),
    ("runtime_compat_missing", lambda fx: _edit_manifest(fx, lambda d: d["runtime_compat"].pop("firmware")),
     {"SUPPLY_FIELD_MISSING"}),
    ("runtime_chip_unknown", lambda fx: _edit_manifest(fx, lambda d: d["runtime_compat"].update(chip="ks9")),
     {"XREF_DEVICE"}),
    ("golden_unmapped", lambda fx: _edit_manifest(fx, lambda d: d["golden_hash"].update(golden_decode=["ab" * 32])),
     {"SUPPLY_GOLDEN_UNMAPPED"}),
    ("elf_header_invalid", lambda fx: (_sub(fx, DEC) / "ccu0_chip1.elf").write_bytes(b"\x7fELF\x03" + bytes(59)),
     {"ELF_HEADER_INVALID"}),
    ("so_isa_name_conflict", _swap_so, {"ELF_MACHINE_NAME_CONFLICT"}),
    ("so_without_dynamic", _so_without_dynamic, {"ELF_DYNAMIC_INVALID"}),
    ("param_outside_reservation", lambda fx: _edit(_meta(fx), "param_blk0.bin offset 0x5000 vaddr 0x420001000",
                                                   "param_blk0.bin offset 0x5000 vaddr 0x10000"),
     {"PARAM_MAP_OUTSIDE_RESERVATION"}),
    ("package_dir_renamed", lambda fx: fx.root.rename(fx.root.parent / "renamed"), {"PACKAGE_DIR_NAME"}),
]


def _validate(fx: CalbinFixture):
    root = fx.root if fx.root.exists() else fx.root.parent / "renamed"
    return validate_calbin(root)


@pytest.mark.parametrize(("name", "mutate", "expected"), SECTION_10 + OTHER_RULES,
                         ids=[d[0] for d in SECTION_10 + OTHER_RULES])
def test_seeded_defect(calbin_package, name, mutate, expected):
    fx = calbin_package
    mutate(fx)
    report = _validate(fx)
    above_info = {f.code for f in report.findings if f.severity != "INFO"}
    assert above_info == expected, [f.to_dict() for f in report.findings if f.severity != "INFO"]
    for code in expected:
        spec = CODES[code]
        for f in report.by_code(code):
            assert (f.severity, f.gate) == (spec.severity, spec.gate)
            assert report.gate(spec.gate).status in ("fail", "pass_with_warnings")
    severities = {CODES[c].severity for c in expected}
    assert report.verdict == ("fail" if "ERROR" in severities else "pass_with_warnings")


def test_section_10_severities_follow_the_seed_policy():
    """§10's table: each rule's severity as the seed prescribes."""
    policy = {"FS_REQUIRED_MISSING": "ERROR", "FS_REQUIRED_EMPTY": "ERROR", "YAML_PARSE": "ERROR",
              "PARAM_MAP_RANGE": "ERROR", "IO_SIZE_MISMATCH": "ERROR", "XREF_BATCH": "ERROR",
              "XREF_CONTEXT": "ERROR", "XREF_MODEL_NAME": "ERROR", "SUBMODEL_ROLES": "ERROR",
              "OP_DTYPE_UNKNOWN": "ERROR", "PROFPART_UNKNOWN_OP": "ERROR",
              "SUPPLY_ONNX_MISSING": "BLOCKED_REPRODUCIBILITY", "SUPPLY_COMPILER_COMMIT_MISSING":
              "BLOCKED_REPRODUCIBILITY", "SUPPLY_CONTAINER_MISSING": "BLOCKED_REPRODUCIBILITY",
              "META_SMODEL_TYPE": "WARNING_VENDOR", "META_MEMORY_UNIT": "WARNING_VENDOR",
              "TOKENIZER_CONTEXT": "WARNING_SERVICE"}
    assert {c: CODES[c].severity for c in policy} == policy
    covered = set().union(*(d[2] for d in SECTION_10))
    assert set(policy) <= covered


def test_locations_name_file_and_line(calbin_package):
    fx = calbin_package
    _edit(_meta(fx), "n_batch 1\n", "n_batch 1\ndram_rsvd vaddr zz size 4\n")
    _edit(_meta(fx, PRE), "type int32 vaddr", "type int16 vaddr")
    report = validate_calbin(fx.root)
    (grammar,) = report.by_code("META_GRAMMAR")
    assert (grammar.file, grammar.line) == ("model_memory_reserved_info.txt", 7)
    (size,) = report.by_code("IO_SIZE_MISMATCH")
    assert size.file == f"{_sub(fx, PRE).name}/submodel_memory_reserved_info.txt"
    assert _meta(fx, PRE).read_text().splitlines()[size.line - 1].startswith("ibuf input_ids")
    assert "product[1, 64] x int16 = 128 bytes, line says size 256" in size.evidence


def test_capacity_and_partition_reports_are_refused_not_zeroed(calbin_package):
    fx = calbin_package
    _edit(_ops_yaml(fx, PRE), "- F32\n", "- F33\n")
    _profparts(fx, DEC, 1).write_text(_profparts(fx, DEC, 1).read_text() + "ghost_op_7\n")
    doc = validate_calbin(fx.root).to_json()
    assert doc["memory"]["address_union"]["prefill"] == {"refused": True, "unknown_dtypes": ["F33"]}
    assert doc["memory"]["address_union"]["decode"]["all"]["union_bytes"] > 0
    assert doc["graph"]["partition"]["decode"] == {"refused": True, "unknown_ops": 1}
    assert doc["graph"]["partition"]["prefill"]["refused"] is False


def test_vaddr_overlap_is_reported_not_judged(calbin_package):
    fx = calbin_package
    _edit(_meta(fx), "param_blk0.bin offset 0x1000 vaddr 0x880001000", "param_blk0.bin offset 0x1000 vaddr 0x880000800")
    report = validate_calbin(fx.root)
    assert report.verdict == "pass"
    overlaps = [f for f in report.by_code("CAP_VADDR_OVERLAP") if f.file == "model_memory_reserved_info.txt"]
    assert len(overlaps) == 1 and "chip 0 dram: 1 parameter mapping(s) overlap earlier ones by 2048 bytes" in \
        overlaps[0].evidence
    assert report.to_json()["memory"]["reservations"]["parameter_overlaps"] == {
        "chip0.dram": {"mappings": 1, "bytes": 2048}}


def test_flood_of_bad_lines_is_capped(calbin_package):
    fx = calbin_package
    _meta(fx).write_text(_meta(fx).read_text() + "!! not metadata\n" * 1000)
    report = validate_calbin(fx.root)
    grammar = report.by_code("META_GRAMMAR")
    assert len(grammar) == 26 and "975 more META_GRAMMAR findings in this file (1000 in all)" in grammar[-1].evidence


def test_config_json_spellings_read_alike(calbin_package):
    """A clean package stays clean with its config.json nested under ``text_config`` (Qwen3-VL / Qwen3.5) and
    with ``rope_theta`` inside ``rope_parameters`` (transformers 5), docs/architectures.md §Config spellings."""
    fx = calbin_package
    flat = _validate(fx)

    def respell(d: dict) -> None:
        text = {k: d.pop(k) for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                      "num_key_value_heads", "head_dim", "max_position_embeddings")}
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": d.pop("rope_theta")}
        d["text_config"] = text

    _json_edit(fx.root / "__Tokenizer" / "config.json", respell)
    nested = _validate(fx)
    assert [f.code for f in nested.findings if f.severity != "INFO"] == []
    assert [f.code for f in nested.findings] == [f.code for f in flat.findings]
    assert nested.verdict == flat.verdict
