"""Gate A, filesystem (docs/calbin.md §2, §9 Gate A): readable tree, no escaping symlink, required files,
size > 0, file count and unknown files, and the SHA-256 hash manifest of every asset (§12).

The tree is walked with ``lstat`` only: symlinks are resolved and must stay inside the package (a
dangling one counts as escaping), nothing that is not a regular file is ever opened (a FIFO would hang
a reader), symlinked directories are not descended. Hashes are streamed in 8 MiB chunks; ``fast`` mode
skips the parameter blocks ("大参数 full SHA-256 可在发布阶段做") and says so.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path, PurePosixPath

from converters.acceptance.calbin.context import Ctx, FileEntry, Submodel
from converters.sources.kind import CALBIN_RUNTIME_META as RUNTIME_META

SUBMODEL_META = "submodel_memory_reserved_info.txt"
TOKENIZER_DIR = "__Tokenizer"
#: §8: the tokenizer/config files serving must hash and freeze (plus one vocab ``*.gguf``).
TOKENIZER_REQUIRED = ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json",
                      "merges.txt", "vocab.json")

ROOT_ROLES = (
    (re.compile(re.escape(RUNTIME_META)), "runtime_meta"),
    (re.compile(r"hparam\.yaml"), "hparam"),
    (re.compile(r"param_blk\d+\.bin"), "param_block"),
    (re.compile(r"version\.py"), "version_script"),
    (re.compile(r"(?:onnx/)?[^/]+\.onnx"), "onnx"),
    (re.compile(r"[^/]+\.ya?ml"), "root_yaml"),
)
SUBMODEL_ROLES = (
    (re.compile(re.escape(SUBMODEL_META)), "submodel_meta"),
    (re.compile(r"ccu\d+_chip\d+\.elf"), "ccu_elf"),
    (re.compile(r"(?:cpu|pld)_chip\d+_(?:ping|pong)\.bin"), "command"),
    (re.compile(r"(?:cpu|pld)_chip\d+_(?:ping|pong)\.txt"), "command_text"),
    (re.compile(r"[^/]+\.so(?:\.\d+)*"), "helper_so"),
    (re.compile(r"[^/]+_op_io_buf_ptr\.ya?ml"), "op_io_yaml"),
    (re.compile(r"[^/]+\.chip\d+\.profparts"), "profparts"),
)
_SUBMODEL_DIR_RE = re.compile(r".+_(prefill|decode)(?:_.*)?")
_HASH_CHUNK = 8 << 20


def scan(ctx: Ctx) -> bool:
    """Walk the package, fill ``ctx.files`` and ``ctx.submodels``; False if the root is unusable."""
    ctx.check("A", "directory_readable")
    try:
        st = ctx.root.stat()  # the root itself may be a symlink to the package
    except OSError as exc:
        ctx.emit("FS_UNREADABLE", f"package path cannot be read: {exc.strerror or exc}")
        return False
    if not stat.S_ISDIR(st.st_mode) or not os.access(ctx.root, os.R_OK | os.X_OK):
        ctx.emit("FS_UNREADABLE", "package path is not a readable directory")
        return False
    real_root = ctx.root.resolve()
    ctx.check("A", "no_escaping_symlink")
    ctx.check("A", "regular_files_only")

    def on_error(exc: OSError) -> None:
        rel = _rel(ctx.root, Path(exc.filename)) if exc.filename else None
        ctx.emit("FS_UNREADABLE", f"cannot list directory: {exc.strerror or exc}", file=rel)

    submodel_dirs: dict[str, str | None] = {}
    for dirpath, dirnames, filenames in os.walk(ctx.root, onerror=on_error, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            full = here / name
            rel = _rel(ctx.root, full)
            try:
                lst = full.lstat()
            except OSError as exc:
                ctx.emit("FS_UNREADABLE", f"cannot stat: {exc.strerror or exc}", file=rel)
                continue
            if stat.S_ISLNK(lst.st_mode):
                st = _check_symlink(ctx, full, rel, real_root)
                if st is None or stat.S_ISDIR(st.st_mode):
                    if name in dirnames:
                        dirnames.remove(name)
                    continue
                lst = st
            if stat.S_ISDIR(lst.st_mode):
                if here == ctx.root and (m := _SUBMODEL_DIR_RE.fullmatch(name)):
                    submodel_dirs[name] = m[1]
                continue
            if not stat.S_ISREG(lst.st_mode):
                ctx.emit("FS_NOT_REGULAR", f"not a regular file ({_kind(lst.st_mode)}); never opened", file=rel)
                continue
            if not os.access(full, os.R_OK):
                ctx.emit("FS_UNREADABLE", "file is not readable", file=rel)
                continue
            ctx.files[rel] = FileEntry(rel, lst.st_size, "unknown")
    for rel in ctx.files:  # a directory holding submodel metadata is a submodel whatever its name
        top, _, rest = rel.partition("/")
        if rest == SUBMODEL_META:
            submodel_dirs.setdefault(top, None)
    ctx.submodels = [Submodel(name, name, role) for name, role in sorted(submodel_dirs.items())]
    _classify(ctx)
    return True


def _check_symlink(ctx: Ctx, full: Path, rel: str, real_root: Path) -> os.stat_result | None:
    """Resolve a symlink; report escape/dangling (ERROR) or internal (INFO); return the target's stat."""
    try:
        target = full.resolve(strict=True)
    except (OSError, RuntimeError):
        ctx.emit("FS_SYMLINK_ESCAPE", "symlink is dangling or loops", file=rel,
                 detail={"symlink_target": os.readlink(full) if full.is_symlink() else None})
        return None
    if target != real_root and real_root not in target.parents:
        ctx.emit("FS_SYMLINK_ESCAPE", f"symlink resolves outside the package, to {target}", file=rel)
        return None
    inside = target.relative_to(real_root).as_posix()
    ctx.emit("FS_SYMLINK_INTERNAL", f"symlink to {inside} inside the package", file=rel)
    return target.stat()


