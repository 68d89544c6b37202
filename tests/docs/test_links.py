"""The README and the manual send readers to files that exist.

``mkdocs build --strict`` (run by bin/test) checks the links between the manual's pages and the
snippets they include; it does not read README.md or benchmarks/README.md, whose links a reader
follows on a forge or in an editor. These tests check those links, and that every dated result
file under benchmarks/results/ is included by some page of the manual, so no measurement is
reported in a file nobody reads.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"

# [text](target) and ![alt](target), not inside code spans or fences (stripped first).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"', re.M)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def links(md: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link in ``md``, code excluded."""
    text = md.read_text()
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#"):
                out.append((n, target))
    return out


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (as mkdocs uses it) gives a heading."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return re.sub(r"[-\s]+", "-", text).strip("-")


def anchors(md: Path) -> set[str]:
    """The anchors of a page's headings, those of the snippets it includes too."""
    text = md.read_text()
    for name in SNIPPET.findall(text):
        name = name.split(":")[0]  # "file:section" includes a marked section of a file
        text += "".join("\n" + p.read_text() for p in (RESULTS / name, ROOT / name) if p.is_file())
    return {slug(h) for h in HEADING.findall(FENCE.sub("", text))}


def rendered(md: Path, anchor: str) -> bool:
    """Whether ``anchor`` is an object the page renders from the source (``::: zabray.x``): its
    anchor is the object's dotted path, under one of the page's ``:::`` roots."""
    roots = re.findall(r"^::: (\S+)", md.read_text(), re.M)
    return any(anchor == r or anchor.startswith(r + ".") for r in roots)


def broken(md: Path) -> list[str]:
    bad = []
    for n, target in links(md):
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve()
        where = f"{md.relative_to(ROOT)}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest) and not rendered(dest, anchor):
            bad.append(f"{where} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    return bad


@pytest.mark.parametrize("md", ["README.md", "benchmarks/README.md"])
def test_readme_links_resolve(md: str) -> None:
    assert broken(ROOT / md) == []


def test_manual_links_resolve() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    assert pages, "docs/ holds no page"
    assert [b for page in pages for b in broken(page)] == []


def test_readme_links_into_the_manual() -> None:
    """The README's "where to go next" is the way into the manual: it links pages that exist."""
    targets = {t.partition("#")[0] for _, t in links(ROOT / "README.md")}
    assert "docs/index.md" in targets
    assert any(t.startswith("docs/reference/") for t in targets)


def test_every_result_file_is_in_the_manual() -> None:
    included = {name for page in DOCS.rglob("*.md") for name in SNIPPET.findall(page.read_text())}
    results = {p.name for p in RESULTS.glob("*.md")}
    assert results, "benchmarks/results holds no result file"
    assert sorted(results - included) == []


def test_result_files_name_their_run() -> None:
    """Each result file is named SCRIPT-YYYY-MM-DD.md and says its date and commit."""
    for f in sorted(RESULTS.glob("*.md")):
        assert re.fullmatch(r"[a-z_]+-\d{4}-\d{2}-\d{2}\.md", f.name), f.name
        text = f.read_text()
        assert text.startswith("## "), f"{f.name}: starts with a level-2 heading, to sit under a page's title"
        assert "**date:**" in text and ("**commit:**" in text), f"{f.name}: names its date and commit"
