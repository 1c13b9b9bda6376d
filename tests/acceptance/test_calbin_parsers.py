"""The calbin parsers one by one: metadata line forms, strict YAML, ELF, intervals, dtypes, command text."""

from __future__ import annotations

import struct

import pytest

from converters.acceptance.calbin import yamlio
from converters.acceptance.calbin.commands import parse_command_text
from converters.acceptance.calbin.context import Ctx
from converters.acceptance.calbin.dtypes import dtype_bits, tensor_bytes
from converters.acceptance.calbin.elf import ElfError, read_header, read_needed
from converters.acceptance.calbin.grammar import (
    RUNTIME_FORMS,
    SUBMODEL_FORMS,
    mask_of,
    parse_list,
    parse_metadata,
    parse_quantity,
)
from converters.acceptance.calbin.intervals import coverage, uncovered
from converters.acceptance.calbin.yamlio import YamlLoadError, load_yaml
from converters.acceptance.report import SCHEMA_CALBIN, Report


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


# -- metadata grammar -----------------------------------------------------------------------------------
def test_runtime_line_forms(tmp_path):
    p = _write(tmp_path, "m.txt", "\n".join([
        "calcc_ver: v0.1",
        "device0: [ks1, ks2]",
        "device_memory_required: 16777216 MB",
        "model_arch Qwen3-30B",
        "",
        "dram_rsvd vaddr 0x880000000 size 15113064448",
        "sync_rsvd vaddr 43f000000 size 20",
        "param_blk1.bin offset 0x1000 vaddr 0xABC000 size 0x2000 chip 00000001 00000000 00000002",
    ]) + "\n")
    meta = parse_metadata(p, "m.txt", RUNTIME_FORMS)
    assert meta.issues == []
    assert [(f.key, f.value, f.line, f.known) for f in meta.fields] == [
        ("calcc_ver", "v0.1", 1, True), ("device0", "[ks1, ks2]", 2, True),
        ("device_memory_required", "16777216 MB", 3, True), ("model_arch", "Qwen3-30B", 4, True)]
    assert [(r.domain, r.vaddr, r.size, r.line) for r in meta.reservations] == [
        ("dram", 0x880000000, 15113064448, 6), ("sync", 0x43F000000, 20, 7)]
    (m,) = meta.mappings
    assert (m.file, m.offset, m.vaddr, m.size, m.line) == ("param_blk1.bin", 0x1000, 0xABC000, 0x2000, 8)
    assert m.mask == (1 << 64) | 2 == mask_of("00000001", "00000000", "00000002")


def test_submodel_line_forms(tmp_path):
    p = _write(tmp_path, "s.txt", "\n".join([
        "smodel_type llm_decode",
        "calc_utype [cpu,ccu]",
        "workload 17179869184 Byte",
        "ccu_stack_config location dram",
        "cpu_chip0_ping.bin chip 00000000 00000000 00000001",
        "ccu0_chip1.elf location dram chip 00000000 00000000 00000002",
        "icsr tokens_len offset 0x10",
        "ibuf input_ids shape [1,40960] type int32 vaddr 0x100 0x200 size 163840",
        "obuf logits shape [ 1, 1, 151936 ] type bfloat16 vaddr 0x300 0x400 size 303872",
    ]) + "\n")
    meta = parse_metadata(p, "s.txt", SUBMODEL_FORMS)
    assert meta.issues == []
    assert [f.key for f in meta.fields] == ["smodel_type", "calc_utype", "workload", "ccu_stack_config"]
    assert meta.fields[3].value == "dram"
    assert [(d.file, d.mask, d.location) for d in meta.decls] == [("cpu_chip0_ping.bin", 1, None),
                                                                  ("ccu0_chip1.elf", 2, "dram")]
    assert [(c.name, c.offset) for c in meta.csrs] == [("tokens_len", 16)]
    ib, ob = meta.buffers
    assert (ib.direction, ib.name, ib.shape, ib.dtype, ib.vaddr_ping, ib.vaddr_pong, ib.size) == (
        "ibuf", "input_ids", (1, 40960), "int32", 0x100, 0x200, 163840)
    assert ob.shape == (1, 1, 151936) and tensor_bytes(ob.shape, ob.dtype) == ob.size


