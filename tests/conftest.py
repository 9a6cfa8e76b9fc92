"""The tests that start processes go first: under pytest-xdist the quick ones then fill in the
end of the run, instead of one worker finishing a long test alone while the other waits."""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: file order kept
