"""A listening socket held on a node's stage address while it joins: its stage inbox binds only once it has
an assignment, and the coordinator probes the registered endpoint at join."""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator

from client_sdk.protocol.endpoint import tcp_address

log = logging.getLogger("batchmarket.miner")


@contextlib.contextmanager
def listening(endpoint: str) -> Iterator[None]:
    """Listens on `tcp://host:port` (`*` or no port: nothing to hold) until the block ends. A port already
    taken is logged and left alone: whoever holds it answers the probe, or the stage cannot bind anyway."""
    address = tcp_address(endpoint)  # None for `*`: the inbox takes any free port, which no probe can find
    if address is None:
        yield
        return
    try:
        server = socket.create_server(address, reuse_port=False)
    except OSError as exc:
        log.warning("cannot listen on %s while joining (%s); the coordinator probes it anyway", endpoint, exc)
        yield
        return
    with server:
        yield
