"""The README's first-conversion session runs as written in an empty directory (README.md "Your first
conversion"; docs/cli.md §Outputs): the fenced block after ``<!-- readme-walkthrough -->`` is read from the
README itself, and each line runs through the same entry points the shell would call (``convert`` →
``converters.cli.main``, ``python -m tinymodels`` → ``tinymodels.__main__.main``), so the README cannot rot."""

from __future__ import annotations

import re
import shlex

from converters import ROOT
from converters.cli import main as convert_main
from ninfer_core import open_artifact
from tinymodels.__main__ import main as tinymodels_main

MARKER = "<!-- readme-walkthrough -->"


def walkthrough() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert MARKER in text, "README.md lost its walk-through block"
    block = re.search(r"```sh\n(.*?)```", text[text.index(MARKER):], re.S).group(1)
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def run_line(argv: list[str]) -> int:
    if argv[:3] == ["python", "-m", "tinymodels"]:
        return tinymodels_main(argv[3:])
    assert argv[0] == "convert", f"the walk-through runs convert and python -m tinymodels only, not {argv[0]}"
    return convert_main(argv[1:])


def test_readme_walkthrough_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a fresh, empty directory: out/ does not exist yet
    lines = walkthrough()
    assert [a[1] for a in lines if a[0] == "convert"] == ["gguf2ninfer", "verify", "repack", "inspect"]
    outputs = []
    for argv in lines:
        rc = run_line(argv)
        out = capsys.readouterr().out
        assert rc == 0, f"README line failed: {shlex.join(argv)}\n{out}"
        outputs.append(out)
    assert outputs[1].strip().splitlines()[-1].startswith("ACCEPT: PASS")  # build, then accept
    assert "VERIFY: PASS" in outputs[2]
    with open_artifact(tmp_path / "out" / "model-2g.ninfer") as art:
        assert art.artifact_id  # the repacked artifact opens
    assert all(p.stat().st_size <= 2 * 1024**3 for p in (tmp_path / "out").glob("model-2g.ninfer*"))
    assert "components × formats" in outputs[4] and "recipe groupwise-int; exactness (provenance)" in outputs[4]
