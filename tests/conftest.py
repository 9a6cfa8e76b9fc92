"""Under pytest-xdist (make test, make quick) the tests that start processes go first, so that
the quick ones fill in the end of the run instead of one worker finishing a long test alone
while the other waits. Elsewhere (make mutants, one file) the order stays the files' own, so
that a planted bug meets its quick tests first."""

import os

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable sort
