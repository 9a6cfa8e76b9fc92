"""The rendered site works offline: no external resources, no broken links, maths typeset.

These run on `site/` after `make site` (make test builds it from the executed notebooks).
Without a built site they skip, unless REQUIRE_SITE=1, which `make test` sets.
"""

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

SITE = Path(__file__).resolve().parents[2] / "site"
PAGES = sorted(SITE.glob("*.html"))
# Attributes that make a browser fetch something (links in prose, <a href>, are fine).
FETCHED = {("script", "src"), ("link", "href"), ("img", "src"), ("source", "src"),
           ("iframe", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
           ("object", "data"), ("track", "src"), ("input", "src")}

if not PAGES:
    if os.environ.get("REQUIRE_SITE") == "1":
        raise RuntimeError(f"no site in {SITE}: run `make site` first")
    pytest.skip("no site built: run `make site` (make test does)", allow_module_level=True)


class References(HTMLParser):
    """Collect every fetched resource, every link, and the text of inline styles."""

    def __init__(self):
        super().__init__()
        self.fetched: list[str] = []
        self.links: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        for name, value in attrs:
            if (tag, name) in FETCHED and value:
                self.fetched.append(value)
        if tag == "a" and values.get("href"):
            self.links.append(values["href"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)


def parse(page: Path) -> References:
    parser = References()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def is_remote(url: str) -> bool:
    return urlparse(url).scheme in ("http", "https") or url.startswith("//")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_nothing_is_fetched_from_the_network(page):
    references = parse(page)
    remote = [url for url in references.fetched if is_remote(url)]
    css = "\n".join(references.styles)
    css += "".join(p.read_text() for p in SITE.glob("_static/*.css"))
    remote += re.findall(r"""(?:url\(|@import\s+)["']?((?:https?:)?//[^"')\s]+)""", css)
    assert remote == [], f"{page.name} loads {remote}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_internal_link_and_resource_exists(page):
    references = parse(page)
    for url in references.links + references.fetched:
        parsed = urlparse(url)
        if parsed.scheme or url.startswith(("#", "//")):
            continue
        assert (page.parent / unquote(parsed.path)).exists(), f"{page.name} → {url}"


def test_every_notebook_and_diff_has_a_page_linked_from_the_index():
    notebooks = sorted((SITE.parent / "notebooks").glob("*.ipynb"))
    links = set(parse(SITE / "index.html").links)
    for notebook in notebooks:
        assert notebook.with_suffix(".html").name in links, notebook.name
    for old, new in [(n, n + 1) for n in range(1, 7)] + [(1, 7)]:
        assert (SITE / f"diff_{old:02d}_{new:02d}.html").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_widget_state_and_local_mathjax_with_dollar_maths(page):
    text = page.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget" not in text
    assert 'src="_static/mathjax/tex-chtml.js"' in text
    assert 'src="_static/mathjax-config.js"' in text
    assert "inlineMath: [['$', '$']" in (SITE / "_static" / "mathjax-config.js").read_text()


def test_stage_pages_link_prev_next_index_and_their_diff():
    links = parse(SITE / "04_positional_encoding.html").links
    for target in ("03_masking.html", "05_stacking.html", "index.html", "diff_03_04.html"):
        assert target in links


def test_the_teachers_guide_is_linked_from_the_index_with_its_seven_sessions():
    assert "teaching.html" in parse(SITE / "index.html").links
    guide = (SITE / "teaching.html").read_text(encoding="utf-8")
    sessions = re.findall(r"<h2[^>]*>Session (\d)", guide)
    assert sessions == [str(n) for n in range(1, 8)]
    links = parse(SITE / "teaching.html").links
    assert "03_masking.html" in links and "09_bug_zoo.html" in links
    assert not any(".ipynb" in link for link in links), "a link still points at a notebook file"
