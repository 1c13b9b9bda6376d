"""The conversion report (docs/report.md): every section present, its numbers equal to provenance, the
images embedded (nothing fetched), refusals typed, and matplotlib loaded only by the commands that draw."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import struct
import subprocess
import sys

import jsonschema
import numpy as np
import pytest

from converters.cli import main
from converters.report import plots
from converters.report.facts import ObjectFacts, ReportFacts, gather
from converters.report.page import SECTIONS
from converters.sources.gguf import open_gguf
from ninfer_core import open_artifact
from tests.support.imatrix_files import write_gguf_imatrix
from tinymodels import qwen3, qwen35

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


def _section(page: str, sid: str) -> str:
    return page.split(f'<section id="{sid}">')[1].split("</section>")[0]


def _cells(table_html: str) -> list[list[str]]:
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table_html) if "<td" in row]


def test_byte_counts_have_thousands_separators(made):
    page = (made / "o.html").read_text()
    rows = _cells(_section(page, "bytes"))
    byte_cells = [r[2] for r in rows]
    assert byte_cells and all(re.fullmatch(r"\d{1,3}(,\d{3})*", b) for b in byte_cells), byte_cells
    assert any("," in b for b in byte_cells)
    facts = _facts(page)
    total = sum(o["bytes"] for o in facts["objects"])
    assert f"{total:,} bytes in {len(facts['objects'])} tensor objects" in page


def test_recipe_is_tables_not_a_json_dump(made):
    recipe = _section((made / "o.html").read_text(), "recipe")
    assert "<pre>" not in recipe and '{"' not in html.unescape(recipe).replace('{"members', "")
    fields = dict(r for r in _cells(recipe.split('<table class="recipe">')[1].split("</table>")[0]))
    assert fields["name"] == "groupwise-int" and fields["encoder"] == "absmax" and len(fields["sha256"]) == 64
    roles = _cells(recipe.split('<table class="roles">')[1].split("</table>")[0])
    assert ["attention.*", "q4_g64_fp16", "A16Only", "absmax"] in roles
    groups = _cells(recipe.split('<table class="groups">')[1].split("</table>")[0])
    assert ["mlp/gate_up", "q4_g64_fp16", "one", "absmax", "mlp.gate, mlp.up"] in groups
    overrides = _cells(recipe.split('<table class="overrides">')[1].split("</table>")[0])
    assert overrides == [["--tensor-type text/layers/0/mlp/down=q8_g32_fp16", "q8_g32_fp16"]]
    importance = dict(r for r in _cells(recipe.split('<table class="importance">')[1].split("</table>")[0]))
    assert "calib.txt" in importance["datasets"]


def test_bits_per_weight_beside_the_sources(made):
    page = (made / "o.html").read_text()
    facts = _facts(page)
    (row,) = _cells(_section(page, "bits-per-weight"))
    assert facts["source_bits_per_weight"] == {"text": 32.0}  # an F32 GGUF
    assert row == ["text", f"{facts['bits_per_weight']['text']:.3f}", "32.000",
                   f"{facts['bits_per_weight']['text'] / 32:.1%}"]


def _png_width(b64: str) -> int:
    return struct.unpack(">I", base64.b64decode(b64)[16:20])[0]


def test_small_multiples_one_panel_per_parameter_kind(made):
    page = (made / "o.html").read_text()
    facts = _facts(page)
    kinds = {f"{o['component']}/{o['kind']}" for o in facts["objects"]
             if o["layer"] is not None and "cosine" in o}
    section = _section(page, "per-layer-error")
    imgs = re.findall(r'<img alt="([^"]*)" data-panels="(\d+)" src="data:image/png;base64,([^"]+)"', section)
    assert len(imgs) == 2 and len(kinds) >= 4
    for _, n, b64 in imgs:
        assert int(n) == len(kinds)
        assert 1000 <= _png_width(b64) <= 1300  # uses the page's width, never shrunk on a 1,400 px screen
    fig = plots.error_figure(gather(made / "o.ninfer"), "cosine")
    assert plots.panels(fig) == len(kinds)
    assert all(len(ax.get_lines()) == 1 for ax in fig.axes)  # one series per panel, no overlapping lines
    plots.png(fig)
    assert "max-width:1100px" not in page and "body{font-family:sans-serif;margin:1.5em 2em" in page


def _figures(facts):
    return [f for f in (plots.bytes_figure(facts), plots.error_figure(facts, "cosine"),
                        plots.error_figure(facts, "rel_rms"), plots.exactness_figure(facts)) if f is not None]


def test_legends_lie_outside_the_data_and_text_is_readable(made):
    facts = gather(made / "o.ninfer")
    figs = _figures(facts)
    assert len(figs) == 4
    legends = 0
    for fig in figs:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            leg = ax.get_legend()
            if leg is None:
                continue
            legends += 1
            box = leg.get_window_extent(renderer)
            for other in fig.axes:
                assert not box.overlaps(other.get_window_extent(renderer)), "a legend covers the data"
        from matplotlib.text import Text

        for t in fig.findobj(Text):
            if t.get_text().strip() and t.get_visible():
                assert t.get_fontsize() * plots.DPI / 72 >= plots.MIN_TEXT_PX, (t.get_text(), t.get_fontsize())
        plots.png(fig)
    assert legends == 2  # the bytes chart and the exactness map


def test_exactness_map_tells_not_present_from_unknown():
    def obj(layer, kind, exactness):
        return ObjectFacts(f"text/layers/{layer}/{kind}", "text", layer, kind, "bf16", 2, 1, exactness)

    facts = ReportFacts("a", "0" * 32, "m", {}, [], None, None,
                        [obj(0, "attention/output", "bit-exact"), obj(0, "gdn/a", "requantized"),
                         obj(1, "attention/output", "not-recorded")])
    kinds, layers, grid = plots.exactness_grid(facts)
    assert kinds == ["text/attention/output", "text/gdn/a"] and layers == [0, 1]
    assert grid == [["bit-exact", "unknown"], ["requantized", plots.ABSENT]]
    colours = plots.EXACTNESS_COLOURS
    assert len(set(colours.values())) == len(colours) and colours[plots.ABSENT] != colours["unknown"]
    plots.png(plots.exactness_figure(facts))


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
def test_report_renders_in_headless_chromium(tmp_path):
    """Open the page as a user would: a hybrid model (attention and GDN layers, so the exactness map has
    cells not present in a layer) from a Q8_0 source, rendered by headless Chromium at 1,400 px wide; the
    screenshot is kept as ``report.png`` beside the page (docs/report.md §Plots)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package chromium)")
    qwen35.write_gguf(tmp_path / "m.gguf", qwen35.config(), matrix_type="Q8_0")
    assert main(["gguf2ninfer", str(tmp_path / "m.gguf"), str(tmp_path / "o.ninfer"), "--no-verify"]) == 0
    assert main(["report", str(tmp_path / "o.ninfer"), "-o", str(tmp_path / "o.html")]) == 0
    page = (tmp_path / "o.html").read_text()
    # Q8_0 matrices (34 bytes per 32 weights) and F32 norms
    assert 8.5 < _facts(page)["source_bits_per_weight"]["text"] < 9
    assert any(plots.ABSENT in row for row in plots.exactness_grid(gather(tmp_path / "o.ninfer"))[2])
    shot = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1400,4000", (tmp_path / "o.html").as_uri()],
                   capture_output=True, timeout=120, check=True)
    import matplotlib.image

    img = np.asarray(matplotlib.image.imread(shot))[..., :3]
    assert img.shape[:2] == (4000, 1400)
    assert float(img.std()) > 0.05  # text and plots, not a blank page
    ink = np.nonzero((img < 0.9).any(axis=2).any(axis=0))[0]
    assert ink.max() > 1250  # the page uses the window's width (a 1,100 px column stopped near 1,130)
