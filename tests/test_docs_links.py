"""Every link between the README and the pages in docs/ leads somewhere."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, - for space."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md"
                                   and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == [], f"{page.name} links to what is not there"


def test_the_first_screen_offers_three_ways_in_with_their_commands():
    first_screen = (ROOT / "README.md").read_text().split("## The notebooks")[0]
    for words in ("**Learn it.**", "python3 course.py lab", "**Teach it.**", "make student-kit",
                  "**Work on it.**", "make test", "docs/maintaining.md", "docs/teaching.md"):
        assert words in first_screen, words
    assert len(first_screen.splitlines()) < 45, "the first screen no longer fits a screen"
