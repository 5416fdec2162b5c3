"""free_port never gives one process the same port twice, even when the OS offers it again (as it may until
the server it went to binds it)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from client_sdk.chain import anvil
from client_sdk.chain.anvil import free_port

OFFERS: list[int] = []  # what the stand-in OS offers, in order


class OfferingSocket:
    """Stands in for the OS's socket (external): binding to port 0 gets the next port of OFFERS."""

    def __init__(self, *_: Any) -> None:
        self.port = 0

    def __enter__(self) -> OfferingSocket:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self.port = OFFERS.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_offered_again_is_not_given_again(monkeypatch: pytest.MonkeyPatch) -> None:
    given = free_port()
    OFFERS[:] = [given, given, given + 1]
    monkeypatch.setattr(anvil.socket, "socket", OfferingSocket)
    assert free_port() == given + 1
    assert OFFERS == []


def test_ports_given_are_distinct_and_bindable() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports[-1]))
