"""The MCP server reads only inside its roots (docs/inspect.md §MCP roots): ``--root`` (default the working
directory), symlinks resolved, narrowed by the client's MCP roots; a refusal that reveals nothing about the
file; path arguments with a NUL byte or over the length limits refused at once."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from converters.cli import main
from converters.inspect.mcp_server import Provider, build_server
from converters.inspect.roots import Roots
from tests.support.inspect_models import tiny_gguf, tiny_safetensors

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path):
    """``root/`` (the server's root) and ``outside/`` beside it, with models and symlinks between them."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    t = {"root": root, "outside": outside, "model": tiny_gguf(root / "m.gguf"),
         "secret": tiny_gguf(outside / "secret.gguf"), "secret_dir": outside}
    (root / "link.gguf").symlink_to(t["secret"])
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    hf = root / "hf"
    hf.mkdir()
    (hf / "model.safetensors").symlink_to(tiny_safetensors(outside / "w.safetensors"))
    t["hf"] = hf
    return t


def call(provider: Provider, tool: str, args: dict) -> tuple[bool, dict]:
    r = anyio.run(build_server(provider).call_tool, tool, args)
    return bool(r.is_error), r.structured_content


def refusal(provider: Provider, tool: str, args: dict) -> dict:
    err, doc = call(provider, tool, args)
    assert err, doc
    return doc["error"]


def test_outside_the_roots_reveals_nothing(tree):
    prov = Provider(Roots([tree["root"]]))
    assert not call(prov, "inspect_model_artifact", {"path": str(tree["model"])})[0]
    targets = [tree["secret"], tree["outside"] / "missing.gguf", tree["secret_dir"], Path("/etc/shadow"),
               Path("/proc/self/environ"), tree["root"] / "link.gguf", tree["root"] / "linkdir" / "secret.gguf",
               tree["root"] / ".." / "outside" / "secret.gguf"]
    seen = []
    for target in targets:
        e = refusal(prov, "inspect_model_artifact", {"path": str(target)})
        assert e["file"] == str(target) and e["field"] == "path"
        seen.append({k: v for k, v in e.items() if k != "file"})
    # an existing file, a missing one, a directory, a file the user cannot see and a symlink: one answer
    assert all(s == seen[0] for s in seen), seen
    e = seen[0]
    assert (e["code"], e["category"], e["constraint"]) == ("target_unavailable", "unavailable_target",
                                                           "outside_roots")
    assert "outside the roots" in e["message"]
    assert e["details"]["diagnostics"] == {"roots": [str(tree["root"].resolve())], "client_roots": None}


def test_every_path_argument_is_confined(tree, tmp_path, capsys):
    bundle = tree["outside"] / "ev.json"
    assert main(["inspect", str(tree["secret"]), "--evidence-output", str(bundle), "--json"]) == 0
    capsys.readouterr()
    prov = Provider(Roots([tree["root"]]))
    e = refusal(prov, "import_evidence_bundle", {"path": str(bundle)})
    assert e["constraint"] == "outside_roots" and e["field"] == "path"
    e = refusal(prov, "inspect_analysis_view", {"source": {"kind": "evidence-file", "path": str(bundle)},
                                                "view": {"collection": "tensors"}})
    assert e["constraint"] == "outside_roots" and e["field"] == "source.path"
    assert prov.store.ids() == []
    # the same bundle inside the root is read
    inside = tree["root"] / "ev.json"
    inside.write_bytes(bundle.read_bytes())
    err, doc = call(prov, "import_evidence_bundle", {"path": str(inside)})
    assert not err and len(doc["evidence_ids"]) == 1


def test_a_member_reached_through_a_symlink_is_refused(tree):
    """An HF directory inside the root whose shard is a symlink to a file outside: the reader's own open is
    refused, so nothing of the outside file reaches the answer."""
    e = refusal(Provider(Roots([tree["root"]])), "inspect_model_artifact", {"path": str(tree["hf"])})
    assert e["constraint"] == "outside_roots" and e["file"] == str(tree["hf"] / "model.safetensors")
    assert "w.safetensors" not in json.dumps(e)
    # with the outside directory among the roots, the same directory is inspected
    err, doc = call(Provider(Roots([tree["root"], tree["outside"]])), "inspect_model_artifact",
                    {"path": str(tree["hf"])})
    assert not err and doc["format"] == "safetensors-directory"


