"""The link to the next stage, measured: the round trip of a TCP connect to its ZeroMQ endpoint (SYN and
SYN-ACK), which needs nothing from the peer but its listening socket; the coordinator's router takes it as the
link's latency."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 2.0


def tcp_rtt_ms(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> float | None:
    """Milliseconds to open a TCP connection to `tcp://host:port`; None if it cannot be reached in time or the
    endpoint is not TCP."""
    parts = urlsplit(endpoint)
    if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
        return None
    started = time.perf_counter()
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            pass
    except OSError:
        return None
    return (time.perf_counter() - started) * 1_000