def _classify(ctx: Ctx) -> None:
    subs = {s.rel for s in ctx.submodels}
    for rel, entry in ctx.files.items():
        top, _, rest = rel.partition("/")
        if "/" in rest:
            continue  # nothing in the inventory lives two levels down
        if top == TOKENIZER_DIR and rest:
            entry.role = "tokenizer"
            continue
        if top in subs:
            table, name = SUBMODEL_ROLES, rest
        elif not rest or top == "onnx":
            table, name = ROOT_ROLES, rel
        else:
            continue
        for regex, role in table:
            if regex.fullmatch(name):
                entry.role = role
                break


def required_files(ctx: Ctx) -> None:
    """Required/expected files (§2 ownership table): ERROR if production-required, else the owner's warning."""
    ctx.check("A", "required_files")
    roles = {e.role for e in ctx.files.values()}
    if RUNTIME_META not in ctx.files:
        ctx.emit("FS_REQUIRED_MISSING", f"runtime metadata {RUNTIME_META} is missing", file=RUNTIME_META)
    if "param_block" not in roles:
        ctx.emit("FS_REQUIRED_MISSING", "no parameter block param_blk<N>.bin in the package root",
                 file="param_blk0.bin")
    for rel, why in (("hparam.yaml", "runner/golden test parameters"), ("version.py", "packer version script")):
        if rel not in ctx.files:
            ctx.emit("FS_EXPECTED_MISSING", f"{why} ({rel}) is missing", file=rel)
    for sub in ctx.submodels:
        inside = {r.split("/", 1)[1]: e for r, e in ctx.files.items() if r.startswith(sub.rel + "/")}
        if SUBMODEL_META not in inside:
            ctx.emit("FS_REQUIRED_MISSING", f"submodel metadata {SUBMODEL_META} is missing",
                     file=f"{sub.rel}/{SUBMODEL_META}")
        if not any(e.role == "op_io_yaml" for e in inside.values()):
            ctx.emit("FS_REQUIRED_MISSING", "op I/O YAML (*_op_io_buf_ptr.yaml) is missing; capacity and "
                     "partition reports need it", file=f"{sub.rel}/{sub.rel}_op_io_buf_ptr.yaml")
    tok = {r.split("/", 1)[1] for r, e in ctx.files.items() if e.role == "tokenizer"}
    for name in TOKENIZER_REQUIRED:
        if name not in tok:
            ctx.emit("TOKENIZER_FILE_MISSING", f"{name} is missing; serving must hash and freeze it",
                     file=f"{TOKENIZER_DIR}/{name}")
    if not any(n.endswith(".gguf") for n in tok):
        ctx.emit("TOKENIZER_FILE_MISSING", "no vocab GGUF (*.gguf) in the tokenizer directory",
                 file=f"{TOKENIZER_DIR}/vocab.gguf")
    ctx.check("A", "size_nonzero")
    required_roles = {"runtime_meta", "param_block", "submodel_meta", "op_io_yaml", "profparts", "root_yaml",
                      "ccu_elf", "command", "helper_so"}
    for rel, entry in sorted(ctx.files.items()):
        if entry.size == 0 and entry.role in required_roles:
            ctx.emit("FS_REQUIRED_EMPTY", f"{entry.role} file is empty", file=rel)
        elif entry.size == 0 and entry.role == "tokenizer":
            ctx.emit("TOKENIZER_FILE_INVALID", "tokenizer/config file is empty", file=rel)
    ctx.check("A", "unknown_files")
    for rel, entry in sorted(ctx.files.items()):
        if entry.role == "unknown":
            ctx.emit("FS_UNKNOWN_FILE", "file is not in the calbin inventory", file=rel)


def hash_files(ctx: Ctx) -> str | None:
    """SHA-256 of every file (streamed); returns the package hash manifest digest, or None if incomplete."""
    ctx.check("A", "sha256_manifest")
    skipped, failed = [], False
    for rel, entry in sorted(ctx.files.items()):
        if ctx.fast and entry.role == "param_block":
            skipped.append(rel)
            continue
        try:
            entry.sha256 = sha256_file(ctx.path(rel))
        except OSError as exc:
            ctx.emit("FS_UNREADABLE", f"cannot read for hashing: {exc.strerror or exc}", file=rel)
            failed = True
    if failed:
        return None
    if skipped:
        ctx.emit("FS_HASH_SKIPPED", f"fast mode: {len(skipped)} parameter block(s) not hashed; the package "
                 "hash manifest is incomplete", detail={"files": skipped})
        return None
    lines = "".join(f"{e.sha256}  {rel}\n" for rel, e in sorted(ctx.files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    buf = bytearray(_HASH_CHUNK)
    view = memoryview(buf)
    with path.open("rb") as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def safe_relpath(declared: str, base: str) -> str | None:
    """The package-relative POSIX path of a declared file, or None if absolute or using '..' (§4.3 step 1)."""
    p = PurePosixPath(declared)
    if p.is_absolute() or "\\" in declared or re.match(r"^[A-Za-z]:", declared) or ".." in p.parts:
        return None
    return str(PurePosixPath(base) / p) if base else str(p)


def _rel(root: Path, full: Path) -> str:
    return full.relative_to(root).as_posix()


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"