def test_default_root_is_the_working_directory(tree, monkeypatch):
    monkeypatch.chdir(tree["root"])
    prov = Provider()
    assert prov.roots.dirs == (str(tree["root"].resolve()),)
    assert not call(prov, "inspect_model_artifact", {"path": str(tree["model"])})[0]
    assert refusal(prov, "inspect_model_artifact", {"path": str(tree["secret"])})["constraint"] == "outside_roots"


@pytest.mark.parametrize("path, says", [
    ("/tmp/a\0b.gguf", "NUL byte"),
    ("/" + "a" * 256, "component of 256 bytes"),
    ("/" + "/".join(["d" * 200] * 21), "bytes long"),
    ("/" + "x" * (2 << 20), "bytes long"),
    ("/tmp/\udcff.gguf", "lone surrogate"),
])
def test_bad_paths_are_refused_at_once(tree, path, says):
    prov = Provider(Roots([tree["root"]]))
    for tool, args in (("inspect_model_artifact", {"path": path}), ("import_evidence_bundle", {"path": path}),
                       ("inspect_analysis_view", {"source": {"kind": "evidence-file", "path": path},
                                                  "view": {"collection": "tensors"}})):
        t0 = time.monotonic()
        e = refusal(prov, tool, args)
        assert time.monotonic() - t0 < 1.0
        assert (e["code"], e["rule"]) == ("invalid_input", "path_valid") and says in e["message"], e
        assert len(json.dumps(e)) < 2000  # the path is not echoed back


def test_root_must_be_a_directory(tree, capsys):
    assert main(["mcp", "--root", str(tree["model"])]) == 1
    err = capsys.readouterr().err
    assert "root_directory" in err and len(err.strip().splitlines()) == 1


def _server(*roots: Path) -> StdioServerParameters:
    args = [a for r in roots for a in ("--root", str(r))]
    return StdioServerParameters(command=sys.executable, args=["-m", "converters.cli", "mcp", *args], cwd=str(ROOT),
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_client_roots_narrow_the_server_roots_over_stdio(tree, tmp_path):
    sub = tree["root"] / "sub"
    sub.mkdir()
    inner = tiny_gguf(sub / "inner.gguf")
    errlog = (tmp_path / "stderr.txt").open("w")

    async def roots_cb(context) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=sub.as_uri(), name="sub"),
                                            types.Root(uri=tree["outside"].as_uri(), name="wider")])

    async def scenario() -> None:
        async with stdio_client(_server(tree["root"]), errlog=errlog) as (r, w), \
                ClientSession(r, w, list_roots_callback=roots_cb) as s:
            await s.initialize()
            ok = await s.call_tool("inspect_model_artifact", {"path": str(inner)})
            assert not ok.is_error and ok.structured_content["counts"]["tensors"] == 3
            # inside the server's root but outside the client's roots
            e = (await s.call_tool("inspect_model_artifact", {"path": str(tree["model"])})).structured_content
            assert e["error"]["constraint"] == "outside_roots"
            assert e["error"]["details"]["diagnostics"]["client_roots"] == [str(sub.resolve()),
                                                                            str(tree["outside"].resolve())]
            # a client root cannot widen the server's
            e = (await s.call_tool("inspect_model_artifact", {"path": str(tree["secret"])})).structured_content
            assert e["error"]["constraint"] == "outside_roots"
            # a 2 MB path: refused at once, nothing written to stderr
            t0 = time.monotonic()
            e = (await s.call_tool("inspect_model_artifact", {"path": "/" + "x" * (2 << 20)})).structured_content
            assert e["error"]["rule"] == "path_valid" and time.monotonic() - t0 < 5

    anyio.run(scenario)
    errlog.close()
    assert (tmp_path / "stderr.txt").stat().st_size < 4096
