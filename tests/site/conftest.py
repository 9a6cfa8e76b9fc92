"""The site's browser tests share one Chromium per test module."""

import pytest
from chromium import start_chromium


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = start_chromium(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()
