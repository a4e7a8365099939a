"""The documentation's links resolve, and the results pages are reachable.

* every relative link (and image) in ``README.md``, ``CHANGELOG.md``, ``docs/**/*.md`` and
  ``benchmarks/**/*.md`` names an existing file, and its ``#anchor``, if any, a heading (or
  an HTML ``id``) of the page it names, spelt as GitHub spells heading anchors;
* every page of ``docs/results/`` is listed in ``docs/results/README.md`` and linked from a
  manual page of ``docs/`` (a figure nobody can find from the manual is lost);
* no code or page cites sections of a "design" document: none ships with the project.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
RESULTS = DOCS / "results"

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
_REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ID = re.compile(r"""<[^>]+\b(?:id|name)\s*=\s*["']([^"']+)["']""")


def _markdown_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "CHANGELOG.md"]
    files += sorted(DOCS.rglob("*.md"))
    files += sorted((REPO / "benchmarks").rglob("*.md"))
    return [f for f in files if f.is_file()]


def _prose_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, line, line with its inline code spans blanked) outside fenced code
    blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line, _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)))
    return lines


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation removed,
    spaces made hyphens (``"passnet serve: the reward endpoint"`` ->
    ``"passnet-serve-the-reward-endpoint"``)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page offers: its headings' (numbered as GitHub numbers repeats) and
    HTML ``id``/``name`` attributes."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line, prose in _prose_lines(page.read_text(encoding="utf-8")):
        found.update(_HTML_ID.findall(prose))
        match = _HEADING.match(line)
        if not match:
            continue
        base = github_anchor(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link of a page that is not to another site."""
    links = []
    for number, _, prose in _prose_lines(page.read_text(encoding="utf-8")):
        targets = _INLINE_LINK.findall(prose)
        ref = _REFERENCE_DEF.match(prose)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            links.append((number, target))
    return links


def _shown(page: Path) -> str:
    return str(page.relative_to(REPO)) if page.is_relative_to(REPO) else str(page)


def broken_links(page: Path) -> list[str]:
    """What is wrong with a page's relative links, one line per broken link."""
    problems = []
    for number, target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path_part)).resolve() if path_part else page
        where = f"{_shown(page)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file {dest}")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            problems.append(f"{where}: {dest.name} has no heading with anchor #{anchor}")
    return problems


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_link_check_finds_broken_links(tmp_path: Path) -> None:
    other = tmp_path / "other.md"
    other.write_text("# Some page\n\n## The `record`: fields\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#the-record-fields) [missing](nosuch.md) ![img](pic.png)\n"
        "[bad anchor](other.md#not-a-heading) [self](#top) `[code](nowhere.md)`\n"
        "[web](https://example.org/x.md)\n\n```\n[fenced](nowhere.md)\n```\n# Top\n"
    )
    problems = broken_links(page)
    assert [p.split(": ")[1] for p in problems] == [
        "nosuch.md",
        "pic.png",
        "other.md#not-a-heading",
    ], problems


def test_github_anchor() -> None:
    assert github_anchor("passnet serve: the reward endpoint") == (
        "passnet-serve-the-reward-endpoint"
    )
    assert github_anchor("masked_mean_pooling — `FusedMaskedMeanPooling`") == (
        "masked_mean_pooling--fusedmaskedmeanpooling"
    )
    assert github_anchor("The 29 dev graphs (H200)") == "the-29-dev-graphs-h200"


def _linked_pages(pages: list[Path]) -> set[Path]:
    linked = set()
    for page in pages:
        for _, target in relative_links(page):
            path_part = target.partition("#")[0]
            if path_part:
                linked.add((page.parent / unquote(path_part)).resolve())
    return linked


def test_results_pages_are_indexed_and_linked_from_the_manual() -> None:
    pages = sorted(p for p in RESULTS.glob("*.md") if p.name != "README.md")
    assert pages, "docs/results/ holds no results page"
    indexed = _linked_pages([RESULTS / "README.md"])
    manual = _linked_pages([p for p in DOCS.glob("*.md")])
    assert [p.name for p in pages if p.resolve() not in indexed] == []
    assert [p.name for p in pages if p.resolve() not in manual] == []
    assert (RESULTS / "README.md").resolve() in _linked_pages([REPO / "README.md"])


# Pages whose rewrite is under way elsewhere; empty this once they no longer cite it.
_DESIGN_CITATION_EXEMPT: frozenset[str] = frozenset()


def test_nothing_cites_a_design_section() -> None:
    roots = [REPO / d for d in ("src", "tests", "benchmarks", "tools", "docs")]
    files = [REPO / "README.md"] + [
        f for root in roots for f in root.rglob("*") if f.suffix in {".py", ".md", ".sh", ".txt"}
    ]
    needle = "design " + "\u00a7"  # spelt apart so this file does not cite it itself
    found = [
        f"{f.relative_to(REPO)}:{n}"
        for f in files
        if str(f.relative_to(REPO)) not in _DESIGN_CITATION_EXEMPT
        for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if needle in line
    ]
    assert found == []
