"""A stage's endpoint as miners register it and peers dial it (`tcp://HOST:PORT`), and the one probe every
party makes of one: a TCP connect (SYN, SYN-ACK), which needs nothing from the peer but a listening socket.
The coordinator takes it as a reachability check at join, a node as the round trip of its link."""

from __future__ import annotations

import re
import socket
import time
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 2.0
_ENDPOINT = re.compile(r"tcp://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(?P<port>[0-9]{1,5})")


def check_stage_endpoint(text: str) -> str:
    """`text` if it is `tcp://HOST:PORT` (a host name, an IPv4 address or a bracketed IPv6 address, a port
    from 1 to 65535, nothing else); ValueError saying what is wrong otherwise. It goes on-chain and every
    previous stage dials it, so a mistake here would leave the miner unreachable."""
    match = _ENDPOINT.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not an endpoint a stage can dial: use tcp://HOST:PORT, e.g. tcp://203.0.113.7:5555"
        )
    host, port = match["host"], int(match["port"])
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} of {text!r} is not from 1 to 65535")
    if host.startswith(("-", ".")) or host.endswith(("-", ".")) or ".." in host:
        raise ValueError(f"{host!r} in {text!r} is not a host name")
    if host in ("0.0.0.0", "[::]"):
        raise ValueError(f"{text!r} is an address to listen on, not to dial: give this machine's address")
    return text


def tcp_address(endpoint: str) -> tuple[str, int] | None:
    """(host, port) of `tcp://host:port`; None for another scheme, no port, or a port that is not a number in
    range (`*`, which ZeroMQ binds to any free port)."""
    parts = urlsplit(endpoint)
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme != "tcp" or host is None or port is None:
        return None
    return host, port


def tcp_connect_ms(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> float | None:
    """Milliseconds to open a TCP connection to `tcp://host:port`; None if it cannot be reached in time or the
    endpoint is not TCP."""
    address = tcp_address(endpoint)
    if address is None:
        return None
    started = time.perf_counter()
    try:
        with socket.create_connection(address, timeout=timeout_s):
            pass
    except OSError:
        return None
    return (time.perf_counter() - started) * 1_000
