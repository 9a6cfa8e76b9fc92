"""Headless Chromium for the site's tests: how to start it, open a page from file:// and
wait for it, and what a reader would see stick out or come from the network.

Chromium is a test dependency: `.ci/run` installs Debian's chromium and chromium-driver
and sets REQUIRE_BROWSER=1. Without them these tests skip, unless that variable is set.
Screenshots go to site/_screens/.
"""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "site"
SCREENS = SITE / "_screens"
EXECUTED = ROOT / "build" / "notebooks"
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


def browser_or_skip(need_site: bool = True):
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium and driver and (not need_site or (SITE / "index.html").exists()):
        return chromium, driver
    reason = ("needs Debian's chromium and chromium-driver, and a built site (make site); "
              "apt-get install -y chromium chromium-driver")
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but the browser test cannot run: {reason}")
    pytest.skip(reason)


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


def start_chromium(profile: Path, need_site: bool = True):
    """A headless Chromium that logs every request, so a test can see what was fetched."""
    chromium, driver_path = browser_or_skip(need_site)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(60)
    SCREENS.mkdir(parents=True, exist_ok=True)
    return driver


def wait_for(browser, script: str, seconds: float = 30):
    """What `script` returns once it is truthy, polled for up to `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = browser.execute_script(script)
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)
