"""Fixtures shared by the test modules."""

import socket

import pytest


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
