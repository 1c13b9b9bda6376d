"""The conversion report (docs/report.md): every section present, its numbers equal to provenance, the
images embedded (nothing fetched), refusals typed, and matplotlib loaded only by the commands that draw."""

from __future__ import annotations

import base64
import html
import json
import re
import subprocess
import sys

import jsonschema
import numpy as np
import pytest

from converters.cli import main
from converters.report.page import SECTIONS
from converters.sources.gguf import open_gguf
from ninfer_core import open_artifact
from tests.support.imatrix_files import write_gguf_imatrix
from tinymodels import qwen3

pytest.importorskip("matplotlib", reason="the report extra (make setup) installs matplotlib")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    qwen3.write_gguf(d / "m.gguf", qwen3.config(), matrix_type="F32")
    with open_gguf(d / "m.gguf") as src:
        rng = np.random.default_rng(0)
        entries = {n: rng.lognormal(0, 1, t.shape[-1]).astype(np.float32) for n, t in src.tensors.items()
                   if len(t.shape) == 2}
    write_gguf_imatrix(d / "m.imatrix", entries, datasets=("calib.txt",))
    rc = main(["gguf2ninfer", str(d / "m.gguf"), str(d / "o.ninfer"), "--imatrix", str(d / "m.imatrix"),
               "--tensor-type", "text/layers/0/mlp/down=q8_g32_fp16", "--report", str(d / "o.html")])
    assert rc == 0
    return d


def _facts(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-facts">(.*?)</script>', page, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_every_section_is_present_and_self_contained(made):
    page = (made / "o.html").read_text()
    for s in SECTIONS:
        assert f'<section id="{s}">' in page, s
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from a network
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(imgs) >= 4 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in imgs)
    verify = page.split('<section id="verify">')[1].split("</section>")[0]
    assert "verdict: <b>pass</b>" in verify and "coverage" in verify
    recipe = page.split('<section id="recipe">')[1].split("</section>")[0]
    assert "text/layers/0/mlp/down=q8_g32_fp16" in html.unescape(recipe) and "calib.txt" in recipe


def test_numbers_match_provenance(made):
    facts = _facts((made / "o.html").read_text())
    with open_artifact(made / "o.ninfer") as a:
        prov = a.provenance
        records = {o.id: o for o in a.objects if o.kind == "tensor"}
    assert facts["importance"]["sha256"] == prov["importance"]["sha256"]
    by_id = {o["id"]: o for o in facts["objects"]}
    assert set(by_id) == set(records)
    for oid, o in by_id.items():
        assert o["bytes"] == records[oid].bytes and o["format"] == records[oid].format
        entry = prov["objects"][oid]
        assert o["exactness"] == entry["exactness"]
        if o["exactness"] == "requantized":
            assert o["cosine"] == entry["measured_error"]["cosine"] and o["rms"] == entry["measured_error"]["rms"]
            assert 0 < o["rel_rms"] < 0.2
            assert o["importance_used"] == entry["importance"]["used"]
    total = sum(o["bytes"] for o in facts["objects"] if o["component"] == "text")
    assert sum(facts["bytes_by_component_format"]["text"].values()) == total
    elements = sum(o["elements"] for o in facts["objects"] if o["component"] == "text")
    assert facts["bits_per_weight"]["text"] == round(8 * total / elements, 4)


def test_report_command_json_and_refusals(made, tmp_path, capsys):
    rc = main(["report", str(made / "o.ninfer"), "-o", str(tmp_path / "r.html"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["report"] == str(tmp_path / "r.html") and doc["acceptance"] is None
    from converters import ROOT

    jsonschema.validate(doc, json.loads((ROOT / "docs/schemas/report.schema.json").read_text()))
    rc = main(["report", str(made / "o.ninfer"), "-o", str(tmp_path / "r.html")])
    assert rc == 1 and "never overwritten" in capsys.readouterr().err
    rc = main(["gguf2ninfer", str(made / "m.gguf"), str(tmp_path / "x.ninfer"), "--dry-run", "--report",
               str(tmp_path / "x.html")])
    assert rc == 2 and not (tmp_path / "x.html").exists()


def test_commands_that_make_no_report_do_not_import_matplotlib(made, tmp_path):
    code = ("import sys; from converters.cli import main; "
            f"rc = main(['gguf2ninfer', {str(made / 'm.gguf')!r}, {str(tmp_path / 'n.ninfer')!r}, '--no-verify']); "
            "main(['inspect', " + repr(str(tmp_path / 'n.ninfer')) + "]); "
            "assert rc == 0; print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.slow
def test_report_renders_in_headless_chromium(made, tmp_path):
    """Open the page as a user would: headless Chromium renders it to a PNG that is not blank."""
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package chromium)")
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,3000", (made / "o.html").as_uri()], capture_output=True, timeout=120,
                   check=True)
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    assert float(np.asarray(img[..., :3]).std()) > 0.05  # text and plots, not a blank page
