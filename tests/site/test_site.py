"""The rendered site works offline: no external resources, no broken links, local maths, and
a student edition without the answers.

These run on `site/` and `site-student/` after `make site site-student` (make test builds
them from the executed notebooks). Without a built site they skip, unless REQUIRE_SITE=1,
which `make test` sets.
"""

import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from course_site.pages import DIFFS, diff_name
from course_tools.answer_leaks import answer_fragments, leaks
from course_tools.student import CHECK, SOLUTION, tags

ROOT = Path(__file__).resolve().parents[2]
SITE, STUDENT_SITE = ROOT / "site", ROOT / "site-student"
EXECUTED = ROOT / "build" / "notebooks"
PAGES = sorted(SITE.glob("*.html")) + sorted(STUDENT_SITE.glob("*.html"))
# Attributes that make a browser fetch something (links in prose, <a href>, are fine).
FETCHED = {("script", "src"), ("link", "href"), ("img", "src"), ("source", "src"),
           ("iframe", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
           ("object", "data"), ("track", "src"), ("input", "src")}

if not (SITE / "index.html").exists() or not (STUDENT_SITE / "index.html").exists():
    if os.environ.get("REQUIRE_SITE") == "1":
        raise RuntimeError(f"no site in {SITE} or {STUDENT_SITE}: run `make site site-student`")
    pytest.skip("no site built: run `make site site-student` (make test does)",
                allow_module_level=True)


def name(page: Path) -> str:
    return f"{page.parent.name}/{page.name}"


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


def remote_in_css(css: str) -> list[str]:
    return re.findall(r"""(?:url\(|@import\s+)["']?((?:https?:)?//[^"')\s]+)""", css)


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_nothing_is_fetched_from_the_network(page):
    references = parse(page)
    remote = [url for url in references.fetched if is_remote(url)]
    remote += remote_in_css("\n".join(references.styles))
    assert remote == [], f"{page.name} loads {remote}"


def test_no_stylesheet_or_script_of_the_theme_reaches_another_host():
    """The theme's own files: fonts, icons or analytics from a CDN would break offline."""
    found = {}
    for path in (SITE / "_static").rglob("*"):
        if path.suffix == ".css":
            found[path.name] = remote_in_css(path.read_text(encoding="utf-8", errors="replace"))
        elif path.suffix == ".js" and "mathjax" not in path.parts:
            text = path.read_text(encoding="utf-8", errors="replace")
            found[path.name] = re.findall(r"""(?:fetch|importScripts|\.src\s*=)\s*\(?["']"""
                                          r"""(https?://[^"']+)""", text)
    assert {name: urls for name, urls in found.items() if urls} == {}


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_internal_link_and_resource_exists(page):
    references = parse(page)
    for url in references.links + references.fetched:
        parsed = urlparse(url)
        if parsed.scheme or url.startswith(("#", "//")) or not parsed.path:
            continue
        assert (page.parent / unquote(parsed.path)).exists(), f"{page.name} → {url}"


def test_every_notebook_and_diff_has_a_page_linked_from_the_index():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    links = {urlparse(link).path for link in parse(SITE / "index.html").links}
    for notebook in notebooks:
        assert notebook.with_suffix(".html").name in links, notebook.name
    for old, new in DIFFS:
        assert f"{diff_name(old, new)}.html" in links
    # A diff shows a stage's code, which answers exercises: the student edition has no diff
    # pages, and shows each diff in its notebook, after the exercises.
    assert not list(STUDENT_SITE.glob("diff_*.html"))
    assert not [(page.name, link) for page in sorted(STUDENT_SITE.glob("*.html"))
                for link in parse(page).links if "diff_" in link]


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_no_widget_state_and_maths_from_the_local_mathjax(page):
    text = page.read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget" not in text
    if 'class="math' in text:
        assert 'src="_static/mathjax/tex-chtml.js' in text
    assert "mathjax@" not in text and "cdn.jsdelivr" not in text


def test_the_maths_of_the_notebooks_reaches_their_pages():
    """MyST's dollarmath turns the notebooks' $...$ into maths; without it they stay text."""
    page = (SITE / "04_positional_encoding.html").read_text(encoding="utf-8")
    assert len(re.findall(r'class="math notranslate nohighlight"', page)) > 10


def test_stage_pages_link_prev_next_index_their_diff_and_their_own_sections():
    page = (SITE / "04_positional_encoding.html").read_text(encoding="utf-8")
    assert re.search(r'<a class="left-prev"\s+href="03_masking.html"', page)
    assert re.search(r'<a class="right-next"\s+href="05_stacking.html"', page)
    links = {urlparse(link).path for link in parse(SITE / "04_positional_encoding.html").links}
    assert {"index.html", "diff_03_04.html"} <= links
    toc = page[page.index('class="bd-sidebar-secondary'):]  # the contents beside the page
    assert len(re.findall(r'class="reference internal nav-link" href="#', toc)) >= 4


def test_search_ships_its_index_as_a_script_beside_the_pages():
    search = (SITE / "search.html").read_text(encoding="utf-8")
    assert "searchindex.js" in search
    index = (SITE / "searchindex.js").read_text(encoding="utf-8")
    assert index.startswith("Search.setIndex(") and '"causal"' in index


def test_the_teachers_guide_is_linked_from_the_index_with_its_seven_sessions():
    assert "teaching.html" in {urlparse(link).path for link in parse(SITE / "index.html").links}
    guide = (SITE / "teaching.html").read_text(encoding="utf-8")
    sessions = re.findall(r"<h2>Session (\d)", guide)
    assert sessions == [str(n) for n in range(1, 8)]
    links = {urlparse(link).path for link in parse(SITE / "teaching.html").links}
    assert "03_masking.html" in links and "09_bug_zoo.html" in links
    assert not any(".ipynb" in link for link in links), "a link still points at a notebook file"


def page_text(page: Path) -> str:
    """What a reader sees, roughly: tags dropped (highlighting splits code into spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def shown(cell: dict) -> str:
    """A cell's source and outputs as text, HTML tags dropped."""
    parts = ["".join(cell["source"])]
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        parts += ["".join(output.get("text", [])), "".join(data.get("text/plain", [])),
                  html.unescape(re.sub(r"<[^>]+>", "", "".join(data.get("text/html", []))))]
    return "\n".join(parts)


def exercises() -> list[tuple[str, list[str], list[str]]]:
    """Per notebook with exercises: the lines only its answers hold, and its checks' outputs."""
    found = []
    for path in sorted(EXECUTED.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        # A line counts as the answer's own only if nothing else in the notebook shows it
        # (a stage diff, for one, shows the stage's code).
        elsewhere = "\n".join(shown(c) for c in cells if SOLUTION not in tags(c))
        answers = [line.strip() for c in cells if SOLUTION in tags(c)
                   for line in "".join(c["source"]).splitlines()
                   if len(line.strip()) > 12 and line.strip() not in elsewhere]
        checks = [line.strip() for c in cells if CHECK in tags(c)
                  for output in c.get("outputs", []) for line in output.get("text", [])
                  if len(line.strip()) > 12]
        if answers:
            found.append((path.with_suffix(".html").name, answers, checks))
    return found


def test_the_student_edition_holds_no_answer_and_no_check_output():
    cases = exercises()
    assert len(cases) >= 6, "the notebooks' exercises were not found"
    for name, answers, checks in cases:
        teacher, student = page_text(SITE / name), page_text(STUDENT_SITE / name)
        assert all(line in teacher for line in answers), f"{name}: the teacher's page lost one"
        assert [line for line in answers if line in student] == [], name
        assert checks and all(line in teacher for line in checks), name
        assert [line for line in checks if line in student] == [], name
    note = "answer is left out, and its check is shown unrun"
    assert note in page_text(STUDENT_SITE / "index.html")
    # Nor does any page point to the answers, or to the teacher's commands.
    for page in sorted(STUDENT_SITE.glob("*.html")):
        text = page_text(page)
        assert [words for words in ("one possible answer", "make student", "make lab",
                                    "teaching.md") if words in text] == [], page.name
    assert not (STUDENT_SITE / "teaching.html").exists(), "the teacher's guide holds hints"
    assert (SITE / "teaching.html").exists()


def article_text(page: Path) -> str:
    """The page's own content, without the navigation and tables of contents around it."""
    article = re.search(r"<article\b.*</article>", page.read_text(encoding="utf-8"), re.S)
    assert article, f"{page.name}: no <article>"
    return html.unescape(re.sub(r"<[^>]+>", "", article.group()))


def test_no_answer_shows_before_its_exercise_on_the_student_pages():
    """Every run of ten code tokens an answer holds (and its exercise does not give) is
    looked for on the page before the exercises end: diffs, demonstrations, outputs, prose."""
    early = {}
    for path in sorted(EXECUTED.glob("*.ipynb")):
        answers = answer_fragments(json.loads(path.read_text(encoding="utf-8"))["cells"])
        if not answers:
            continue
        page = path.with_suffix(".html").name
        teacher, student = article_text(SITE / page), article_text(STUDENT_SITE / page)
        # The student page: everything before the cells moved after the exercises.
        before = student.split("After the exercises")[0]
        assert "Exercises" in before, page
        assert leaks(answers, [(0, before)]) == {}, page
        early[page] = leaks(answers, [(0, teacher.split("Exercises")[0])])
    # The scan reads pages as a student does: the teacher's pages show these answers early.
    assert sorted(page for page, found in early.items() if found) == [
        "01_naive_attention.html", "03_masking.html", "04_positional_encoding.html",
        "07_multi_head.html", "14_decoder_only.html"]