@pytest.mark.parametrize(
    ("line", "forms", "message"),
    [
        ("model_type: llm", RUNTIME_FORMS, "must be written as 'model_type VALUE'"),
        ("calcc_ver v0.1", RUNTIME_FORMS, "must be written as 'calcc_ver: VALUE'"),
        ("dram_rsvd vaddr 0x10 size 0x20", RUNTIME_FORMS, "malformed dram_rsvd line"),
        ("p.bin offset 0x0 vaddr 0x0 size 0x10 chip 1 2", RUNTIME_FORMS, "matches no metadata line form"),
        ("p.bin offset 0x0 vaddr 0x0 size 0x10 chip 123456789 0 1", RUNTIME_FORMS, "matches no"),
        ("ibuf x shape [1,a] type int32 vaddr 0x1 0x2 size 4", SUBMODEL_FORMS, "malformed ibuf line"),
        ("smodel_type: llm_decode", SUBMODEL_FORMS, "must be written as 'smodel_type VALUE'"),
        ("calcc_ver:", RUNTIME_FORMS, "matches no metadata line form"),
    ],
)
def test_grammar_errors_name_the_line(tmp_path, line, forms, message):
    p = _write(tmp_path, "m.txt", f"model_arch x\n{line}\n")
    meta = parse_metadata(p, "m.txt", forms)
    assert [(i.line, message in i.message) for i in meta.issues] == [(2, True)], meta.issues


def test_grammar_rejects_bad_bytes_and_long_lines(tmp_path):
    p = _write(tmp_path, "m.txt", b"model_arch x\nmodel_type \xff\xfe\n" + b"n_batch " + b"1" * 70000 + b"\n")
    meta = parse_metadata(p, "m.txt", RUNTIME_FORMS)
    assert [(i.line, i.message.split(" ")[0]) for i in meta.issues] == [(2, "not"), (3, "line")]


def test_unknown_field_is_kept_as_unknown(tmp_path):
    meta = parse_metadata(_write(tmp_path, "m.txt", "new_field 3\n"), "m.txt", SUBMODEL_FORMS)
    assert [(f.key, f.known) for f in meta.fields] == [("new_field", False)] and meta.issues == []


def test_typed_values():
    assert parse_quantity("16777216 MB") == (16777216, "MB", 1 << 20)
    assert parse_quantity("17179869184 Byte") == (17179869184, "Byte", 1)
    assert parse_quantity("12 parsecs") is None and parse_quantity("MB 12") is None
    assert parse_list("[cpu,ccu]") == ["cpu", "ccu"] and parse_list("[]") == [] and parse_list("cpu") is None


# -- YAML ---------------------------------------------------------------------------------------------
def test_yaml_duplicate_key_names_the_second_line(tmp_path):
    p = _write(tmp_path, "a.yaml", "a: 1\nb:\n  c: 2\n  d: 3\n  c: 4\n")
    with pytest.raises(YamlLoadError) as exc:
        load_yaml(p, "a.yaml")
    assert (exc.value.duplicate, exc.value.line) == (True, 5) and "first on line 3" in exc.value.message


def test_yaml_safe_semantics(tmp_path):
    doc = load_yaml(_write(tmp_path, "a.yaml", "x: 0x10\nbase: &b {k: 1}\nuse:\n  <<: *b\n  k: 2\ns: &s [1, 2]\nt: *s\n"),
                    "a.yaml")
    assert doc == {"x": 16, "base": {"k": 1}, "use": {"k": 2}, "s": [1, 2], "t": [1, 2]}
    with pytest.raises(YamlLoadError) as exc:
        load_yaml(_write(tmp_path, "b.yaml", "a: !!python/object:os.system {}\n"), "b.yaml")
    assert not exc.value.duplicate
    with pytest.raises(YamlLoadError) as exc:
        load_yaml(_write(tmp_path, "c.yaml", "a: [1,\n"), "c.yaml")
    assert exc.value.line == 2
    with pytest.raises(YamlLoadError, match="not UTF-8"):
        load_yaml(_write(tmp_path, "d.yaml", b"a: \xff\n"), "d.yaml")


def test_yaml_size_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(yamlio, "MAX_YAML_BYTES", 8)
    with pytest.raises(YamlLoadError, match="exceeds"):
        load_yaml(_write(tmp_path, "a.yaml", "a: 123456789\n"), "a.yaml")


# -- ELF ----------------------------------------------------------------------------------------------
def _elf32_be_header(e_type=2, machine=8, phnum=0, phoff=0) -> bytes:
    ident = b"\x7fELF" + bytes([1, 2, 1]) + bytes(9)
    return ident + struct.pack(">HHIIIIIHHHHHH", e_type, machine, 1, 0, phoff, 0, 0, 52, 32, phnum, 40, 0, 0)


