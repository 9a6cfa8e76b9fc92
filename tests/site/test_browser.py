"""Open the site in a real headless Chromium, from file://, and check what a reader sees: at
1280 and 800 pixels wide, nothing overflows and nothing is fetched from another host; maths
is typeset; search finds pages offline; and a stage diff fits in JupyterLab's own page too.
The Try-it page has tests of its own (test_try_it.py); chromium.py starts the browser.
"""

import re
import time

import pytest
from chromium import (
    EXECUTED,
    OVERFLOWING,
    SCREENS,
    SITE,
    WIDTHS,
    open_page,
    outside,
    requested_urls,
)

PAGES = ["index.html", "04_positional_encoding.html", "diff_03_04.html",
         "13_decoding_like_the_paper.html", "try_it.html"]
SHOWN_LAYOUTS = """
return [...document.querySelectorAll('.stagediff table')]
  .filter(t => getComputedStyle(t).display != 'none').map(t => t.className);
"""


# The layout each diff should take: side by side only where the box holds both files' lines.
DIFF_LAYOUT = {1920: "sd-table sd-split", 1280: "sd-table sd-unified",
               800: "sd-table sd-unified"}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", PAGES)
def test_page_fits_its_width_offline_with_figures(browser, page, width):
    requested_urls(browser)  # drain what came before
    open_page(browser, (SITE / page).as_uri(), width)
    images = browser.execute_script(
        "return [...document.images].map(i => [i.src, i.complete, i.naturalWidth]);")
    browser.save_screenshot(str(SCREENS / page.replace(".html", f"_{width}.png")))
    assert browser.execute_script(OVERFLOWING) == []
    assert all(complete and width > 0 for _, complete, width in images), images
    if page.startswith(("04", "13")):  # pages with figures: the outputs are really there
        assert len(images) >= 2
    assert outside(requested_urls(browser)) == []
    if page.startswith("diff"):
        assert browser.execute_script(SHOWN_LAYOUTS) == [DIFF_LAYOUT[width]]
    if page.startswith("04"):  # sphinx-copybutton adds a button to every code cell
        buttons, cells = browser.execute_script(
            "return [document.querySelectorAll('button.copybtn').length,"
            " document.querySelectorAll('.cell_input div.highlight pre').length];")
        assert buttons >= cells > 5


# Every code cell whose lines are at most 88 columns, and the longest line of those it holds.
CODE_CELLS = """
return [...document.querySelectorAll('.cell_input div.highlight pre')]
  .map(pre => [Math.max(...pre.textContent.split('\\n').map(line => line.length)),
               pre.scrollWidth > pre.clientWidth])
  .filter(([longest]) => longest <= 88);
"""


@pytest.mark.parametrize("page", ["03_masking.html", "04_positional_encoding.html"])
def test_code_of_88_columns_reads_without_scrolling_at_1280_px(browser, page):
    """A projector or a laptop shows the whole line: at 1280 px the content column was 75
    columns wide, and a cell's end ("# your code here: hi…") was cut off."""
    open_page(browser, (SITE / page).as_uri(), 1280)
    cells = browser.execute_script(CODE_CELLS)
    assert len(cells) > 5 and max(longest for longest, _ in cells) > 80
    assert [longest for longest, scrolls in cells if scrolls] == []


def test_a_wide_window_shows_the_diff_side_by_side(browser):
    open_page(browser, (SITE / "diff_03_04.html").as_uri(), 1920)
    browser.save_screenshot(str(SCREENS / "diff_03_04_1920.png"))
    assert browser.execute_script(SHOWN_LAYOUTS) == [DIFF_LAYOUT[1920]]
    assert browser.execute_script(OVERFLOWING) == []


def pages_with_maths() -> list[str]:
    return sorted(p.name for p in SITE.glob("*.html")
                  if 'class="math' in p.read_text(encoding="utf-8"))


def test_maths_is_typeset_on_every_page_that_has_some(browser):
    pages = pages_with_maths()
    assert len(pages) >= 5
    requested_urls(browser)
    for page in pages:
        open_page(browser, (SITE / page).as_uri(), WIDTHS[0])
        typeset = browser.execute_script("return document.querySelectorAll('mjx-container')"
                                         ".length")
        maths = browser.execute_script("return document.querySelectorAll('.math').length")
        prose = browser.execute_script(
            "return document.querySelector('article, .bd-article').innerText")
        assert typeset >= maths > 0, page
        assert not re.search(r"\\\(|\$[^$\n]{1,80}\$", prose), f"{page}: raw maths left"
    assert outside(requested_urls(browser)) == []


def test_search_finds_the_masking_notebook_offline(browser):
    requested_urls(browser)
    open_page(browser, (SITE / "search.html").as_uri() + "?q=causal+mask", WIDTHS[0])
    deadline, results = time.monotonic() + 30, []
    while time.monotonic() < deadline and not results:
        results = browser.execute_script(
            "return [...document.querySelectorAll('#search-results li a')]"
            ".map(a => a.getAttribute('href'));")
        time.sleep(0.2)
    browser.save_screenshot(str(SCREENS / "search_1280.png"))
    assert results and results[0].split("?")[0].split("#")[0] == "03_masking.html", results
    assert outside(requested_urls(browser)) == []


@pytest.mark.parametrize(("width", "layout"), [(1280, "sd-table sd-split"),
                                               (800, "sd-table sd-unified")])
def test_a_diff_fits_in_jupyterlabs_own_page(browser, tmp_path, width, layout):
    """The notebook output of stage_diff, under JupyterLab's stylesheet (nbconvert's lab
    template carries it): side by side in a wide notebook, unified in a narrow one, and
    nothing wider than its cell."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.read(EXECUTED / "03_masking.ipynb", as_version=4)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(notebook)
    # The template's require.js, MathJax 2 and mermaid come from CDNs: not needed here.
    body = re.sub(r'<script[^>]*src="https?://[^"]*"[^>]*>\s*</script>', "", body)
    page = tmp_path / "03_masking.html"
    page.write_text(body, encoding="utf-8")
    browser.set_window_size(width, 1000)
    browser.get(page.as_uri())
    assert browser.execute_script("return document.querySelectorAll('.jp-OutputArea .stagediff')"
                                  ".length") == 1, "no stage diff under JupyterLab's markup"
    browser.save_screenshot(str(SCREENS / f"jupyterlab_diff_{width}.png"))
    assert browser.execute_script(SHOWN_LAYOUTS) == [layout]
    assert browser.execute_script(OVERFLOWING) == []
