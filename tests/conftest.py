"""Fixtures shared by the test modules."""

import importlib.util
import socket

import pytest

from toolkit.paths import PROJECT_ROOT


@pytest.fixture
def connections(monkeypatch) -> list:
    """Every address a socket of this process tries to reach while the test runs: "fails at
    once" means none, whatever the machine's speed (a retry loop would try again and again)."""
    tried, connect = [], socket.socket.connect

    def counted(self, address):
        tried.append(address)
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", counted)
    return tried


@pytest.fixture(scope="module")
def bench():
    """benchmarks/bench.py, a script outside the packages, loaded as a module."""
    spec = importlib.util.spec_from_file_location("bench", PROJECT_ROOT / "benchmarks" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
