"""Open the site in a real headless Chromium, from file://, and check what a reader sees.

Chromium is a test dependency: `.ci/run` installs Debian's chromium and chromium-driver
and sets REQUIRE_BROWSER=1. Without them this test skips, unless that variable is set.
Screenshots go to site/_screens/.
"""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parents[2] / "site"
PAGES = ["index.html", "04_positional_encoding.html", "diff_03_04.html"]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1000"]


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
    yield driver
    driver.quit()


def requested_urls(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_offline_with_maths_and_figures(browser, page):
    requested_urls(browser)  # drain what the browser's own start page loaded
    browser.get((SITE / page).as_uri())
    browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.MathJax.startup.promise.then(() => done(true));")
    typeset = browser.execute_script("return document.querySelectorAll('mjx-container').length")
    prose = browser.execute_script(
        "const cells = document.querySelectorAll('.jp-MarkdownCell, .course-page');"
        "return [...cells].map(c => c.innerText).join('\\n');")
    images = browser.execute_script(
        "return [...document.images].map(i => [i.complete, i.naturalWidth]);")
    screens = SITE / "_screens"
    screens.mkdir(exist_ok=True)
    browser.save_screenshot(str(screens / page.replace(".html", ".png")))
    if page.startswith("04"):
        assert typeset > 20  # the page's formulas became MathJax elements
    assert not re.search(r"\$[^$\n]{1,80}\$", prose), "raw $...$ left in the visible text"
    assert all(complete and width > 0 for complete, width in images), images
    # chrome:// and chrome-untrusted:// (its new-tab page) are the browser's own UI, not
    # the network; Chromium 156 loads the latter when it starts.
    own_ui = ("chrome://", "chrome-untrusted://")
    outside = [url for url in requested_urls(browser)
               if not url.startswith(("file://", "data:", "about:", "blob:", *own_ui))]
    assert outside == [], f"requests outside file://: {outside}"
