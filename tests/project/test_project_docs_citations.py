"""Every citation of a docs/ section in code, mappings, recipes and docs names a section that exists, and
every relative link in docs/ resolves. Conventions (docs/README.md): "container §N" is
docs/format/container.md §N, "storage-layouts §N" is docs/format/layouts.md §N, other pages are cited as
``docs/<page>.md §<number or title>``."""

from __future__ import annotations

import re
from pathlib import Path

from converters import ROOT

DOCS = ROOT / "docs"
SCANNED = ("ninfer_core", "converters", "mappings", "recipes", "tinymodels", "bench", "docs")
SUFFIXES = {".py", ".yaml", ".md"}
ALIASES = {"container": DOCS / "format" / "container.md", "storage-layouts": DOCS / "format" / "layouts.md"}
CITATION = re.compile(r"(container|storage-layouts|docs/[\w/.-]+\.md)`*\)? §([^\n]+)")


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SCANNED:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return files


def headings(page: Path) -> list[str]:
    """Section ids of a page, from its ``##``/``###`` headings ``§<id>``: the number of a numbered heading
    (``## §4.2 Components`` → ``4.2``), else the title up to a ``(``, ``:`` or dash (``## §Golden: verify
    gate 7`` → ``Golden``)."""
    titles = [m.group(1).strip() for m in re.finditer(r"^#{2,3} §(.+)$", page.read_text(encoding="utf-8"), re.M)]
    return [re.match(r"[\d.]*\d", t).group(0) if t[0].isdigit() else re.split(r" \(|:| —", t)[0] for t in titles]


def cites(remainder: str, section: str) -> bool:
    """Whether the text after a citation's ``§`` starts with ``section`` as a whole id (``5`` is not ``5.3``);
    a title cut by the end of the line (``§Ternary`` ⏎ ``and binary …``) counts when it starts the title."""
    if len(remainder.strip()) > 3 and section.startswith(remainder.strip()):
        return True
    if not remainder.startswith(section):
        return False
    rest = remainder[len(section):]
    return not rest or not (rest[0].isalnum() or (rest[0] == "." and rest[1:2].isdigit()))


def test_every_cited_section_exists():
    ids = {}
    bad = []
    for path in scanned_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in CITATION.finditer(line):
                if re.match(r"(N\b|<)", m.group(2)):
                    continue  # the convention itself: "container §N", "§<title>"
                target = ALIASES.get(m.group(1)) or ROOT / m.group(1)
                if not target.exists():
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)[:60]} (no page)")
                    continue
                sections = ids.setdefault(target, headings(target))
                if not any(cites(m.group(2), s) for s in sections):
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)[:60]}")
    assert not bad, "citations of missing sections:\n" + "\n".join(bad)


def test_relative_links_in_docs_resolve():
    bad = []
    for page in DOCS.rglob("*.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                bad.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not bad, "\n".join(bad)


def test_the_citation_rule_itself():
    assert cites("5 CHECK 1", "5") and cites("5.3, §7", "5.3") and not cites("5.3", "5")
    assert cites("Identity and reading: the result", "Identity and reading") and not cites("12", "1")
