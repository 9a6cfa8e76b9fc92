"""Open the site in a real headless Chromium, from file://, and check what a reader sees: at
1280 and 800 pixels wide, nothing overflows and nothing is fetched from another host; maths
is typeset; search finds pages offline; and a stage diff fits in JupyterLab's own page too.

Chromium is a test dependency: `.ci/run` installs Debian's chromium and chromium-driver
and sets REQUIRE_BROWSER=1. Without them this test skips, unless that variable is set.
Screenshots go to site/_screens/.
"""

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"
SCREENS = SITE / "_screens"
EXECUTED = ROOT / "build" / "notebooks"
PAGES = ["index.html", "04_positional_encoding.html", "diff_03_04.html",
         "13_decoding_like_the_paper.html"]
WIDTHS = [1280, 800]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# What sticks out: an element past the article's right edge that no scrolling box of its
# own clips (code cells scroll on purpose), any box inside a diff that scrolls or overflows,
# and a horizontal scrollbar on the page itself.
OVERFLOWING = """
const article = document.querySelector('.bd-article') || document.querySelector('.jp-Notebook')
  || document.body;
const edge = article.getBoundingClientRect().right + 1;
const shown = e => getComputedStyle(e).display != 'none' && e.getClientRects().length > 0;
const clipped = e => {
  for (let a = e.parentElement; a && a != article; a = a.parentElement)
    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(a).overflowX)) return true;
  return false;
};
const name = e => e.tagName + '.' + e.className;
const past = [...article.querySelectorAll('*')]
  .filter(e => shown(e) && e.getBoundingClientRect().right > edge && !clipped(e)).map(name);
const inDiffs = [...document.querySelectorAll('.stagediff, .stagediff *')]
  .filter(e => shown(e) && e.scrollWidth > e.clientWidth + 1).map(name);
const page = document.documentElement;
return past.concat(inDiffs, page.scrollWidth > page.clientWidth + 1 ? ['the page'] : []);
"""
SHOWN_LAYOUTS = """
return [...document.querySelectorAll('.stagediff table')]
  .filter(t => getComputedStyle(t).display != 'none').map(t => t.className);
"""


def browser_or_skip():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium and driver and (SITE / "index.html").exists():
        return chromium, driver
    reason = ("needs Debian's chromium and chromium-driver, and a built site (make site); "
              "apt-get install -y chromium chromium-driver")
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but the browser test cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver_path = browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(60)
    SCREENS.mkdir(exist_ok=True)
    yield driver
    driver.quit()


def requested_urls(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def outside(urls: list[str]) -> list[str]:
    # chrome:// and chrome-untrusted:// (its new-tab page) are the browser's own UI, not the
    # network; Chromium loads the latter when it starts.
    own = ("file://", "data:", "about:", "blob:", "chrome://", "chrome-untrusted://")
    return [url for url in urls if not url.startswith(own)]


def open_page(browser, url: str, width: int) -> None:
    browser.set_window_size(width, 1000)
    browser.get(url)
    browser.execute_async_script(  # wait for MathJax where the page has it
        "const done = arguments[arguments.length - 1];"
        "if (window.MathJax && MathJax.startup) MathJax.startup.promise.then(() => done(1));"
        "else done(0);")


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
