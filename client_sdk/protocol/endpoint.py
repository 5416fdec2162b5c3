"""A stage's endpoint as miners register it and peers dial it: `tcp://HOST:PORT`."""

from __future__ import annotations

import re

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
