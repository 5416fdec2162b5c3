"""`miner relay` and `coordinator relay`: run a relay for stages behind NAT (miner.transport.relay). A
coordinator operator runs one for everyone; any reachable miner may offer one too. Either way the relay asks
the coordinator which miners it serves (miner.transport.relay_admission)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer
import zmq

from client_sdk.cli.support import (
    DEFAULT_COORDINATOR,
    CoordinatorOption,
    console,
    log_to_console,
    say,
)
from client_sdk.errors import UserError
from miner.node.relay_members import CoordinatorMembers
from miner.transport.relay import Relay
from miner.transport.relay_admission import Admission, keep_fresh
from miner.transport.security import LinkKeys

DEFAULT_KEY_FILE = Path.home() / ".batchmarket" / "relay.key"


def relay(
    listen: Annotated[
        str, typer.Option(help="Where the relay listens; stages behind NAT and their peers dial it.")
    ] = "tcp://0.0.0.0:5600",
    key_file: Annotated[
        Path,
        typer.Option(
            help="The relay's key pair, made here the first time; keep it to keep the relay's key.",
            show_default="~/.batchmarket/relay.key",
        ),
    ] = DEFAULT_KEY_FILE,
    coordinator: CoordinatorOption = DEFAULT_COORDINATOR,
) -> None:
    """Relay stage messages to miners that accept no inbound connection (behind NAT), until Ctrl-C. They run
    `miner serve --relay ADDRESS --relay-key KEY` with the address it is reached at and the key it prints.
    It serves only miners joined at the coordinator (asked every few seconds): stages joined through it, and
    messages to them from joined miners. It never decodes a message; each is sealed end to end, so it cannot
    forge, alter or replay one."""
    try:
        keys = LinkKeys.load_or_create(key_file)
    except ValueError as exc:
        raise UserError(f"{exc}: move it away and a new key is made at the next start") from None
    log_to_console()
    admission, members = Admission(), CoordinatorMembers(coordinator, keys.public)
    try:
        running = Relay(keys, listen, admission)
    except zmq.ZMQError as exc:  # the address is taken, not this machine's, or not an address
        raise UserError(f"cannot listen on {listen}: {exc}") from None
    stopping = threading.Event()
    refresher = threading.Thread(
        target=keep_fresh, args=(admission, members, stopping), daemon=True, name="relay-members"
    )
    refresher.start()
    # Ctrl-C and SIGTERM stop the loop; its end is waited for on an event (a Thread.join interrupted by Ctrl-C
    # could leave the thread looking finished while it still polled, and the relay was closed under it)
    for stopping_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stopping_signal, lambda *_: running.stop())
    served = threading.Event()

    def serve() -> None:
        try:
            running.serve()
        finally:
            served.set()

    threading.Thread(target=serve, daemon=True, name="relay").start()
    say(f"relay listening on {running.address.endpoint}")
    say(f"its key (give it with --relay-key): {keys.public.decode()}")
    say(f"serving the miners joined at {coordinator}")  # the refresher reads them now, and warns if it cannot
    try:
        while not served.wait(1.0):
            pass
    finally:
        stopping.set()
        refresher.join(timeout=2.0)  # it may be waiting on the coordinator; it is a daemon
        if not refresher.is_alive():
            members.close()
        counters = running.counters
        console.print(f"relayed {counters.forwarded} messages; dropped {counters.dropped}")
        running.close()
