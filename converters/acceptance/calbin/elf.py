"""Minimal strict ELF reader: the header (what ``readelf -h`` checks) and DT_NEEDED (``readelf -d``).

docs/calbin.md §5.2: CCU programs must be parseable ELF, helper SOs must expose their dynamic dependencies, and
the target ISA comes from the header (``e_machine``), never from the file name. Hand-written because
neither binutils nor pyelftools can be assumed on the validating host; only the System V gABI fields
needed here are read, every offset and count is bounded by the file size before reading.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from converters.errors import ConverterError

ELF_MAGIC = b"\x7fELF"
ET_NAMES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}
EM_NAMES = {3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv"}
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
MAX_DYNAMIC_BYTES = 1 << 20
MAX_STRTAB_BYTES = 16 << 20


class ElfError(ConverterError):
    kind = "elf"


@dataclass(frozen=True)
class ElfHeader:
    bits: int  # 32 | 64
    endian: str  # "<" | ">"
    e_type: int
    e_machine: int
    phoff: int
    phentsize: int
    phnum: int
    file_size: int

    @property
    def type_name(self) -> str:
        return ET_NAMES.get(self.e_type, f"0x{self.e_type:04x}")

    @property
    def machine_name(self) -> str:
        return EM_NAMES.get(self.e_machine, f"em_{self.e_machine}")


def read_header(path: Path, rel: str) -> ElfHeader:
    """Parse and check the ELF header of ``path``.

    Raises:
        ElfError: short file, bad magic/class/data/version, header size, or a program/section header
            table that does not fit in the file.
    """
    size = path.stat().st_size
    with path.open("rb") as fh:
        ident = fh.read(64)
    if len(ident) < 16 or ident[:4] != ELF_MAGIC:
        raise ElfError("no ELF magic (\\x7fELF)", file=rel, rule="elf_magic")
    ei_class, ei_data, ei_version = ident[4], ident[5], ident[6]
    if ei_class not in (1, 2):
        raise ElfError(f"EI_CLASS {ei_class} is neither 1 (32-bit) nor 2 (64-bit)", file=rel, rule="elf_class")
    if ei_data not in (1, 2):
        raise ElfError(f"EI_DATA {ei_data} is neither 1 (LE) nor 2 (BE)", file=rel, rule="elf_data")
    if ei_version != 1:
        raise ElfError(f"EI_VERSION {ei_version} != 1", file=rel, rule="elf_version")
    bits = 64 if ei_class == 2 else 32
    end = "<" if ei_data == 1 else ">"
    ehsize_expected = 64 if bits == 64 else 52
    if len(ident) < ehsize_expected:
        raise ElfError(f"file is {size} bytes, shorter than the {ehsize_expected}-byte ELF header",
                       file=rel, rule="elf_short")
    addr = "Q" if bits == 64 else "I"
    fmt = f"{end}HHI{addr}{addr}{addr}IHHHHHH"
    (e_type, e_machine, e_version, _entry, phoff, shoff, _flags, ehsize, phentsize, phnum,
     shentsize, shnum, _shstrndx) = struct.unpack_from(fmt, ident, 16)
    if e_version != 1:
        raise ElfError(f"e_version {e_version} != 1", file=rel, rule="elf_version")
    if ehsize != ehsize_expected:
        raise ElfError(f"e_ehsize {ehsize} != {ehsize_expected} for ELF{bits}", file=rel, rule="elf_ehsize")
    if e_type not in ET_NAMES or e_type == 0:
        raise ElfError(f"e_type {e_type} is not REL/EXEC/DYN/CORE", file=rel, rule="elf_type")
    phent_expected = 56 if bits == 64 else 32
    if phnum and (phentsize != phent_expected or phoff + phnum * phentsize > size):
        raise ElfError(f"program header table ({phnum} x {phentsize} at {phoff}) does not fit the "
                       f"{size}-byte file", file=rel, rule="elf_phdr_range")
    if shnum and shoff + shnum * shentsize > size:
        raise ElfError(f"section header table ({shnum} x {shentsize} at {shoff}) does not fit the "
                       f"{size}-byte file", file=rel, rule="elf_shdr_range")
    return ElfHeader(bits, end, e_type, e_machine, phoff, phentsize, phnum, size)


def read_needed(path: Path, rel: str, hdr: ElfHeader) -> list[str]:
    """DT_NEEDED entries of a shared object, via PT_DYNAMIC and the PT_LOAD mapping of DT_STRTAB.

    Raises:
        ElfError: no PT_DYNAMIC, a dynamic table or string table outside the file, or a name without
            its NUL terminator.
    """
    with path.open("rb") as fh:
        fh.seek(hdr.phoff)
        table = fh.read(hdr.phnum * hdr.phentsize)
        phdrs = [_phdr(table, i * hdr.phentsize, hdr) for i in range(hdr.phnum)]
        dyn = [p for p in phdrs if p[0] == PT_DYNAMIC]
        if not dyn:
            raise ElfError("no PT_DYNAMIC segment (not a dynamic shared object)", file=rel, rule="elf_no_dynamic")
        _, d_off, _, d_size = dyn[0]
        if d_off + d_size > hdr.file_size or d_size > MAX_DYNAMIC_BYTES:
            raise ElfError(f"dynamic segment ({d_size} bytes at {d_off}) outside the file or too large",
                           file=rel, rule="elf_dynamic_range")
        fh.seek(d_off)
        raw = fh.read(d_size)
        ent = 16 if hdr.bits == 64 else 8
        dfmt = f"{hdr.endian}{'qQ' if hdr.bits == 64 else 'iI'}"
        needed_offsets: list[int] = []
        strtab_vaddr = strsz = None
        for i in range(0, len(raw) - ent + 1, ent):
            tag, val = struct.unpack_from(dfmt, raw, i)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                needed_offsets.append(val)
            elif tag == DT_STRTAB:
                strtab_vaddr = val
            elif tag == DT_STRSZ:
                strsz = val
        if not needed_offsets:
            return []
        if strtab_vaddr is None or strsz is None or strsz > MAX_STRTAB_BYTES:
            raise ElfError("DT_NEEDED present but DT_STRTAB/DT_STRSZ missing or too large",
                           file=rel, rule="elf_strtab")
        str_off = _vaddr_to_offset(strtab_vaddr, phdrs)
        if str_off is None or str_off + strsz > hdr.file_size:
            raise ElfError("DT_STRTAB is not inside a PT_LOAD segment of the file", file=rel, rule="elf_strtab")
        fh.seek(str_off)
        strtab = fh.read(strsz)
    names = []
    for off in needed_offsets:
        nul = strtab.find(b"\0", off) if off < len(strtab) else -1
        if nul < 0:
            raise ElfError(f"DT_NEEDED name at string offset {off} is not NUL-terminated in DT_STRTAB",
                           file=rel, rule="elf_strtab")
        names.append(strtab[off:nul].decode("utf-8", "replace"))
    return names


def _phdr(table: bytes, at: int, hdr: ElfHeader) -> tuple[int, int, int, int]:
    """``(p_type, p_offset, p_vaddr, p_filesz)`` of one program header."""
    if hdr.bits == 64:
        p_type, _flags, off, vaddr, _paddr, filesz = struct.unpack_from(f"{hdr.endian}IIQQQQ", table, at)
    else:
        p_type, off, vaddr, _paddr, filesz = struct.unpack_from(f"{hdr.endian}IIIII", table, at)
    return p_type, off, vaddr, filesz


def _vaddr_to_offset(vaddr: int, phdrs: list[tuple[int, int, int, int]]) -> int | None:
    for p_type, off, p_vaddr, filesz in phdrs:
        if p_type == PT_LOAD and p_vaddr <= vaddr < p_vaddr + filesz:
            return off + (vaddr - p_vaddr)
    return None
