"""Messages cross real ZeroMQ sockets in order; malformed ones are dropped without stopping the inbox;
injected latency holds every message back at least that long; on a secured link, what a peer sends before
the assignment names it waits (bounded, for a while) instead of being lost."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
import zmq

from miner.transport import frames, link
from miner.transport.frames import Header
from miner.transport.link import Inbox, Outbox
from miner.transport.security import LinkKeys, LinkSecurity


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx = zmq.Context()
    yield ctx
    ctx.term()


def message(microbatch: int) -> tuple[Header, torch.Tensor]:
    return frames.message(
        "activations",
        microbatch,
        request_ids=(1, 2),
        token_ids=(5, 6),
        route=("a", "b"),
        tensor=torch.full((2, 4), float(microbatch)),
    )


def test_messages_arrive_in_order_and_bad_ones_are_skipped(context: zmq.Context[zmq.Socket[bytes]]) -> None:
    inbox = Inbox(context, "tcp://127.0.0.1:*")
    outbox = Outbox(context, inbox.endpoint)
    raw = context.socket(zmq.PUSH)
    raw.connect(inbox.endpoint)
    try:
        outbox.send(*message(0))
        got = inbox.receive(timeout_ms=5_000)
        assert got is not None and got[0].microbatch == 0
        raw.send_multipart([b"\x93garbage", b"1234"])  # a peer sending junk
        raw.send_multipart([b"only one frame"])
        outbox.send(*message(1))
        outbox.send(*message(2))
        received = [inbox.receive(timeout_ms=5_000) for _ in range(2)]
        assert [r[0].microbatch for r in received if r is not None] == [1, 2]
        assert received[1] is not None and torch.equal(received[1][1], torch.full((2, 4), 2.0))
        # PULL fair-queues between peers, so the junk may still be in flight: draining counts it too
        assert inbox.receive(timeout_ms=300) is None
        assert inbox.rejected == 2
    finally:
        raw.close(linger=0)
        outbox.close()
        inbox.close()


def test_injected_latency_delays_every_message(context: zmq.Context[zmq.Socket[bytes]]) -> None:
    inbox = Inbox(context, "tcp://127.0.0.1:*")
    outbox = Outbox(context, inbox.endpoint, latency_ms=80)
    try:
        sent = time.monotonic()
        for microbatch in range(3):
            outbox.send(*message(microbatch))
        arrivals = []
        for _ in range(3):
            got = inbox.receive(timeout_ms=5_000)
            assert got is not None
            arrivals.append((got[0].microbatch, time.monotonic() - sent))
        assert [m for m, _ in arrivals] == [0, 1, 2]
        assert all(elapsed >= 0.080 for _, elapsed in arrivals)  # never before its release time
    finally:
        outbox.close()
        inbox.close()


class Secured:
    """A node's secured context and keys, taking messages from whoever `allow` names."""

    def __init__(self) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.security = LinkSecurity(self.context, LinkKeys.generate())

    def close(self) -> None:
        self.security.stop()
        self.context.destroy(linger=0)


@pytest.fixture
def nodes() -> Iterator[tuple[Secured, Secured, Secured]]:
    made = (Secured(), Secured(), Secured())
    yield made
    for node in made:
        node.close()


def test_what_a_peer_sends_before_the_assignment_names_it_is_taken_once_it_does(
    nodes: tuple[Secured, Secured, Secured], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new plan's peer may send before this node follows it: its messages wait, and once the node's
    assignment names it they come first, in order; a key no assignment names is dropped after its time."""
    monkeypatch.setattr(link, "UNASSIGNED_S", 1.0)
    receiver, newcomer, stranger = nodes
    inbox = Inbox(receiver.context, "tcp://127.0.0.1:*", security=receiver.security)
    early = Outbox(
        newcomer.context, inbox.endpoint, security=newcomer.security, server_key=receiver.security.keys.public
    )
    other = Outbox(
        stranger.context, inbox.endpoint, security=stranger.security, server_key=receiver.security.keys.public
    )
    try:
        for microbatch in (0, 1):
            early.send(*message(microbatch))
        other.send(*message(9))
        assert inbox.receive(timeout_ms=300) is None  # taken in, kept
        receiver.security.allow([newcomer.security.keys.public])  # the node follows the new plan
        early.send(*message(2))
        got = [inbox.receive(timeout_ms=5_000) for _ in range(3)]
        assert [g.header.microbatch for g in got if g is not None] == [0, 1, 2]
        assert {g.sender for g in got if g is not None} == {newcomer.security.keys.public}
        assert inbox.rejected == 0
        time.sleep(1.1)
        assert inbox.receive(timeout_ms=100) is None and inbox.rejected == 1  # the stranger's, after its time
    finally:
        early.close()
        other.close()
        inbox.close()


def test_what_is_kept_for_keys_not_in_the_assignment_is_bounded(
    nodes: tuple[Secured, Secured, Secured], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link, "MAX_UNASSIGNED", 2)
    receiver, stranger, _ = nodes
    inbox = Inbox(receiver.context, "tcp://127.0.0.1:*", security=receiver.security)
    outbox = Outbox(
        stranger.context, inbox.endpoint, security=stranger.security, server_key=receiver.security.keys.public
    )
    try:
        for microbatch in range(5):
            outbox.send(*message(microbatch))
        deadline = time.monotonic() + 5
        while inbox.rejected < 3 and time.monotonic() < deadline:
            inbox.receive(timeout_ms=50)
        assert inbox.rejected == 3 and len(inbox._unassigned) == 2
    finally:
        outbox.close()
        inbox.close()