def test_elf_header_32bit_big_endian(tmp_path):
    hdr = read_header(_write(tmp_path, "a.elf", _elf32_be_header()), "a.elf")
    assert (hdr.bits, hdr.endian, hdr.type_name, hdr.e_machine) == (32, ">", "EXEC", 8)


@pytest.mark.parametrize(
    ("data", "rule"),
    [
        (b"\x7fEL", "elf_magic"),
        (b"MZ" + bytes(62), "elf_magic"),
        (b"\x7fELF" + bytes([3, 1, 1]) + bytes(57), "elf_class"),
        (b"\x7fELF" + bytes([2, 1, 1]) + bytes(20), "elf_short"),
        (_elf32_be_header(phnum=3, phoff=52), "elf_phdr_range"),
        (_elf32_be_header(e_type=9), "elf_type"),
    ],
)
def test_elf_header_rejections(tmp_path, data, rule):
    with pytest.raises(ElfError) as exc:
        read_header(_write(tmp_path, "a.elf", data), "a.elf")
    assert exc.value.rule == rule and exc.value.file == "a.elf"


def test_elf_needed_unterminated_name(tmp_path):
    from tinymodels.calbin import _elf

    raw = bytearray(_elf(3, 62, ["libc.so.6"]))
    strtab_at = raw.index(b"libc.so.6")
    # shrink DT_STRSZ so the name loses its NUL terminator
    dyn_off = 64 + 56 * 2
    struct.pack_into("<qQ", raw, dyn_off + 16 * 2, 10, strtab_at - raw.index(b"\0libc") + 5)
    p = _write(tmp_path, "a.so", bytes(raw))
    hdr = read_header(p, "a.so")
    with pytest.raises(ElfError) as exc:
        read_needed(p, "a.so", hdr)
    assert exc.value.rule == "elf_strtab"


# -- intervals, dtypes ----------------------------------------------------------------------------------
def test_coverage_merges_and_counts_overlaps():
    cov = coverage([100, 0, 50, 200, 260], [50, 60, 10, 50, 0])
    assert cov.merged == [(0, 60), (100, 150), (200, 250)]
    assert (cov.union_bytes, cov.total_bytes, cov.overlap_bytes, cov.overlapping_pairs) == (160, 170, 10, 1)
    assert uncovered(300, cov.merged) == [(60, 100), (150, 200), (250, 300)]
    assert uncovered(50, []) == [(0, 50)] and coverage([], []).union_bytes == 0
    big = coverage([2**63, 2**63 + 10], [20, 20])
    assert big.merged == [(2**63, 2**63 + 30)]


def test_dtype_table():
    assert [dtype_bits(n) for n in ("BF16", "bfloat16", "S32", "int32", "PRED", "S4", "F8E4M3FN")] == [
        16, 16, 32, 32, 8, 4, 8]
    assert tensor_bytes((3, 3), "S4") == 5 and tensor_bytes((1, 40960), "int32") == 163840
    assert tensor_bytes((2,), "BF17") is None and dtype_bits("") is None


# -- command text -----------------------------------------------------------------------------------------
def test_command_text_summary_and_errors(tmp_path):
    text = "\n".join([
        "# CMD_DMA", "cmdId=0 chipMask0=0x2 srcAddr=0x1000 dstAddr=0x9000 dataSize=4096",
        "# CMD_DMA", "cmdId=1, chipMask0=0x1, srcAddr=0x500, dstAddr=0xA000, dataSize=100",
        "# CMD_SYNC", "cmdId=2 chipMask0=2 syncRegIdx=4",
        "cmdId=3 chipMask0=2",
        "# CMD_DMA", "cmdId=2 chipMask0=0x2 dataSize=08",
        "# CMD_TAIL",
    ]) + "\n"
    _write(tmp_path, "pld_chip1_ping.txt", text)
    ctx = Ctx(tmp_path, Report(SCHEMA_CALBIN))
    out = parse_command_text(ctx, "pld_chip1_ping.txt", 1)
    assert (out.commands, dict(out.types), out.with_data_size, out.data_size_bytes) == (
        4, {"CMD_DMA": 3, "CMD_SYNC": 1}, 3, 4096 + 100 + 8)
    assert out.src_addr_range == [0x500, 0x1000] and out.dst_addr_range == [0x9000, 0xA000]
    found = [(f.code, f.line) for f in ctx.report.findings]
    assert found == [("CMD_TEXT_GRAMMAR", 7), ("CMD_TEXT_GRAMMAR", 9), ("CMD_TEXT_GRAMMAR", None),
                     ("CMD_CHIP_MASK", None)]
