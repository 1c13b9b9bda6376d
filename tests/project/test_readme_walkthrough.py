"""Every shell block of the README runs as written, in order, in one empty directory (README.md "Your first
conversion"; docs/cli.md §Outputs). The blocks are read from the README itself; each line runs through the
entry points the shell would call (``ninfer-convert`` and ``convert`` → ``converters.cli.main``,
``python -m tinymodels`` → ``tinymodels.__main__.main``, ``export`` → the environment), so the README cannot
rot. A block the test does not run says so in the README, with the reason, in a ``readme-test: not run``
comment just above it; the test knows exactly which those are."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from converters import ROOT
from converters.cli import main as convert_main
from ninfer_core import open_artifact
from tinymodels.__main__ import main as tinymodels_main

WALKTHROUGH = "<!-- readme-walkthrough -->"
NOT_RUN = re.compile(r"<!-- readme-test: not run \((.+?)\) -->\n```sh\n")
BLOCK = re.compile(r"(<!-- readme-test: not run \(.+?\) -->\n)?```sh\n(.*?)```", re.S)
#: the blocks the README marks as not run, by their first command line
NOT_RUN_BLOCKS = ("make demo", "ninfer-convert regress", "ninfer-convert gguf2ninfer big.gguf")


def blocks() -> list[tuple[bool, list[list[str]]]]:
    """Each ``sh`` block: whether it runs, and its commands (``\\`` continuations joined, ``; `` split)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert WALKTHROUGH in text, "README.md lost its walk-through block"
    out = []
    for m in BLOCK.finditer(text):
        lines = [re.split(r"(?:^|\s)#(?:\s|$)", line, maxsplit=1)[0] for line in
                 m.group(2).replace("\\\n", " ").splitlines()]  # comments off first: they may hold "; "
        commands = [words for line in lines for part in line.split("; ") if (words := shlex.split(part))]
        out.append((m.group(1) is None, commands))
    return out


def run_line(argv: list[str], monkeypatch) -> int:
    if argv[:3] == ["python", "-m", "tinymodels"]:
        return tinymodels_main(argv[3:])
    if argv[0] == "export":
        for assignment in argv[1:]:
            monkeypatch.setenv(*assignment.split("=", 1))
        return 0
    assert argv[0] in ("ninfer-convert", "convert"), f"the README runs ninfer-convert, tinymodels, export, not {argv[0]}"
    return convert_main(argv[1:])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("readme")


def run_block(commands, workdir: Path, monkeypatch, capsys) -> list[str]:
    monkeypatch.chdir(workdir)
    outputs = []
    for argv in commands:
        rc = run_line(argv, monkeypatch)
        out = capsys.readouterr().out
        assert rc == 0, f"README line failed: {shlex.join(argv)}\n{out}"
        outputs.append(out)
    return outputs


def test_the_not_run_blocks_are_exactly_the_known_ones():
    skipped = [shlex.join(cmds[0]) for runs, cmds in blocks() if not runs]
    assert len(skipped) == len(NOT_RUN_BLOCKS), skipped
    assert all(line.startswith(first) for line, first in zip(skipped, NOT_RUN_BLOCKS, strict=True)), skipped
    assert len(NOT_RUN.findall((ROOT / "README.md").read_text())) == len(NOT_RUN_BLOCKS)  # each says why


def test_readme_walkthrough_runs_as_written(workdir, monkeypatch, capsys):
    """The first conversion: out/ does not exist yet; build then accept, verify, repack, inspect."""
    runnable = [cmds for runs, cmds in blocks() if runs]
    lines = runnable[0]
    assert [a[1] for a in lines if a[0] == "ninfer-convert"] == ["gguf2ninfer", "verify", "repack", "inspect"]
    outputs = run_block(lines, workdir, monkeypatch, capsys)
    assert outputs[1].strip().splitlines()[-1].startswith("ACCEPT: PASS")  # build, then accept
    assert "VERIFY: PASS" in outputs[2]
    with open_artifact(workdir / "out" / "model-2g.ninfer") as art:
        assert art.artifact_id  # the repacked artifact opens
    assert all(p.stat().st_size <= 2 * 1024**3 for p in (workdir / "out").glob("model-2g.ninfer*"))
    assert "components × formats" in outputs[4] and "recipe groupwise-int; exactness (provenance)" in outputs[4]


def test_every_later_block_runs_as_written(workdir, monkeypatch, capsys):
    """After the walk-through, in the same directory: what it does, ternary packing, scale-out."""
    if not (workdir / "model.gguf").exists():  # run alone: the walk-through's model first
        run_block([c for runs, cmds in blocks() if runs for c in cmds][:1], workdir, monkeypatch, capsys)
    later = [cmds for runs, cmds in blocks() if runs][1:]
    assert len(later) == 3  # what it does, ternary packing, scale-out
    for commands in later:
        outputs = run_block(commands, workdir, monkeypatch, capsys)
        assert not any("Traceback" in o for o in outputs)
    with open_artifact(workdir / "out" / "vl.ninfer") as art:
        assert {"text", "vision", "mtp"} <= set(art.components)
    assert (workdir / "validation.json").is_file()
    with open_artifact(workdir / "out" / "bonsai.ninfer") as art:
        assert art.artifact_id
    with open_artifact(workdir / "shared" / "staged.ninfer") as art:
        assert art.artifact_id
